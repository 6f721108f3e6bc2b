//===- Collectives.cpp - Buffer sizes and chunk units of collectives ------===//
//
// The count conventions of Executor.h (NCCL's): `count` elements make one
// rank's unit of C chunks; buffers of N*C chunks hold N*count elements.
// Every fact of a built-in collective comes from the columns of
// Collectives.def; a user-declared collective's unit is gcd(input, output)
// chunks.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/Executor.h"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace coll {

BufferElements collectiveBufferElements(CollectiveKind kind, uint32_t nranks, uint64_t count) {
  BufferElements e;
  e.input = count * bufferUnits(kind, /*output=*/false, nranks);
  e.output = count * bufferUnits(kind, /*output=*/true, nranks);
  return e;
}

uint32_t userCollectiveUnit(const PlanInfo &info) {
  return info.inputChunks && info.outputChunks ? std::gcd(info.inputChunks, info.outputChunks) : 0;
}

BufferElements planBufferElements(const PlanInfo &info, uint64_t count) {
  if (info.collective != CollectiveKind::Custom)
    return collectiveBufferElements(info.collective, info.nranks, count);
  const uint64_t c = userCollectiveUnit(info);
  BufferElements e;
  if (c == 0)
    return e;
  e.input = count * (info.inputChunks / c);
  e.output = count * (info.outputChunks / c);
  return e;
}

Result<uint32_t> planChunksPerUnit(const PlanInfo &info) {
  const CollectiveInfo &c = collectiveInfo(info.collective);
  if (info.collective == CollectiveKind::Custom) {
    if (info.inplace)
      return Status::error(std::string("plan '") + info.name +
                           "' implements a user-declared collective, which has no in-place "
                           "form, but the plan is in-place");
    const uint32_t unit = userCollectiveUnit(info);
    if (unit == 0)
      return Status::error(std::string("plan '") + info.name + "' has " +
                           std::to_string(info.inputChunks) + " input and " +
                           std::to_string(info.outputChunks) +
                           " output chunks; a user-declared collective needs at least one of "
                           "each");
    return unit;
  }
  const uint64_t n = info.nranks, in = info.inputChunks, out = info.outputChunks;
  const uint64_t inUnits = bufferUnits(info.collective, false, n);
  const uint64_t outUnits = bufferUnits(info.collective, true, n);
  auto bad = [&](const char *expected) {
    std::ostringstream os;
    os << c.name << " plan has " << in << " input and " << out << " output chunks; " << expected;
    return Status::error(os.str());
  };
  // C from the buffer with fewer units; the other must hold as many units.
  const uint64_t units = std::min(inUnits, outUnits);
  const uint64_t base = inUnits <= outUnits ? in : out;
  if (base % units != 0 || in * outUnits != out * inUnits) {
    if (inUnits == outUnits && units == 1)
      return bad("expected as many output chunks as input chunks");
    if (inUnits == outUnits)
      return bad("expected equal counts, a multiple of nranks");
    return bad(inUnits < outUnits ? "expected nranks times as many output chunks as input chunks"
                                  : "expected nranks times as many input chunks as output chunks");
  }
  const uint64_t chunks = base / units;
  if (chunks == 0)
    return bad("expected at least one chunk per rank");
  if (info.inplace && !hasInPlaceForm(info.collective))
    return Status::error(std::string(c.name) + " has no in-place form, but the plan is in-place");
  return uint32_t(chunks);
}

} // namespace coll
