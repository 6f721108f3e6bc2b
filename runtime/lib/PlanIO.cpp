//===- PlanIO.cpp - Reading, writing, checking and printing plans ---------===//
//
// The byte layout is documented field by field in docs/plan-format.md; the
// constants below are its numbers. The writer emits every field explicitly
// (never a struct image), so the same plan always gives the same bytes. The
// reader checks each count against the bytes that remain and against
// PlanLimits before it reserves memory, and leaves semantic checks (ranges,
// peers, dependencies, connections) to validatePlan, which also serves plans
// built in memory.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/PlanIO.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <memory>
#include <sstream>
#include <sys/stat.h>
#include <tuple>

namespace coll {

namespace {

//===----------------------------------------------------------------------===//
// Format constants (docs/plan-format.md)
//===----------------------------------------------------------------------===//

constexpr uint8_t planMagic[8] = {'C', 'O', 'L', 'L', 'P', 'L', 'A', 'N'};
constexpr uint32_t formatVersion = 1;
constexpr uint32_t headerBytes = 32;     ///< magic, version, header size, body size, checksum
constexpr uint32_t infoFixedBytes = 32;  ///< Plan info up to and including the name length.
constexpr uint32_t tableEntryBytes = 16; ///< Offset u64, size u64.
constexpr uint32_t rankHeaderBytes = 8;  ///< scratchChunks, threadblock count.
constexpr uint32_t tbHeaderBytes = 20;   ///< Peers, channel, step count, dependency count.
constexpr uint32_t stepBytes = 24;
constexpr uint32_t depBytes = 8;
constexpr uint8_t inplaceFlag = 0x1; ///< The only info flag of version 1.

// Header field positions.
constexpr size_t versionPos = 8;
constexpr size_t headerSizePos = 12;
constexpr size_t bodySizePos = 16;
constexpr size_t checksumPos = 24;

constexpr uint64_t fnvOffsetBasis = 0xcbf29ce484222325ull;
constexpr uint64_t fnvPrime = 0x100000001b3ull;

//===----------------------------------------------------------------------===//
// Small helpers
//===----------------------------------------------------------------------===//

/// Concatenates the streamed forms of \p args.
template <typename... Args> std::string cat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <typename... Args> Status fail(const Args &...args) {
  return Status::error(cat(args...));
}

std::string hex64(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(16) << std::setfill('0') << v;
  return os.str();
}

/// "1 chunk", "4 chunks"; "1 entry", "3 entries".
std::string plural(uint64_t n, const char *noun, const char *nouns = nullptr) {
  if (n == 1)
    return cat(n, ' ', noun);
  return nouns ? cat(n, ' ', nouns) : cat(n, ' ', noun, 's');
}

bool isValidOpcode(Opcode op) {
  return static_cast<unsigned>(op) < numOpcodes();
}
bool isValidBuffer(BufferKind kind) {
  return static_cast<unsigned>(kind) <= 2;
}
bool isValidCollective(CollectiveKind kind) {
  return static_cast<unsigned>(kind) <= static_cast<unsigned>(CollectiveKind::Custom);
}
bool isValidProtocol(ProtocolKind kind) {
  return static_cast<unsigned>(kind) <= static_cast<unsigned>(ProtocolKind::LL128);
}
bool isRooted(CollectiveKind kind) {
  return kind == CollectiveKind::Broadcast || kind == CollectiveKind::Reduce ||
         kind == CollectiveKind::Gather || kind == CollectiveKind::Scatter;
}

const char *bufferName(BufferKind kind) {
  switch (kind) {
  case BufferKind::Input:
    return "input";
  case BufferKind::Output:
    return "output";
  case BufferKind::Scratch:
    return "scratch";
  }
  return "unknown";
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

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

Status checkInfo(const PlanInfo &info);

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
  if (flags & ~inplaceFlag)
    return fail("unknown info flags 0x", std::hex, unsigned(flags & ~inplaceFlag),
                " (version 1 defines only 0x1, in-place)");
  info.inplace = (flags & inplaceFlag) != 0;
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
  if (expected != size)
    return fail(plural(size - expected, "byte"), " after the last rank section");

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

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

Status checkInfo(const PlanInfo &info) {
  if (!isValidCollective(info.collective))
    return fail("unknown collective ", unsigned(info.collective));
  if (!isValidProtocol(info.protocol))
    return fail("unknown protocol ", unsigned(info.protocol));
  if (info.name.size() > PlanLimits::maxNameBytes)
    return fail("name length ", info.name.size(), " exceeds the limit maxNameBytes (",
                PlanLimits::maxNameBytes, ")");
  if (info.nranks == 0)
    return fail("nranks is 0, must be at least 1");
  if (info.nranks > PlanLimits::maxRanks)
    return fail("nranks ", info.nranks, " exceeds the limit maxRanks (", PlanLimits::maxRanks, ")");
  if (info.root >= info.nranks)
    return fail("root ", info.root, " is not a rank (nranks ", info.nranks, ")");
  if (info.inputChunks > PlanLimits::maxChunks)
    return fail("inputChunks ", info.inputChunks, " exceeds the limit maxChunks (",
                PlanLimits::maxChunks, ")");
  if (info.outputChunks > PlanLimits::maxChunks)
    return fail("outputChunks ", info.outputChunks, " exceeds the limit maxChunks (",
                PlanLimits::maxChunks, ")");
  if (info.connectionDepth == 0)
    return fail("connectionDepth is 0, must be at least 1");
  if (info.connectionDepth > PlanLimits::maxConnectionDepth)
    return fail("connectionDepth ", info.connectionDepth, " exceeds the limit maxConnectionDepth (",
                PlanLimits::maxConnectionDepth, ")");
  if (info.instances == 0)
    return fail("instances is 0, must be at least 1");
  if (info.instances > PlanLimits::maxInstances)
    return fail("instances ", info.instances, " exceeds the limit maxInstances (",
                PlanLimits::maxInstances, ")");
  return Status::success();
}

/// Checks a threadblock's peer: -1 or another rank.
Status checkPeer(const std::string &where, const char *dir, int32_t peer, uint32_t rank,
                 uint32_t nranks) {
  if (peer == -1)
    return Status::success();
  if (peer < -1 || uint32_t(peer) >= nranks)
    return fail(where, ": ", dir, " peer ", peer, " is not a rank (nranks ", nranks, ")");
  if (uint32_t(peer) == rank)
    return fail(where, ": ", dir, " peer ", peer, " is the threadblock's own rank");
  return Status::success();
}

/// Checks one operand of a step: in range when the opcode uses it, zero when
/// it does not. Returns the reason it is wrong, or an empty string.
std::string operandError(const char *role, bool used, const char *opName, BufferKind buf,
                         uint32_t off, uint32_t count, const PlanInfo &info, const RankPlan &rp) {
  if (!used) {
    if (buf != BufferKind::Input || off != 0)
      return cat("opcode ", opName, " has no ", role, ", but its ", role,
                 " fields are set (buffer kind ", unsigned(buf), ", offset ", off,
                 "); unused fields must be zero");
    return {};
  }
  if (!isValidBuffer(buf))
    return cat("unknown ", role, " buffer kind ", unsigned(buf));
  uint32_t size = buf == BufferKind::Input    ? info.inputChunks
                  : buf == BufferKind::Output ? info.outputChunks
                                              : rp.scratchChunks;
  if (uint64_t(off) + count > size)
    return cat(role, " offset ", off, " + count ", count, " exceeds ", bufferName(buf), " buffer (",
               plural(size, "chunk"), ")");
  return {};
}

/// Finds a cycle among the rank's steps. Nodes are (threadblock, step);
/// a step waits for its predecessor in the threadblock and for its
/// dependencies. Iterative depth-first search over the wait-for edges,
/// O(nodes + edges).
Status checkCycles(const RankPlan &rp, uint32_t rank) {
  const auto &tbs = rp.threadblocks;
  std::vector<uint64_t> base(tbs.size() + 1, 0);
  for (size_t t = 0; t < tbs.size(); ++t)
    base[t + 1] = base[t] + tbs[t].steps.size();
  enum : uint8_t { White, Gray, Black };
  std::vector<uint8_t> color(base.back(), White);

  struct Frame {
    uint32_t tb, step;
    uint32_t next; ///< 0: the previous step; k >= 1: dependency k - 1.
  };
  std::vector<Frame> stack;
  auto node = [&](uint32_t tb, uint32_t step) { return base[tb] + step; };

  for (uint32_t root = 0; root < tbs.size(); ++root) {
    if (tbs[root].steps.empty())
      continue;
    // Every step of a threadblock is reachable from its last one.
    uint32_t lastStep = uint32_t(tbs[root].steps.size() - 1);
    if (color[node(root, lastStep)] != White)
      continue;
    color[node(root, lastStep)] = Gray;
    stack.push_back({root, lastStep, 0});
    while (!stack.empty()) {
      Frame &f = stack.back();
      const Instruction &in = tbs[f.tb].steps[f.step];
      if (f.next > in.depCount) {
        color[node(f.tb, f.step)] = Black;
        stack.pop_back();
        continue;
      }
      uint32_t k = f.next++;
      uint32_t pt, ps;
      if (k == 0) {
        if (f.step == 0)
          continue;
        pt = f.tb;
        ps = f.step - 1;
      } else {
        const Dependency &d = tbs[f.tb].deps[in.depBegin + k - 1];
        pt = d.tb;
        ps = d.step;
      }
      uint8_t c = color[node(pt, ps)];
      if (c == Black)
        continue;
      if (c == White) {
        color[node(pt, ps)] = Gray;
        stack.push_back({pt, ps, 0});
        continue;
      }
      // A gray node is on the stack: the frames from it to the top form the
      // cycle. Runs of steps within one threadblock are shown by their ends.
      size_t from = stack.size() - 1;
      while (stack[from].tb != pt || stack[from].step != ps)
        --from;
      std::ostringstream os;
      os << "rank " << rank << ": dependency cycle (each step waits for the next): ";
      const size_t maxShown = 32;
      size_t shown = 0;
      for (size_t i = from; i < stack.size(); ++i) {
        bool runInterior = i > from && i + 1 < stack.size() && stack[i - 1].tb == stack[i].tb &&
                           stack[i + 1].tb == stack[i].tb;
        if (runInterior)
          continue;
        if (shown == maxShown) {
          os << "... -> ";
          break;
        }
        os << "tb" << stack[i].tb << ':' << stack[i].step << " -> ";
        ++shown;
      }
      os << "tb" << pt << ':' << ps;
      return Status::error(os.str());
    }
  }
  return Status::success();
}

Status checkRank(const PlanInfo &info, const RankPlan &rp, uint32_t rank) {
  std::string where = cat("rank ", rank);
  if (rp.scratchChunks > PlanLimits::maxChunks)
    return fail(where, ": scratchChunks ", rp.scratchChunks, " exceeds the limit maxChunks (",
                PlanLimits::maxChunks, ")");
  if (rp.threadblocks.size() > PlanLimits::maxThreadblocksPerRank)
    return fail(where, ": ", rp.threadblocks.size(),
                " threadblocks exceed the limit maxThreadblocksPerRank (",
                PlanLimits::maxThreadblocksPerRank, ")");

  for (size_t t = 0; t < rp.threadblocks.size(); ++t) {
    const Threadblock &tb = rp.threadblocks[t];
    std::string tbWhere = cat(where, " threadblock ", t);
    if (tb.steps.size() > PlanLimits::maxStepsPerThreadblock)
      return fail(tbWhere, ": ", tb.steps.size(),
                  " steps exceed the limit maxStepsPerThreadblock (",
                  PlanLimits::maxStepsPerThreadblock, ")");
    if (tb.channel >= PlanLimits::maxChannels)
      return fail(tbWhere, ": channel ", tb.channel, " is beyond the limit maxChannels (",
                  PlanLimits::maxChannels, ")");
    if (Status s = checkPeer(tbWhere, "send", tb.sendPeer, rank, info.nranks); !s)
      return s;
    if (Status s = checkPeer(tbWhere, "receive", tb.recvPeer, rank, info.nranks); !s)
      return s;

    for (size_t i = 0; i < tb.steps.size(); ++i) {
      const Instruction &in = tb.steps[i];
      // Built only when a step fails, so the common path stays cheap.
      auto stepWhere = [&] { return cat(tbWhere, " step ", i); };
      if (!isValidOpcode(in.op))
        return fail(stepWhere(), ": unknown opcode ", unsigned(in.op));
      const OpcodeInfo &oi = opcodeInfo(in.op);
      if (oi.send && tb.sendPeer == -1)
        return fail(stepWhere(), ": opcode ", oi.mnemonic,
                    " sends, but the threadblock has no send peer");
      if (oi.recv && tb.recvPeer == -1)
        return fail(stepWhere(), ": opcode ", oi.mnemonic,
                    " receives, but the threadblock has no receive peer");
      if (in.op == Opcode::Nop) {
        if (in.count != 0)
          return fail(stepWhere(), ": opcode nop has count ", in.count,
                      "; unused fields must be zero");
      } else if (in.count == 0) {
        return fail(stepWhere(), ": count is 0, must be at least 1");
      }
      std::string bad =
          operandError("source", oi.readSrc, oi.mnemonic, in.srcBuf, in.srcOff, in.count, info, rp);
      if (bad.empty())
        bad = operandError("destination", oi.writeDst, oi.mnemonic, in.dstBuf, in.dstOff, in.count,
                           info, rp);
      if (!bad.empty())
        return fail(stepWhere(), ": ", bad);

      if (in.depCount > PlanLimits::maxDepsPerStep)
        return fail(stepWhere(), ": ", in.depCount,
                    " dependencies exceed the limit maxDepsPerStep (", PlanLimits::maxDepsPerStep,
                    ")");
      if (uint64_t(in.depBegin) + in.depCount > tb.deps.size())
        return fail(stepWhere(), ": dependencies ", in.depBegin, " + count ", in.depCount,
                    " exceed the threadblock's ", plural(tb.deps.size(), "dependency record"));
      for (uint32_t k = 0; k < in.depCount; ++k) {
        const Dependency &d = tb.deps[in.depBegin + k];
        if (d.tb >= rp.threadblocks.size())
          return fail(stepWhere(), " dependency ", k, ": threadblock ", d.tb,
                      " is out of range (the rank has ",
                      plural(rp.threadblocks.size(), "threadblock"), ")");
        if (d.tb == t)
          return fail(stepWhere(), " dependency ", k,
                      ": waits for its own threadblock (its steps already run in order)");
        size_t n = rp.threadblocks[d.tb].steps.size();
        if (d.step >= n)
          return fail(stepWhere(), " dependency ", k, ": step ", d.step,
                      " is out of range (threadblock ", d.tb, " has ", plural(n, "step"), ")");
      }
    }
  }

  // Each connection end belongs to one threadblock of the rank.
  std::vector<std::tuple<int32_t, uint32_t, uint32_t>> sends, recvs; // peer, channel, tb
  for (uint32_t t = 0; t < rp.threadblocks.size(); ++t) {
    const Threadblock &tb = rp.threadblocks[t];
    if (tb.sendPeer >= 0)
      sends.emplace_back(tb.sendPeer, tb.channel, t);
    if (tb.recvPeer >= 0)
      recvs.emplace_back(tb.recvPeer, tb.channel, t);
  }
  for (auto *list : {&sends, &recvs}) {
    std::sort(list->begin(), list->end());
    for (size_t i = 1; i < list->size(); ++i) {
      auto [p0, c0, t0] = (*list)[i - 1];
      auto [p1, c1, t1] = (*list)[i];
      if (p0 == p1 && c0 == c1)
        return fail(where, ": threadblocks ", t0, " and ", t1, " both ",
                    list == &sends ? "send to" : "receive from", " rank ", p0, " on channel ", c0);
    }
  }

  return checkCycles(rp, rank);
}

/// One end of a connection (from -> to, channel), owned by one threadblock.
struct ConnEnd {
  uint32_t from, to, channel, tb;
  bool operator<(const ConnEnd &o) const {
    return std::tie(from, to, channel) < std::tie(o.from, o.to, o.channel);
  }
};

/// Both ends of every connection agree on the number and sizes of messages.
Status checkConnections(const Plan &plan) {
  std::vector<ConnEnd> sends, recvs;
  for (uint32_t r = 0; r < plan.ranks.size(); ++r) {
    const auto &tbs = plan.ranks[r].threadblocks;
    for (uint32_t t = 0; t < tbs.size(); ++t) {
      if (tbs[t].sendPeer >= 0)
        sends.push_back({r, uint32_t(tbs[t].sendPeer), tbs[t].channel, t});
      if (tbs[t].recvPeer >= 0)
        recvs.push_back({uint32_t(tbs[t].recvPeer), r, tbs[t].channel, t});
    }
  }
  std::sort(sends.begin(), sends.end());
  std::sort(recvs.begin(), recvs.end());

  // The steps of \p tb that use the connection in direction \p send.
  auto messages = [](const Threadblock &tb, bool send) {
    std::vector<uint32_t> steps;
    for (uint32_t i = 0; i < tb.steps.size(); ++i) {
      const OpcodeInfo &oi = opcodeInfo(tb.steps[i].op);
      if (send ? oi.send : oi.recv)
        steps.push_back(i);
    }
    return steps;
  };

  size_t si = 0, ri = 0;
  while (si < sends.size() || ri < recvs.size()) {
    bool haveSend = si < sends.size(), haveRecv = ri < recvs.size();
    if (haveSend && (!haveRecv || sends[si] < recvs[ri])) {
      const ConnEnd &s = sends[si++];
      if (!messages(plan.ranks[s.from].threadblocks[s.tb], true).empty())
        return fail("rank ", s.from, " threadblock ", s.tb, " sends to rank ", s.to, " on channel ",
                    s.channel, ", but no threadblock of rank ", s.to, " receives from rank ",
                    s.from, " on channel ", s.channel);
      continue;
    }
    if (haveRecv && (!haveSend || recvs[ri] < sends[si])) {
      const ConnEnd &c = recvs[ri++];
      if (!messages(plan.ranks[c.to].threadblocks[c.tb], false).empty())
        return fail("rank ", c.to, " threadblock ", c.tb, " receives from rank ", c.from,
                    " on channel ", c.channel, ", but no threadblock of rank ", c.from,
                    " sends to rank ", c.to, " on channel ", c.channel);
      continue;
    }
    const ConnEnd &s = sends[si++];
    const ConnEnd &c = recvs[ri++];
    const Threadblock &stb = plan.ranks[s.from].threadblocks[s.tb];
    const Threadblock &rtb = plan.ranks[c.to].threadblocks[c.tb];
    std::vector<uint32_t> out = messages(stb, true), in = messages(rtb, false);
    std::string conn = cat("connection rank ", s.from, " -> rank ", s.to, " channel ", s.channel);
    if (out.size() != in.size())
      return fail(conn, ": rank ", s.from, " threadblock ", s.tb, " sends ",
                  plural(out.size(), "message"), ", but rank ", s.to, " threadblock ", c.tb,
                  " receives ", in.size());
    for (size_t m = 0; m < out.size(); ++m) {
      uint32_t sent = stb.steps[out[m]].count, got = rtb.steps[in[m]].count;
      if (sent != got)
        return fail(conn, ": message ", m, " is ", plural(sent, "chunk"), " from rank ", s.from,
                    " threadblock ", s.tb, " step ", out[m], ", but rank ", s.to, " threadblock ",
                    c.tb, " step ", in[m], " receives ", plural(got, "chunk"));
    }
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Printing
//===----------------------------------------------------------------------===//

/// The name with control and non-ASCII bytes escaped, so a dump stays one
/// line per item whatever the name holds.
std::string printableName(const std::string &name) {
  if (name.empty())
    return "(unnamed)";
  std::string out;
  for (unsigned char c : name) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

void printStep(const Threadblock &tb, uint32_t i, std::ostream &os) {
  const Instruction &in = tb.steps[i];
  std::ostringstream line;
  std::string mnemonic;
  bool valid = isValidOpcode(in.op);
  OpcodeInfo oi = valid ? opcodeInfo(in.op) : OpcodeInfo{"", false, false, true, true, false};
  mnemonic = valid ? oi.mnemonic : cat("op?", unsigned(in.op));
  line << mnemonic;
  std::vector<std::string> fields;
  auto operand = [](BufferKind buf, uint32_t off) {
    return cat(isValidBuffer(buf) ? bufferKindLetter(buf) : cat("?", unsigned(buf)), '[', off, ']');
  };
  if (oi.readSrc)
    fields.push_back("src " + operand(in.srcBuf, in.srcOff));
  if (oi.writeDst)
    fields.push_back("dst " + operand(in.dstBuf, in.dstOff));
  if (in.op != Opcode::Nop)
    fields.push_back(cat("count ", in.count));
  if (in.depCount > 0) {
    std::string deps = "deps ";
    if (uint64_t(in.depBegin) + in.depCount > tb.deps.size()) {
      deps += cat("?", in.depBegin, "+", in.depCount);
    } else {
      for (uint32_t k = 0; k < in.depCount; ++k) {
        const Dependency &d = tb.deps[in.depBegin + k];
        deps += cat(k ? "," : "", "tb", d.tb, ':', d.step);
      }
    }
    fields.push_back(deps);
  }
  os << "    " << i << ": ";
  if (fields.empty()) {
    os << mnemonic << '\n';
    return;
  }
  os << std::left << std::setw(4) << mnemonic << std::right;
  for (const std::string &f : fields)
    os << ' ' << f;
  os << '\n';
}

} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

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
  w.u8(info.inplace ? inplaceFlag : 0);
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
  return plan;
}

Result<Plan> loadPlanFile(const std::string &path, int rank) {
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
  Result<Plan> plan = parsePlan(bytes.data(), bytes.size(), rank);
  if (!plan)
    return fail(path, ": ", plan.message());
  return plan;
}

Status validatePlan(const Plan &plan) {
  const PlanInfo &info = plan.info;
  if (Status s = checkInfo(info); !s)
    return s;
  if (plan.loadedRank == -1) {
    if (plan.ranks.size() != info.nranks)
      return fail("plan holds ", plural(plan.ranks.size(), "rank"), ", but nranks is ",
                  info.nranks);
  } else {
    if (plan.loadedRank < -1 || uint32_t(plan.loadedRank) >= info.nranks)
      return fail("loaded rank ", plan.loadedRank, " is not a rank (nranks ", info.nranks, ")");
    if (plan.ranks.size() != 1)
      return fail("plan loaded for rank ", plan.loadedRank, " holds ",
                  plural(plan.ranks.size(), "rank"), ", expected 1");
  }
  for (size_t i = 0; i < plan.ranks.size(); ++i) {
    uint32_t rank = plan.loadedRank >= 0 ? uint32_t(plan.loadedRank) : uint32_t(i);
    if (Status s = checkRank(info, plan.ranks[i], rank); !s)
      return s;
  }
  if (plan.loadedRank == -1)
    return checkConnections(plan);
  return Status::success();
}

void printPlanText(const Plan &plan, std::ostream &os) {
  const PlanInfo &info = plan.info;
  os << "plan " << printableName(info.name) << ": ";
  if (isValidCollective(info.collective))
    os << collectiveName(info.collective);
  else
    os << "collective?" << unsigned(info.collective);
  if (isRooted(info.collective) || info.root != 0)
    os << " root " << info.root;
  os << ", " << plural(info.nranks, "rank") << ", input " << plural(info.inputChunks, "chunk")
     << ", output " << plural(info.outputChunks, "chunk") << ", protocol ";
  if (isValidProtocol(info.protocol))
    os << protocolName(info.protocol);
  else
    os << "protocol?" << unsigned(info.protocol);
  os << ", depth " << info.connectionDepth << ", instances " << info.instances << ", "
     << (info.inplace ? "in-place" : "out-of-place") << '\n';
  if (plan.loadedRank >= 0)
    os << "loaded for rank " << plan.loadedRank << " only\n";

  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const RankPlan &rp = plan.ranks[r];
    os << "rank " << (plan.loadedRank >= 0 ? uint64_t(plan.loadedRank) : uint64_t(r))
       << ": scratch " << plural(rp.scratchChunks, "chunk") << ", "
       << plural(rp.threadblocks.size(), "threadblock") << '\n';
    for (size_t t = 0; t < rp.threadblocks.size(); ++t) {
      const Threadblock &tb = rp.threadblocks[t];
      os << "  tb " << t << ':';
      if (tb.sendPeer != -1)
        os << " send " << tb.sendPeer << ',';
      if (tb.recvPeer != -1)
        os << " recv " << tb.recvPeer << ',';
      os << " channel " << tb.channel << ", " << plural(tb.steps.size(), "step") << '\n';
      for (uint32_t i = 0; i < tb.steps.size(); ++i)
        printStep(tb, i, os);
    }
  }
}

} // namespace coll
