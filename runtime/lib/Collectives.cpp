//===- Collectives.cpp - Buffer sizes and chunk units of collectives ------===//
//
// The count conventions of Executor.h (NCCL's): `count` elements make one
// rank's unit of C chunks; buffers of N*C chunks hold N*count elements.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/Executor.h"

#include <sstream>

namespace coll {

BufferElements collectiveBufferElements(CollectiveKind kind, uint32_t nranks, uint64_t count) {
  BufferElements e;
  e.input = e.output = count;
  switch (kind) {
  case CollectiveKind::AllGather:
  case CollectiveKind::Gather:
    e.output = count * nranks;
    break;
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::Scatter:
    e.input = count * nranks;
    break;
  case CollectiveKind::AllToAll:
    e.input = e.output = count * nranks;
    break;
  case CollectiveKind::AllReduce:
  case CollectiveKind::Broadcast:
  case CollectiveKind::Reduce:
  case CollectiveKind::Custom:
    break;
  }
  return e;
}

Result<uint32_t> planChunksPerUnit(const PlanInfo &info) {
  uint64_t n = info.nranks, in = info.inputChunks, out = info.outputChunks;
  const char *name = collectiveName(info.collective);
  auto bad = [&](const char *expected) {
    std::ostringstream os;
    os << name << " plan has " << in << " input and " << out << " output chunks; " << expected;
    return Status::error(os.str());
  };
  uint64_t c = 0;
  switch (info.collective) {
  case CollectiveKind::AllReduce:
  case CollectiveKind::Broadcast:
  case CollectiveKind::Reduce:
    if (in != out)
      return bad("expected as many output chunks as input chunks");
    c = in;
    break;
  case CollectiveKind::AllGather:
  case CollectiveKind::Gather:
    if (out != in * n)
      return bad("expected nranks times as many output chunks as input chunks");
    c = in;
    break;
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::Scatter:
    if (in != out * n)
      return bad("expected nranks times as many input chunks as output chunks");
    c = out;
    break;
  case CollectiveKind::AllToAll:
    if (in != out || in % n != 0)
      return bad("expected equal counts, a multiple of nranks");
    c = in / n;
    break;
  case CollectiveKind::Custom:
    return Status::error(std::string("plan '") + info.name +
                         "' implements a custom collective; the executors run built-in "
                         "collectives only");
  }
  if (c == 0)
    return bad("expected at least one chunk per rank");
  if (info.inplace &&
      (info.collective == CollectiveKind::Gather || info.collective == CollectiveKind::Scatter ||
       info.collective == CollectiveKind::AllToAll))
    return Status::error(std::string(name) + " has no in-place form, but the plan is in-place");
  return uint32_t(c);
}

bool collectiveDefinesOutput(CollectiveKind kind, uint32_t root, uint32_t rank) {
  if (kind == CollectiveKind::Reduce || kind == CollectiveKind::Gather)
    return rank == root;
  return true;
}

bool isInPlaceCall(CollectiveKind kind, uint32_t rank, const void *sendbuf, const void *recvbuf,
                   uint64_t unitBytes) {
  const char *in = static_cast<const char *>(sendbuf);
  const char *out = static_cast<const char *>(recvbuf);
  switch (kind) {
  case CollectiveKind::AllReduce:
  case CollectiveKind::Broadcast:
  case CollectiveKind::Reduce:
    return in == out;
  case CollectiveKind::AllGather:
    return in == out + rank * unitBytes;
  case CollectiveKind::ReduceScatter:
    return out == in + rank * unitBytes;
  default:
    return false;
  }
}

bool collectiveReduces(CollectiveKind kind) {
  return kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter ||
         kind == CollectiveKind::Reduce;
}

} // namespace coll
