//===- PlanReader.cpp - Reading plans -------------------------------------===//
//
// The reader checks each count against the bytes that remain and against
// PlanLimits before it reserves memory, and leaves semantic checks (ranges,
// peers, dependencies, connections) to validatePlan, which also serves plans
// built in memory.
//
//===----------------------------------------------------------------------===//

#include "PlanFormat.h"

#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <memory>
#include <sys/stat.h>

namespace coll {

using namespace planformat;

namespace {

std::string hex64(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(16) << std::setfill('0') << v;
  return os.str();
}

/// Reads little-endian fields from [pos, end). Callers check has() first; a
/// read past the end is a bug of ours, asserted, and still never touches
/// memory outside the range (it yields zero).
class ByteReader {
public:
  ByteReader(const uint8_t *data, size_t begin, size_t end) : data(data), pos(begin), end(end) {}
  uint64_t remaining() const { return end - pos; }
  bool has(uint64_t n) const { return n <= remaining(); }
  size_t position() const { return pos; }

  uint8_t u8() {
    if (!guard(1))
      return 0;
    return data[pos++];
  }
  uint32_t u32() {
    if (!guard(4))
      return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= uint32_t(data[pos + i]) << (8 * i);
    pos += 4;
    return v;
  }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  uint64_t u64() {
    if (!guard(8))
      return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= uint64_t(data[pos + i]) << (8 * i);
    pos += 8;
    return v;
  }
  void bytes(void *dst, size_t n) {
    if (!guard(n))
      return;
    std::memcpy(dst, data + pos, n);
    pos += n;
  }

private:
  bool guard(uint64_t n) {
    bool ok = has(n);
    assert(ok && "read past a checked range");
    return ok;
  }
  const uint8_t *data;
  size_t pos, end;
};

/// "truncated: WHAT needs N bytes, M remain".
Status truncated(const std::string &what, uint64_t need, uint64_t remain) {
  return fail("truncated: ", what, " needs ", need, " bytes, ", remain, " remain");
}

uint64_t readU64At(const uint8_t *data, size_t pos) {
  ByteReader r(data, pos, pos + 8);
  return r.u64();
}
uint32_t readU32At(const uint8_t *data, size_t pos) {
  ByteReader r(data, pos, pos + 4);
  return r.u32();
}

/// Decodes one rank section from \p r, which spans exactly that section.
Status readRank(ByteReader &r, uint32_t rank, RankPlan &rp) {
  std::string where = cat("rank ", rank);
  if (!r.has(rankHeaderBytes))
    return truncated(where + " section", rankHeaderBytes, r.remaining());
  rp.scratchChunks = r.u32();
  uint32_t numTbs = r.u32();
  if (numTbs > PlanLimits::maxThreadblocksPerRank)
    return fail(where, ": ", numTbs, " threadblocks exceed the limit maxThreadblocksPerRank (",
                PlanLimits::maxThreadblocksPerRank, ")");
  if (!r.has(uint64_t(numTbs) * tbHeaderBytes))
    return truncated(cat(where, " section (", numTbs, " threadblocks)"),
                     uint64_t(numTbs) * tbHeaderBytes, r.remaining());
  rp.threadblocks.resize(numTbs);

  for (uint32_t t = 0; t < numTbs; ++t) {
    Threadblock &tb = rp.threadblocks[t];
    std::string tbWhere = cat(where, " threadblock ", t);
    if (!r.has(tbHeaderBytes))
      return truncated(tbWhere, tbHeaderBytes, r.remaining());
    tb.sendPeer = r.i32();
    tb.recvPeer = r.i32();
    tb.channel = r.u32();
    uint32_t numSteps = r.u32();
    uint32_t numDeps = r.u32();
    if (numSteps > PlanLimits::maxStepsPerThreadblock)
      return fail(tbWhere, ": ", numSteps, " steps exceed the limit maxStepsPerThreadblock (",
                  PlanLimits::maxStepsPerThreadblock, ")");
    uint64_t stepsNeed = uint64_t(numSteps) * stepBytes;
    if (!r.has(stepsNeed))
      return truncated(cat(tbWhere, " steps (", numSteps, ")"), stepsNeed, r.remaining());
    uint64_t depsNeed = uint64_t(numDeps) * depBytes;
    if (!r.has(stepsNeed + depsNeed))
      return truncated(cat(tbWhere, " dependencies (", numDeps, ")"), depsNeed,
                       r.remaining() - stepsNeed);

    tb.steps.resize(numSteps);
    for (uint32_t i = 0; i < numSteps; ++i) {
      Instruction &in = tb.steps[i];
      // Enum values are stored as read; validatePlan names an unknown one.
      in.op = static_cast<Opcode>(r.u8());
      in.srcBuf = static_cast<BufferKind>(r.u8());
      in.dstBuf = static_cast<BufferKind>(r.u8());
      uint8_t reserved = r.u8();
      if (reserved != 0)
        return fail(tbWhere, " step ", i, ": reserved byte is ", unsigned(reserved), ", must be 0");
      in.srcOff = r.u32();
      in.dstOff = r.u32();
      in.count = r.u32();
      in.depBegin = r.u32();
      in.depCount = r.u32();
    }
    tb.deps.resize(numDeps);
    for (Dependency &d : tb.deps) {
      d.tb = r.u32();
      d.step = r.u32();
    }
  }
  if (r.remaining() != 0)
    return fail(where, " section has ", plural(r.remaining(), "unused byte"),
                " after its last threadblock");
  return Status::success();
}

/// Decodes the contract section from \p r, which spans the rest of the body.
Status readContract(ByteReader &r, const PlanInfo &info, PlanContract &c) {
  if (!r.has(contractHeaderBytes))
    return truncated("contract section", contractHeaderBytes, r.remaining());
  uint32_t numTerms = r.u32();
  uint32_t numOperands = r.u32();
  uint64_t need = 4ull * numTerms + 8ull * numOperands + 4ull * info.nranks * info.outputChunks;
  if (!r.has(need))
    return truncated(cat("contract section (", plural(numTerms, "term"), ", ",
                         plural(numOperands, "operand"), ", ",
                         plural(uint64_t(info.nranks) * info.outputChunks, "output chunk"), ")"),
                     need, r.remaining());
  if (r.remaining() != need)
    return fail("contract section has ", plural(r.remaining() - need, "unused byte"),
                " after its outputs");
  c.termBegin.resize(uint64_t(numTerms) + 1);
  c.termBegin[0] = 0;
  for (uint32_t t = 0; t < numTerms; ++t)
    c.termBegin[t + 1] = r.u32();
  c.operands.resize(numOperands);
  for (PlanContract::Operand &o : c.operands) {
    o.rank = r.u32();
    o.chunk = r.u32();
  }
  c.outputs.resize(uint64_t(info.nranks) * info.outputChunks);
  for (uint32_t &e : c.outputs)
    e = r.u32();
  return Status::success();
}

/// The body of parsePlan, filling \p plan.
Status parseInto(const uint8_t *data, size_t size, int rank, Plan &plan) {
  // Header: identify the file, then check the body is whole and intact
  // before interpreting any of it.
  if (size >= sizeof(planMagic) && std::memcmp(data, planMagic, sizeof(planMagic)) != 0)
    return fail("bad magic (not a plan file)");
  if (size < headerBytes)
    return truncated("header", headerBytes, size);
  uint32_t version = readU32At(data, versionPos);
  if (version != formatVersion) {
    if (version > formatVersion)
      return fail("unsupported format version ", version, " (this runtime reads version ",
                  formatVersion, "): the plan was written by a future version");
    return fail("unsupported format version ", version, " (this runtime reads version ",
                formatVersion, ")");
  }
  uint32_t headerSize = readU32At(data, headerSizePos);
  if (headerSize != headerBytes)
    return fail("header size ", headerSize, " does not match format version ", formatVersion, " (",
                headerBytes, " bytes)");
  if (uint64_t(size) > PlanLimits::maxFileBytes)
    return fail("plan is ", size, " bytes, over the limit maxFileBytes (", PlanLimits::maxFileBytes,
                ")");
  uint64_t bodySize = readU64At(data, bodySizePos);
  uint64_t bodyHave = size - headerBytes;
  if (bodySize > bodyHave)
    return truncated("body", bodySize, bodyHave);
  if (bodySize < bodyHave)
    return fail(plural(bodyHave - bodySize, "trailing byte"), " after the body (header says ",
                bodySize, " bytes)");
  uint64_t stored = readU64At(data, checksumPos);
  uint64_t actual = planChecksum(data + headerBytes, bodySize);
  if (stored != actual)
    return fail("checksum mismatch: header says ", hex64(stored), ", body hashes to ",
                hex64(actual));

  // Plan info.
  ByteReader r(data, headerBytes, size);
  if (!r.has(infoFixedBytes))
    return truncated("plan info", infoFixedBytes, r.remaining());
  PlanInfo &info = plan.info;
  info.collective = static_cast<CollectiveKind>(r.u8());
  info.protocol = static_cast<ProtocolKind>(r.u8());
  uint8_t flags = r.u8();
  uint8_t reserved = r.u8();
  info.nranks = r.u32();
  info.root = r.u32();
  info.inputChunks = r.u32();
  info.outputChunks = r.u32();
  info.connectionDepth = r.u32();
  info.instances = r.u32();
  uint32_t nameLen = r.u32();
  if (flags & ~knownFlags)
    return fail("unknown info flags 0x", std::hex, unsigned(flags & ~knownFlags),
                " (version 1 defines 0x1, in-place, and 0x2, contract)");
  info.inplace = (flags & inplaceFlag) != 0;
  const bool hasContract = (flags & contractFlag) != 0;
  if (reserved != 0)
    return fail("reserved info byte is ", unsigned(reserved), ", must be 0");
  if (nameLen > PlanLimits::maxNameBytes)
    return fail("name length ", nameLen, " exceeds the limit maxNameBytes (",
                PlanLimits::maxNameBytes, ")");
  if (!r.has(nameLen))
    return truncated("name", nameLen, r.remaining());
  info.name.resize(nameLen);
  r.bytes(info.name.data(), nameLen);
  // The info's own checks first: nranks sizes everything that follows.
  if (Status s = checkInfo(info); !s)
    return s;

  // Rank table. The sections follow it contiguously in rank order, which
  // makes the encoding canonical; the whole table is checked even when only
  // one rank is decoded.
  if (!r.has(4))
    return truncated("rank count", 4, r.remaining());
  uint32_t rankCount = r.u32();
  if (rankCount > PlanLimits::maxRanks)
    return fail("rank table has ", rankCount, " entries, over the limit maxRanks (",
                PlanLimits::maxRanks, ")");
  uint64_t tableNeed = uint64_t(rankCount) * tableEntryBytes;
  if (!r.has(tableNeed))
    return truncated(cat("rank table (", rankCount, " ranks)"), tableNeed, r.remaining());
  if (rankCount != info.nranks)
    return fail("rank table has ", plural(rankCount, "entry", "entries"), ", but nranks is ",
                info.nranks);
  if (rank < -1 || (rank >= 0 && uint64_t(rank) >= info.nranks))
    return fail("rank ", rank, " requested, but the plan has ", plural(info.nranks, "rank"));

  std::vector<std::pair<uint64_t, uint64_t>> sections(rankCount);
  uint64_t expected = r.position() + tableNeed;
  for (uint32_t i = 0; i < rankCount; ++i) {
    uint64_t offset = r.u64();
    uint64_t bytes = r.u64();
    if (offset != expected)
      return fail("rank ", i, " section offset ", offset, ", expected ", expected,
                  " (sections follow the rank table in rank order)");
    if (bytes > size - offset)
      return truncated(cat("rank ", i, " section"), bytes, size - offset);
    sections[i] = {offset, bytes};
    expected = offset + bytes;
  }
  if (!hasContract && expected != size)
    return fail(plural(size - expected, "byte"), " after the last rank section");
  if (hasContract) {
    ByteReader cr(data, expected, size);
    if (Status s = readContract(cr, info, plan.contract.emplace()); !s)
      return s;
  }

  // Rank sections.
  plan.loadedRank = rank;
  uint32_t first = rank >= 0 ? uint32_t(rank) : 0;
  uint32_t last = rank >= 0 ? uint32_t(rank) + 1 : rankCount;
  plan.ranks.resize(last - first);
  for (uint32_t i = first; i < last; ++i) {
    ByteReader rr(data, sections[i].first, sections[i].first + sections[i].second);
    if (Status s = readRank(rr, i, plan.ranks[i - first]); !s)
      return s;
  }
  return Status::success();
}

} // namespace

Result<Plan> parsePlan(const uint8_t *data, size_t size, int rank) {
  if (!data && size != 0)
    return fail("no plan data (null pointer, ", size, " bytes)");
  static const uint8_t empty = 0;
  if (!data)
    data = &empty;
  Plan plan;
  if (Status s = parseInto(data, size, rank, plan); !s)
    return s;
  if (Status s = validatePlan(plan); !s)
    return s;
  if (rank >= 0) {
    plan.sourceChecksum = storedChecksum(data, size);
    std::vector<uint8_t> own = serializePlan(plan);
    plan.parsedChecksum = storedChecksum(own.data(), own.size());
  }
  return plan;
}

Result<std::vector<uint8_t>> planformat::readPlanBytes(const std::string &path) {
  std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f)
    return fail("cannot open '", path, "': ", std::strerror(errno));
  struct stat st;
  if (fstat(fileno(f.get()), &st) == 0 && S_ISDIR(st.st_mode))
    return fail("cannot read '", path, "': ", std::strerror(EISDIR));
  // Size the buffer from the file, checked against the limit before reading.
  if (std::fseek(f.get(), 0, SEEK_END) != 0)
    return fail("cannot read '", path, "': ", std::strerror(errno));
  long end = std::ftell(f.get());
  if (end < 0)
    return fail("cannot read '", path, "': ", std::strerror(errno));
  if (uint64_t(end) > PlanLimits::maxFileBytes)
    return fail(path, ": plan is ", end, " bytes, over the limit maxFileBytes (",
                PlanLimits::maxFileBytes, ")");
  if (std::fseek(f.get(), 0, SEEK_SET) != 0)
    return fail("cannot read '", path, "': ", std::strerror(errno));
  std::vector<uint8_t> bytes(static_cast<size_t>(end));
  if (std::fread(bytes.data(), 1, bytes.size(), f.get()) != bytes.size())
    return fail("cannot read '", path, "': short read");
  return bytes;
}

uint64_t planformat::storedChecksum(const uint8_t *data, size_t size) {
  return size >= headerBytes ? readU64At(data, checksumPos) : 0;
}

Result<std::vector<uint8_t>> readPlanFile(const std::string &path) {
  return readPlanBytes(path);
}

Result<Plan> loadPlanFile(const std::string &path, int rank) {
  Result<std::vector<uint8_t>> bytes = readPlanBytes(path);
  if (!bytes)
    return bytes.getStatus();
  Result<Plan> plan = parsePlan(bytes->data(), bytes->size(), rank);
  if (!plan)
    return fail(path, ": ", plan.message());
  return plan;
}

} // namespace coll
