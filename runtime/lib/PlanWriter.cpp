//===- PlanWriter.cpp - Writing plans -------------------------------------===//
//
// The byte layout is documented field by field in docs/plan-format.md. The
// writer emits every field explicitly (never a struct image), so the same
// plan always gives the same bytes.
//
//===----------------------------------------------------------------------===//

#include "PlanFormat.h"

#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace coll {

using namespace planformat;

namespace {

/// Writes little-endian fields into a buffer sized in advance.
class ByteWriter {
public:
  explicit ByteWriter(std::vector<uint8_t> &out) : out(out) {}
  size_t position() const { return pos; }
  void u8(uint8_t v) {
    assert(pos + 1 <= out.size() && "write past the sized buffer");
    out[pos++] = v;
  }
  void u32(uint32_t v) {
    assert(pos + 4 <= out.size() && "write past the sized buffer");
    for (int i = 0; i < 4; ++i)
      out[pos++] = static_cast<uint8_t>(v >> (8 * i));
  }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void u64(uint64_t v) {
    assert(pos + 8 <= out.size() && "write past the sized buffer");
    for (int i = 0; i < 8; ++i)
      out[pos++] = static_cast<uint8_t>(v >> (8 * i));
  }
  void bytes(const void *p, size_t n) {
    assert(pos + n <= out.size() && "write past the sized buffer");
    if (n)
      std::memcpy(out.data() + pos, p, n);
    pos += n;
  }
  /// Overwrites the u64 at \p at.
  void patchU64(size_t at, uint64_t v) {
    assert(at + 8 <= out.size() && "patch past the end");
    for (int i = 0; i < 8; ++i)
      out[at + i] = static_cast<uint8_t>(v >> (8 * i));
  }

private:
  std::vector<uint8_t> &out;
  size_t pos = 0;
};

uint64_t rankSectionBytes(const RankPlan &rp) {
  uint64_t n = rankHeaderBytes;
  for (const Threadblock &tb : rp.threadblocks)
    n +=
        tbHeaderBytes + uint64_t(stepBytes) * tb.steps.size() + uint64_t(depBytes) * tb.deps.size();
  return n;
}

void writeRank(ByteWriter &w, const RankPlan &rp) {
  w.u32(rp.scratchChunks);
  w.u32(static_cast<uint32_t>(rp.threadblocks.size()));
  for (const Threadblock &tb : rp.threadblocks) {
    w.i32(tb.sendPeer);
    w.i32(tb.recvPeer);
    w.u32(tb.channel);
    w.u32(static_cast<uint32_t>(tb.steps.size()));
    w.u32(static_cast<uint32_t>(tb.deps.size()));
    for (const Instruction &in : tb.steps) {
      w.u8(static_cast<uint8_t>(in.op));
      w.u8(static_cast<uint8_t>(in.srcBuf));
      w.u8(static_cast<uint8_t>(in.dstBuf));
      w.u8(0); // reserved
      w.u32(in.srcOff);
      w.u32(in.dstOff);
      w.u32(in.count);
      w.u32(in.depBegin);
      w.u32(in.depCount);
    }
    for (const Dependency &d : tb.deps) {
      w.u32(d.tb);
      w.u32(d.step);
    }
  }
}

void writeContract(ByteWriter &w, const PlanContract &c) {
  w.u32(c.numTerms());
  w.u32(static_cast<uint32_t>(c.operands.size()));
  for (uint32_t t = 0; t < c.numTerms(); ++t)
    w.u32(c.termBegin[t + 1]);
  for (const PlanContract::Operand &o : c.operands) {
    w.u32(o.rank);
    w.u32(o.chunk);
  }
  for (uint32_t e : c.outputs)
    w.u32(e);
}

} // namespace

uint64_t planChecksum(const uint8_t *data, size_t size) {
  // FNV-1a 64: a changed byte always changes the hash (each step is a
  // bijection of the state), which the corruption tests rely on.
  uint64_t h = fnvOffsetBasis;
  for (size_t i = 0; i < size; ++i) {
    h ^= data[i];
    h *= fnvPrime;
  }
  return h;
}

std::vector<uint8_t> serializePlan(const Plan &plan) {
  const PlanInfo &info = plan.info;
  uint64_t tableEnd = headerBytes + infoFixedBytes + info.name.size() + 4 +
                      uint64_t(tableEntryBytes) * plan.ranks.size();
  uint64_t total = tableEnd;
  for (const RankPlan &rp : plan.ranks)
    total += rankSectionBytes(rp);
  if (plan.contract)
    total += contractSectionBytes(*plan.contract);

  std::vector<uint8_t> out(total);
  ByteWriter w(out);

  // Header; the body size and checksum are patched in at the end.
  w.bytes(planMagic, sizeof(planMagic));
  w.u32(formatVersion);
  w.u32(headerBytes);
  w.u64(0);
  w.u64(0);

  // Plan info.
  w.u8(static_cast<uint8_t>(info.collective));
  w.u8(static_cast<uint8_t>(info.protocol));
  w.u8(uint8_t((info.inplace ? inplaceFlag : 0) | (plan.contract ? contractFlag : 0)));
  w.u8(0); // reserved
  w.u32(info.nranks);
  w.u32(info.root);
  w.u32(info.inputChunks);
  w.u32(info.outputChunks);
  w.u32(info.connectionDepth);
  w.u32(info.instances);
  w.u32(static_cast<uint32_t>(info.name.size()));
  w.bytes(info.name.data(), info.name.size());

  // Rank table, then the sections in rank order.
  w.u32(static_cast<uint32_t>(plan.ranks.size()));
  uint64_t offset = tableEnd;
  for (const RankPlan &rp : plan.ranks) {
    uint64_t bytes = rankSectionBytes(rp);
    w.u64(offset);
    w.u64(bytes);
    offset += bytes;
  }
  assert(w.position() == tableEnd && "rank table size");
  for (const RankPlan &rp : plan.ranks)
    writeRank(w, rp);
  if (plan.contract)
    writeContract(w, *plan.contract);
  assert(w.position() == total && "plan size");

  w.patchU64(bodySizePos, out.size() - headerBytes);
  w.patchU64(checksumPos, planChecksum(out.data() + headerBytes, out.size() - headerBytes));
  return out;
}

Status writePlanFile(const Plan &plan, const std::string &path) {
  std::vector<uint8_t> bytes = serializePlan(plan);
  std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f)
    return fail("cannot open '", path, "' for writing: ", std::strerror(errno));
  if (std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size())
    return fail("cannot write '", path, "': ", std::strerror(errno));
  if (std::fclose(f.release()) != 0)
    return fail("cannot write '", path, "': ", std::strerror(errno));
  return Status::success();
}

} // namespace coll
