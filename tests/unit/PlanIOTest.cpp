//===- PlanIOTest.cpp - Plan format, loader, validator and printer --------===//
//
// Builds a realistic plan by hand (a 4-rank ring allreduce plus a local copy
// threadblock with cross-threadblock dependencies) and checks that it
// round-trips, that its bytes are deterministic, that the validator names
// each kind of error precisely, and that the loader survives every corrupted,
// flipped and truncated version of its bytes.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/PlanIO.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <iomanip>
#include <memory>
#include <new>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>

//===----------------------------------------------------------------------===//
// Allocation tracking: hostile counts must fail before any large allocation.
//===----------------------------------------------------------------------===//

namespace {
std::atomic<size_t> largestAllocation{0};

void *trackedAlloc(size_t n) {
  size_t prev = largestAllocation.load(std::memory_order_relaxed);
  while (n > prev && !largestAllocation.compare_exchange_weak(prev, n, std::memory_order_relaxed))
    ;
  return std::malloc(n ? n : 1);
}
} // namespace

// The replacements pair malloc with free; with inlining (sanitizer builds)
// GCC cannot see that and warns.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void *operator new(size_t n) {
  if (void *p = trackedAlloc(n))
    return p;
  throw std::bad_alloc();
}
void *operator new(size_t n, const std::nothrow_t &) noexcept {
  return trackedAlloc(n);
}
void operator delete(void *p) noexcept {
  std::free(p);
}
void operator delete(void *p, size_t) noexcept {
  std::free(p);
}
void operator delete(void *p, const std::nothrow_t &) noexcept {
  std::free(p);
}

using namespace coll;

namespace {

//===----------------------------------------------------------------------===//
// Building plans
//===----------------------------------------------------------------------===//

Instruction step(Opcode op, uint32_t count = 1) {
  Instruction in;
  in.op = op;
  in.count = count;
  return in;
}
Instruction withSrc(Instruction in, BufferKind buf, uint32_t off) {
  in.srcBuf = buf;
  in.srcOff = off;
  return in;
}
Instruction withDst(Instruction in, BufferKind buf, uint32_t off) {
  in.dstBuf = buf;
  in.dstOff = off;
  return in;
}
/// Appends \p deps to \p tb and points step \p i at them.
void addDeps(Threadblock &tb, uint32_t i, std::vector<Dependency> deps) {
  tb.steps[i].depBegin = uint32_t(tb.deps.size());
  tb.steps[i].depCount = uint32_t(deps.size());
  tb.deps.insert(tb.deps.end(), deps.begin(), deps.end());
}

/// A ring allreduce over \p n ranks with \p n chunks. Each rank's
/// threadblock 0 sends to r+1 and receives from r-1: first the
/// reduce-scatter phase (chunk c starts at rank c and is reduced around the
/// ring until rank c-1 holds the sum), then the all-gather phase (the sum
/// is forwarded around the ring). Threadblock 1 copies the rank's own input
/// chunk to scratch once it has been sent, and the final chunk to the output.
Plan makeRingPlan(uint32_t n = 4) {
  Plan plan;
  plan.info.name = "ring_allreduce";
  plan.info.collective = CollectiveKind::AllReduce;
  plan.info.nranks = n;
  plan.info.inputChunks = n;
  plan.info.outputChunks = n;
  plan.info.protocol = ProtocolKind::Simple;
  plan.info.connectionDepth = 4;
  plan.info.instances = 1;
  auto mod = [n](int64_t v) { return uint32_t(((v % n) + n) % n); };
  const auto I = BufferKind::Input;
  for (uint32_t r = 0; r < n; ++r) {
    RankPlan rp;
    rp.scratchChunks = 1;
    Threadblock ring;
    ring.sendPeer = int32_t(mod(r + 1));
    ring.recvPeer = int32_t(mod(int64_t(r) - 1));
    // Reduce-scatter: send our chunk, then reduce what arrives and pass it on.
    ring.steps.push_back(withSrc(step(Opcode::Send), I, r));
    for (uint32_t s = 1; s + 1 < n; ++s)
      ring.steps.push_back(withSrc(step(Opcode::RecvReduceSend), I, mod(int64_t(r) - s)));
    uint32_t done = mod(int64_t(r) + 1);
    ring.steps.push_back(withDst(withSrc(step(Opcode::RecvReduceCopySend), I, done), I, done));
    // All-gather: store each reduced chunk and forward it, except the last.
    for (uint32_t k = 1; k + 1 < n; ++k)
      ring.steps.push_back(withDst(step(Opcode::RecvCopySend), I, mod(int64_t(r) + 1 - k)));
    ring.steps.push_back(withDst(step(Opcode::Recv), I, mod(int64_t(r) + 2 - n)));

    Threadblock local;
    local.steps.push_back(withDst(withSrc(step(Opcode::Copy), I, r), BufferKind::Scratch, 0));
    local.steps.push_back(
        withDst(withSrc(step(Opcode::Copy), BufferKind::Scratch, 0), BufferKind::Output, r));
    uint32_t last = uint32_t(ring.steps.size() - 1);
    addDeps(ring, 1, {{1, 0}});
    addDeps(local, 0, {{0, 0}});
    addDeps(local, 1, {{0, last}});
    rp.threadblocks.push_back(std::move(ring));
    rp.threadblocks.push_back(std::move(local));
    plan.ranks.push_back(std::move(rp));
  }
  return plan;
}

std::string validateMessage(const Plan &plan) {
  Status s = validatePlan(plan);
  return s.ok() ? "ok" : s.message();
}

std::string parseMessage(const std::vector<uint8_t> &bytes, int rank = -1) {
  Result<Plan> p = parsePlan(bytes.data(), bytes.size(), rank);
  return p.ok() ? "ok" : p.message();
}

std::string dump(const Plan &plan) {
  std::ostringstream os;
  printPlanText(plan, os);
  return os.str();
}

//===----------------------------------------------------------------------===//
// Byte surgery (layout from docs/plan-format.md)
//===----------------------------------------------------------------------===//

constexpr size_t headerBytes = 32;
constexpr size_t nameLenPos = 60;
constexpr size_t namePos = 64;

uint32_t getU32(const std::vector<uint8_t> &b, size_t pos) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= uint32_t(b.at(pos + i)) << (8 * i);
  return v;
}
uint64_t getU64(const std::vector<uint8_t> &b, size_t pos) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= uint64_t(b.at(pos + i)) << (8 * i);
  return v;
}
void putU32(std::vector<uint8_t> &b, size_t pos, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    b.at(pos + i) = uint8_t(v >> (8 * i));
}
void putU64(std::vector<uint8_t> &b, size_t pos, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    b.at(pos + i) = uint8_t(v >> (8 * i));
}
/// Recomputes the body checksum so that a corrupted field is what fails.
void fixChecksum(std::vector<uint8_t> &b) {
  putU64(b, 24, planChecksum(b.data() + headerBytes, b.size() - headerBytes));
}
size_t rankCountPos(const std::vector<uint8_t> &b) {
  return namePos + getU32(b, nameLenPos);
}
size_t tablePos(const std::vector<uint8_t> &b) {
  return rankCountPos(b) + 4;
}
size_t rankSection(const std::vector<uint8_t> &b, uint32_t rank) {
  return size_t(getU64(b, tablePos(b) + 16 * rank));
}

/// Parses \p len bytes from a buffer of exactly that size, so that the
/// sanitizers catch any read past the end.
Result<Plan> parseExact(const uint8_t *data, size_t len, int rank = -1) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[len]);
  if (len)
    std::memcpy(copy.get(), data, len);
  return parsePlan(len ? copy.get() : nullptr, len, rank);
}

//===----------------------------------------------------------------------===//
// Round trip, determinism, single-rank loading
//===----------------------------------------------------------------------===//

TEST(PlanTest, OpcodeTableComesFromDef) {
  EXPECT_EQ(numOpcodes(), 9u);
  const OpcodeInfo &rrcs = opcodeInfo(Opcode::RecvReduceCopySend);
  EXPECT_STREQ(rrcs.mnemonic, "rrcs");
  EXPECT_TRUE(rrcs.recv && rrcs.send && rrcs.readSrc && rrcs.writeDst && rrcs.reduce);
  const OpcodeInfo &s = opcodeInfo(Opcode::Send);
  EXPECT_STREQ(s.mnemonic, "s");
  EXPECT_TRUE(!s.recv && s.send && s.readSrc && !s.writeDst && !s.reduce);
  const OpcodeInfo &rcs = opcodeInfo(Opcode::RecvCopySend);
  EXPECT_TRUE(rcs.recv && rcs.send && !rcs.readSrc && rcs.writeDst && !rcs.reduce);
  EXPECT_STREQ(opcodeInfo(Opcode::Nop).mnemonic, "nop");
  std::set<std::string> mnemonics;
  for (unsigned i = 0; i < numOpcodes(); ++i)
    mnemonics.insert(opcodeInfo(static_cast<Opcode>(i)).mnemonic);
  EXPECT_EQ(mnemonics.size(), numOpcodes());
}

TEST(PlanTest, Names) {
  EXPECT_STREQ(bufferKindLetter(BufferKind::Input), "i");
  EXPECT_STREQ(bufferKindLetter(BufferKind::Output), "o");
  EXPECT_STREQ(bufferKindLetter(BufferKind::Scratch), "s");
  EXPECT_STREQ(collectiveName(CollectiveKind::AllReduce), "allreduce");
  EXPECT_STREQ(collectiveName(CollectiveKind::ReduceScatter), "reducescatter");
  EXPECT_STREQ(collectiveName(CollectiveKind::AllToAll), "alltoall");
  EXPECT_STREQ(collectiveName(CollectiveKind::Custom), "custom");
  EXPECT_STREQ(collectiveName(static_cast<CollectiveKind>(77)), "unknown");
  EXPECT_STREQ(protocolName(ProtocolKind::Simple), "Simple");
  EXPECT_STREQ(protocolName(ProtocolKind::LL), "LL");
  EXPECT_STREQ(protocolName(ProtocolKind::LL128), "LL128");
}

TEST(PlanIOTest, RingPlanIsValid) {
  Plan plan = makeRingPlan();
  EXPECT_EQ(validateMessage(plan), "ok");
  EXPECT_EQ(validateMessage(makeRingPlan(2)), "ok");
  EXPECT_EQ(validateMessage(makeRingPlan(16)), "ok");
}

TEST(PlanIOTest, RoundTrip) {
  for (uint32_t n : {2u, 3u, 4u, 9u}) {
    Plan plan = makeRingPlan(n);
    plan.info.inplace = n % 2 == 1;
    plan.info.protocol = n == 9 ? ProtocolKind::LL128 : ProtocolKind::LL;
    std::vector<uint8_t> bytes = serializePlan(plan);
    Result<Plan> back = parsePlan(bytes.data(), bytes.size());
    ASSERT_TRUE(back.ok()) << back.message();
    EXPECT_EQ(*back, plan) << "n = " << n;
    EXPECT_EQ(serializePlan(*back), bytes);
  }
}

TEST(PlanIOTest, BytesAreDeterministic) {
  Plan plan = makeRingPlan();
  std::vector<uint8_t> a = serializePlan(plan);
  std::vector<uint8_t> b = serializePlan(makeRingPlan());
  EXPECT_EQ(a, b);
  // The layout of docs/plan-format.md: 32 header + 32 info + 14 name +
  // 4 rank count + 4 * 16 table + 4 * (8 + (20 + 7 * 24 + 1 * 8) +
  // (20 + 2 * 24 + 2 * 8)) rank sections.
  ASSERT_EQ(a.size(), 1298u);
  EXPECT_EQ(std::string(a.begin(), a.begin() + 8), "COLLPLAN");
  EXPECT_EQ(getU32(a, 8), 1u);
  EXPECT_EQ(getU32(a, 12), 32u);
  EXPECT_EQ(getU64(a, 16), a.size() - 32);
  EXPECT_EQ(getU64(a, 24), planChecksum(a.data() + 32, a.size() - 32));
  EXPECT_EQ(getU32(a, 36), 4u);                     // nranks
  EXPECT_EQ(getU32(a, nameLenPos), 14u);            // name length
  EXPECT_EQ(getU32(a, rankCountPos(a)), 4u);        // rank count
  EXPECT_EQ(rankSection(a, 0), 146u);               // right after the table
  EXPECT_EQ(getU64(a, tablePos(a) + 8), 288u);      // rank 0 size
  EXPECT_EQ(rankSection(a, 3), 146u + 3 * 288u);    // contiguous
  EXPECT_EQ(getU32(a, rankSection(a, 2) + 8), 3u);  // rank 2 tb 0 sendPeer
  EXPECT_EQ(getU32(a, rankSection(a, 2) + 12), 1u); // rank 2 tb 0 recvPeer
  // FNV-1a 64 of the empty string and of "a" (published test vectors).
  EXPECT_EQ(planChecksum(nullptr, 0), 0xcbf29ce484222325ull);
  const uint8_t letterA = 'a';
  EXPECT_EQ(planChecksum(&letterA, 1), 0xaf63dc4c8601ec8cull);
}

TEST(PlanIOTest, SingleRankLoad) {
  Plan plan = makeRingPlan();
  std::vector<uint8_t> bytes = serializePlan(plan);
  for (int r = 0; r < 4; ++r) {
    Result<Plan> one = parsePlan(bytes.data(), bytes.size(), r);
    ASSERT_TRUE(one.ok()) << one.message();
    EXPECT_EQ(one->loadedRank, r);
    EXPECT_EQ(one->info, plan.info);
    ASSERT_EQ(one->ranks.size(), 1u);
    EXPECT_EQ(one->ranks[0], plan.ranks[r]);
    EXPECT_EQ(validateMessage(*one), "ok");
  }
  EXPECT_EQ(parseMessage(bytes, 4), "rank 4 requested, but the plan has 4 ranks");
  EXPECT_EQ(parseMessage(bytes, -2), "rank -2 requested, but the plan has 4 ranks");
}

TEST(PlanIOTest, SingleRankLoadDecodesOnlyThatRank) {
  // Rank 0's section holds an unknown opcode (with a valid checksum): the
  // other ranks still load alone, the whole plan does not.
  std::vector<uint8_t> bytes = serializePlan(makeRingPlan());
  bytes[rankSection(bytes, 0) + 28] = 42;
  fixChecksum(bytes);
  EXPECT_EQ(parseMessage(bytes), "rank 0 threadblock 0 step 0: unknown opcode 42");
  EXPECT_EQ(parseMessage(bytes, 0), "rank 0 threadblock 0 step 0: unknown opcode 42");
  EXPECT_EQ(parseMessage(bytes, 1), "ok");
  EXPECT_EQ(parseMessage(bytes, 3), "ok");
}

TEST(PlanIOTest, Files) {
  Plan plan = makeRingPlan();
  std::string path = ::testing::TempDir() + "planio_test_" + std::to_string(getpid()) + ".bin";
  ASSERT_TRUE(writePlanFile(plan, path).ok());
  Result<Plan> back = loadPlanFile(path);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(*back, plan);
  Result<Plan> one = loadPlanFile(path, 2);
  ASSERT_TRUE(one.ok()) << one.message();
  EXPECT_EQ(one->ranks[0], plan.ranks[2]);

  // Errors name the file.
  std::vector<uint8_t> bytes = serializePlan(plan);
  bytes[3] = 'X';
  std::FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  EXPECT_EQ(loadPlanFile(path).message(), path + ": bad magic (not a plan file)");
  std::remove(path.c_str());

  Result<Plan> missing = loadPlanFile(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.message(), "cannot open '" + path + "': No such file or directory");
  EXPECT_EQ(loadPlanFile(::testing::TempDir()).message(),
            "cannot read '" + ::testing::TempDir() + "': Is a directory");
  Status unwritable = writePlanFile(plan, "/nonexistent-dir/plan.bin");
  ASSERT_FALSE(unwritable.ok());
  EXPECT_EQ(unwritable.message().rfind("cannot open '/nonexistent-dir/plan.bin' for writing", 0),
            0u)
      << unwritable.message();
}

//===----------------------------------------------------------------------===//
// Text dump
//===----------------------------------------------------------------------===//

TEST(PlanIOTest, TextDump) {
  std::string text = dump(makeRingPlan());
  const char *rank0 =
      "plan ring_allreduce: allreduce, 4 ranks, input 4 chunks, output 4 chunks, protocol "
      "Simple, depth 4, instances 1, out-of-place\n"
      "rank 0: scratch 1 chunk, 2 threadblocks\n"
      "  tb 0: send 1, recv 3, channel 0, 7 steps\n"
      "    0: s    src i[0] count 1\n"
      "    1: rrs  src i[3] count 1 deps tb1:0\n"
      "    2: rrs  src i[2] count 1\n"
      "    3: rrcs src i[1] dst i[1] count 1\n"
      "    4: rcs  dst i[0] count 1\n"
      "    5: rcs  dst i[3] count 1\n"
      "    6: r    dst i[2] count 1\n"
      "  tb 1: channel 0, 2 steps\n"
      "    0: cpy  src i[0] dst s[0] count 1 deps tb0:0\n"
      "    1: cpy  src s[0] dst o[0] count 1 deps tb0:6\n"
      "rank 1: scratch 1 chunk, 2 threadblocks\n";
  EXPECT_EQ(text.substr(0, std::strlen(rank0)), rank0);
  EXPECT_NE(text.find("rank 3: scratch 1 chunk, 2 threadblocks\n"
                      "  tb 0: send 0, recv 2, channel 0, 7 steps\n"
                      "    0: s    src i[3] count 1\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 4 * 12);
  EXPECT_EQ(dump(makeRingPlan()), text) << "stable";
}

TEST(PlanIOTest, TextDumpVariants) {
  Plan plan;
  plan.info.name = "bcast\nx";
  plan.info.collective = CollectiveKind::Broadcast;
  plan.info.root = 1;
  plan.info.nranks = 2;
  plan.info.inputChunks = 1;
  plan.info.outputChunks = 1;
  plan.info.protocol = ProtocolKind::LL;
  plan.info.connectionDepth = 8;
  plan.info.instances = 2;
  plan.info.inplace = true;
  RankPlan rp;
  Threadblock a, b, c;
  a.steps.push_back(step(Opcode::Nop, 0));
  b.channel = 3;
  b.steps.push_back(step(Opcode::Nop, 0));
  c.steps.push_back(
      withDst(withSrc(step(Opcode::Reduce), BufferKind::Output, 0), BufferKind::Input, 0));
  addDeps(c, 0, {{0, 0}, {1, 0}});
  rp.threadblocks = {a, b, c};
  plan.ranks.push_back(rp);
  plan.loadedRank = 1;
  EXPECT_EQ(validateMessage(plan), "ok");
  EXPECT_EQ(dump(plan), "plan bcast\\x0ax: broadcast root 1, 2 ranks, input 1 chunk, output 1 "
                        "chunk, protocol LL, depth 8, instances 2, in-place\n"
                        "loaded for rank 1 only\n"
                        "rank 1: scratch 0 chunks, 3 threadblocks\n"
                        "  tb 0: channel 0, 1 step\n"
                        "    0: nop\n"
                        "  tb 1: channel 3, 1 step\n"
                        "    0: nop\n"
                        "  tb 2: channel 0, 1 step\n"
                        "    0: re   src o[0] dst i[0] count 1 deps tb0:0,tb1:0\n");
  // Invalid plans print without crashing.
  plan.ranks[0].threadblocks[2].steps[0].op = static_cast<Opcode>(99);
  plan.ranks[0].threadblocks[2].steps[0].depCount = 5;
  plan.info.collective = static_cast<CollectiveKind>(50);
  std::string text = dump(plan);
  EXPECT_NE(text.find("    0: op?99 src o[0] dst i[0] count 1 deps ?0+5\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("collective?50"), std::string::npos) << text;
}

//===----------------------------------------------------------------------===//
// Validation: every kind of error, with its exact message
//===----------------------------------------------------------------------===//

/// A ring plan changed by \p edit, validated.
template <typename Edit> std::string validateEdited(Edit edit) {
  Plan plan = makeRingPlan();
  edit(plan);
  return validateMessage(plan);
}
Threadblock &tbOf(Plan &p, uint32_t rank, uint32_t tb) {
  return p.ranks[rank].threadblocks[tb];
}

/// A change to the ring plan and the validator's message for it ("ok" for
/// a change that keeps the plan valid).
struct PlanEdit {
  const char *name;
  void (*edit)(Plan &);
  std::string expected;
};
void PrintTo(const PlanEdit &c, std::ostream *os) {
  *os << c.name;
}
struct PlanEditName {
  std::string operator()(const ::testing::TestParamInfo<PlanEdit> &info) const {
    return info.param.name;
  }
};

class ValidateEditedPlan : public ::testing::TestWithParam<PlanEdit> {};

TEST_P(ValidateEditedPlan, GivesItsMessage) {
  EXPECT_EQ(validateEdited(GetParam().edit), GetParam().expected);
}

const PlanEdit PlanEdits[] = {
    // Opcodes and unused fields.
    PlanEdit{"UnknownOpcode42",
             [](Plan &p) { tbOf(p, 1, 0).steps[2].op = static_cast<Opcode>(42); },
             "rank 1 threadblock 0 step 2: unknown opcode 42"},
    PlanEdit{"UnknownOpcode9",
             [](Plan &p) { tbOf(p, 1, 0).steps[2].op = static_cast<Opcode>(9); },
             "rank 1 threadblock 0 step 2: unknown opcode 9"},
    PlanEdit{"ZeroCount", [](Plan &p) { tbOf(p, 0, 0).steps[0].count = 0; },
             "rank 0 threadblock 0 step 0: count is 0, must be at least 1"},
    PlanEdit{"NopWithCount",
             [](Plan &p) {
               Instruction nop = step(Opcode::Nop, 3);
               tbOf(p, 0, 1).steps.push_back(nop);
             },
             "rank 0 threadblock 1 step 2: opcode nop has count 3; unused fields must be zero"},
    PlanEdit{"SendWithDestinationSet", [](Plan &p) { tbOf(p, 0, 0).steps[0].dstOff = 1; },
             "rank 0 threadblock 0 step 0: opcode s has no destination, but its destination "
             "fields are set (buffer kind 0, offset 1); unused fields must be zero"},
    PlanEdit{"RecvCopySendWithSourceSet",
             [](Plan &p) { tbOf(p, 2, 0).steps[4].srcBuf = BufferKind::Scratch; },
             "rank 2 threadblock 0 step 4: opcode rcs has no source, but its source fields are "
             "set (buffer kind 2, offset 0); unused fields must be zero"},
    PlanEdit{"UnknownSourceBuffer",
             [](Plan &p) {
               tbOf(p, 0, 0).steps[0].srcBuf = static_cast<BufferKind>(numBufferKinds());
             },
             "rank 0 threadblock 0 step 0: unknown source buffer kind " +
                 std::to_string(numBufferKinds())},
    PlanEdit{"UnknownDestinationBuffer",
             [](Plan &p) { tbOf(p, 0, 1).steps[1].dstBuf = static_cast<BufferKind>(200); },
             "rank 0 threadblock 1 step 1: unknown destination buffer kind 200"},
    // Buffer ranges.
    PlanEdit{"SourcePastInput", [](Plan &p) { tbOf(p, 3, 0).steps[0].srcOff = 4; },
             "rank 3 threadblock 0 step 0: source offset 4 + count 1 exceeds input buffer (4 "
             "chunks)"},
    PlanEdit{"SourceRangePastInput",
             [](Plan &p) {
               p.info.inputChunks = p.info.outputChunks = 16;
               tbOf(p, 3, 0).steps[0].srcOff = 15;
               tbOf(p, 3, 0).steps[0].count = 2;
             },
             "rank 3 threadblock 0 step 0: source offset 15 + count 2 exceeds input buffer (16 "
             "chunks)"},
    PlanEdit{
        "DestinationPastOutput", [](Plan &p) { tbOf(p, 2, 1).steps[1].dstOff = 9; },
        "rank 2 threadblock 1 step 1: destination offset 9 + count 1 exceeds output buffer "
        "(4 chunks)"},
    PlanEdit{"DestinationPastScratch", [](Plan &p) { tbOf(p, 0, 1).steps[0].dstOff = 1; },
             "rank 0 threadblock 1 step 0: destination offset 1 + count 1 exceeds scratch "
             "buffer (1 chunk)"},
    PlanEdit{"NoScratch", [](Plan &p) { p.ranks[1].scratchChunks = 0; },
             "rank 1 threadblock 1 step 0: destination offset 0 + count 1 exceeds scratch "
             "buffer (0 chunks)"},
    // offset + count wraps around in 32 bits; it must still be caught.
    PlanEdit{"SourceCountWraps",
             [](Plan &p) {
               tbOf(p, 0, 0).steps[0].srcOff = 1;
               tbOf(p, 0, 0).steps[0].count = 0xffffffffu;
             },
             "rank 0 threadblock 0 step 0: source offset 1 + count 4294967295 exceeds input "
             "buffer (4 chunks)"},
    PlanEdit{"DestinationOffsetWraps",
             [](Plan &p) {
               tbOf(p, 0, 1).steps[1].dstOff = 0xffffffffu;
               tbOf(p, 0, 1).steps[1].srcOff = 0;
             },
             "rank 0 threadblock 1 step 1: destination offset 4294967295 + count 1 exceeds "
             "output buffer (4 chunks)"},
    // Peers.
    PlanEdit{"SendPeerNotARank", [](Plan &p) { tbOf(p, 0, 0).sendPeer = 4; },
             "rank 0 threadblock 0: send peer 4 is not a rank (nranks 4)"},
    PlanEdit{"ReceivePeerNotARank", [](Plan &p) { tbOf(p, 2, 0).recvPeer = -2; },
             "rank 2 threadblock 0: receive peer -2 is not a rank (nranks 4)"},
    PlanEdit{"ReceiveFromOwnRank", [](Plan &p) { tbOf(p, 1, 0).recvPeer = 1; },
             "rank 1 threadblock 0: receive peer 1 is the threadblock's own rank"},
    PlanEdit{"SendToOwnRank", [](Plan &p) { tbOf(p, 3, 0).sendPeer = 3; },
             "rank 3 threadblock 0: send peer 3 is the threadblock's own rank"},
    // Steps that use a connection the threadblock does not have.
    PlanEdit{
        "SendWithoutSendPeer",
        [](Plan &p) {
          Instruction &in = tbOf(p, 0, 1).steps[0];
          in = withSrc(step(Opcode::Send), BufferKind::Input, 0);
          in.depCount = 1;
        },
        "rank 0 threadblock 1 step 0: opcode s sends, but the threadblock has no send peer"},
    PlanEdit{"ReceiveWithoutReceivePeer",
             [](Plan &p) {
               tbOf(p, 0, 1).steps[1] = withDst(step(Opcode::Recv), BufferKind::Output, 0);
             },
             "rank 0 threadblock 1 step 1: opcode r receives, but the threadblock has no "
             "receive peer"},
    // A peer without steps that use it is fine, even with no other end.
    PlanEdit{"UnusedPeersAreFine",
             [](Plan &p) {
               tbOf(p, 0, 1).sendPeer = 2;
               tbOf(p, 0, 1).recvPeer = 2;
             },
             "ok"},
    // Channels and connection owners.
    PlanEdit{"ChannelBeyondLimit", [](Plan &p) { tbOf(p, 0, 0).channel = 32; },
             "rank 0 threadblock 0: channel 32 is beyond the limit maxChannels (32)"},
    PlanEdit{"TwoSendersOnOneConnection", [](Plan &p) { tbOf(p, 0, 1).sendPeer = 1; },
             "rank 0: threadblocks 0 and 1 both send to rank 1 on channel 0"},
    PlanEdit{"TwoReceiversOnOneConnection", [](Plan &p) { tbOf(p, 2, 1).recvPeer = 1; },
             "rank 2: threadblocks 0 and 1 both receive from rank 1 on channel 0"},
    // The same peer on another channel is another connection.
    PlanEdit{"SamePeerOnAnotherChannelIsFine",
             [](Plan &p) {
               tbOf(p, 0, 1).sendPeer = 1;
               tbOf(p, 0, 1).channel = 1;
             },
             "ok"},
    // Dependencies.
    PlanEdit{
        "ThreadblockOutOfRange", [](Plan &p) { tbOf(p, 0, 1).deps[0].tb = 2; },
        "rank 0 threadblock 1 step 0 dependency 0: threadblock 2 is out of range (the rank "
        "has 2 threadblocks)"},
    PlanEdit{"StepOutOfRange", [](Plan &p) { tbOf(p, 1, 1).deps[1].step = 7; },
             "rank 1 threadblock 1 step 1 dependency 0: step 7 is out of range (threadblock 0 "
             "has 7 steps)"},
    PlanEdit{"WaitForOwnThreadblock",
             [](Plan &p) {
               tbOf(p, 0, 1).deps[0] = {1, 1};
             },
             "rank 0 threadblock 1 step 0 dependency 0: waits for its own threadblock (its "
             "steps already run in order)"},
    PlanEdit{"DependencyCountPastRecords", [](Plan &p) { tbOf(p, 0, 0).steps[1].depCount = 2; },
             "rank 0 threadblock 0 step 1: dependencies 0 + count 2 exceed the threadblock's 1 "
             "dependency record"},
    PlanEdit{"DependencyBeginWraps",
             [](Plan &p) { tbOf(p, 0, 0).steps[1].depBegin = 0xffffffffu; },
             "rank 0 threadblock 0 step 1: dependencies 4294967295 + count 1 exceed the "
             "threadblock's 1 dependency record"},
    PlanEdit{"TooManyDependencies",
             [](Plan &p) {
               Threadblock &tb = tbOf(p, 0, 0);
               tb.deps.assign(PlanLimits::maxDepsPerStep + 1, Dependency{1, 0});
               tb.steps[1].depCount = PlanLimits::maxDepsPerStep + 1;
             },
             "rank 0 threadblock 0 step 1: 1025 dependencies exceed the limit maxDepsPerStep "
             "(1024)"},
    // Duplicate dependencies and unreferenced records are harmless.
    PlanEdit{"DuplicateAndUnusedRecordsAreFine",
             [](Plan &p) {
               addDeps(tbOf(p, 0, 0), 2, {{1, 0}, {1, 0}});
               tbOf(p, 0, 0).deps.push_back({1, 1});
             },
             "ok"},
    // Dependency cycles.
    // tb0 step 1 waits for tb1 step 0, which now waits for tb0 step 1.
    PlanEdit{
        "TwoThreadblocks",
        [](Plan &p) {
          tbOf(p, 0, 1).deps[0] = {0, 1};
        },
        "rank 0: dependency cycle (each step waits for the next): tb0:1 -> tb1:0 -> tb0:1"},
    // A longer one: tb0 step 3 waits for tb1 step 1, which waits for tb0's
    // last step, which (through tb0's own order) waits for step 3.
    PlanEdit{"ThroughOwnOrder",
             [](Plan &p) {
               addDeps(tbOf(p, 2, 0), 3, {{1, 1}});
             },
             "rank 2: dependency cycle (each step waits for the next): tb0:6 -> tb0:3 -> tb1:1 "
             "-> tb0:6"},
    // Three threadblocks in a ring of waits.
    PlanEdit{"ThreeThreadblocks",
             [](Plan &p) {
               RankPlan &rp = p.ranks[1];
               Threadblock extra;
               extra.steps.push_back(step(Opcode::Nop, 0));
               addDeps(extra, 0, {{1, 1}});
               rp.threadblocks.push_back(extra);
               addDeps(rp.threadblocks[0], 0, {{2, 0}});
             },
             "rank 1: dependency cycle (each step waits for the next): tb0:0 -> tb2:0 -> tb1:1 "
             "-> tb1:0 -> tb0:0"},
    // Connections across ranks.
    // Rank 1 receives one message fewer than rank 0 sends.
    PlanEdit{
        "FewerReceivesThanSends",
        [](Plan &p) {
          tbOf(p, 1, 0).steps[6] =
              withDst(withSrc(step(Opcode::Copy), BufferKind::Input, 0), BufferKind::Output, 1);
        },
        "connection rank 0 -> rank 1 channel 0: rank 0 threadblock 0 sends 6 messages, but "
        "rank 1 threadblock 0 receives 5"},
    // Message sizes differ.
    PlanEdit{"LargerMessageSent", [](Plan &p) { tbOf(p, 2, 0).steps[0].count = 2; },
             "connection rank 2 -> rank 3 channel 0: message 0 is 2 chunks from rank 2 "
             "threadblock 0 step 0, but rank 3 threadblock 0 step 1 receives 1 chunk"},
    PlanEdit{"LargerMessageReceived",
             [](Plan &p) {
               tbOf(p, 3, 0).steps[6].count = 2;
               tbOf(p, 3, 0).steps[6].dstOff = 0;
             },
             "connection rank 2 -> rank 3 channel 0: message 5 is 1 chunk from rank 2 "
             "threadblock 0 step 5, but rank 3 threadblock 0 step 6 receives 2 chunks"},
    // A send with no receiving threadblock.
    PlanEdit{"SendWithoutReceiver", [](Plan &p) { tbOf(p, 1, 0).channel = 1; },
             "rank 0 threadblock 0 sends to rank 1 on channel 0, but no threadblock of rank 1 "
             "receives from rank 0 on channel 0"},
    // A receive with no sending threadblock.
    PlanEdit{
        "ReceiveWithoutSender", [](Plan &p) { tbOf(p, 3, 0).recvPeer = 1; },
        "rank 3 threadblock 0 receives from rank 1 on channel 0, but no threadblock of rank "
        "1 sends to rank 3 on channel 0"},
    // Plan info and limits.
    PlanEdit{"UnknownCollective",
             [](Plan &p) { p.info.collective = static_cast<CollectiveKind>(9); },
             "unknown collective 9"},
    PlanEdit{"UnknownProtocol", [](Plan &p) { p.info.protocol = static_cast<ProtocolKind>(3); },
             "unknown protocol 3"},
    PlanEdit{"ZeroRanks", [](Plan &p) { p.info.nranks = 0; },
             "nranks is 0, must be at least 1"},
    PlanEdit{"TooManyRanks", [](Plan &p) { p.info.nranks = PlanLimits::maxRanks + 1; },
             "nranks 65537 exceeds the limit maxRanks (65536)"},
    PlanEdit{"MoreRanksThanThePlanHolds", [](Plan &p) { p.info.nranks = 5; },
             "plan holds 4 ranks, but nranks is 5"},
    PlanEdit{"RootNotARank", [](Plan &p) { p.info.root = 4; },
             "root 4 is not a rank (nranks 4)"},
    PlanEdit{"RootOfACollectiveWithout", [](Plan &p) { p.info.root = 3; },
             "root 3 given, but allreduce has no root (it must be 0)"},
    PlanEdit{"TooManyInputChunks",
             [](Plan &p) { p.info.inputChunks = PlanLimits::maxChunks + 1; },
             "inputChunks 268435457 exceeds the limit maxChunks (268435456)"},
    PlanEdit{"TooManyOutputChunks", [](Plan &p) { p.info.outputChunks = 0xffffffffu; },
             "outputChunks 4294967295 exceeds the limit maxChunks (268435456)"},
    PlanEdit{"TooManyScratchChunks",
             [](Plan &p) { p.ranks[3].scratchChunks = PlanLimits::maxChunks + 1; },
             "rank 3: scratchChunks 268435457 exceeds the limit maxChunks (268435456)"},
    PlanEdit{"ZeroConnectionDepth", [](Plan &p) { p.info.connectionDepth = 0; },
             "connectionDepth is 0, must be at least 1"},
    PlanEdit{"ConnectionDepthOverLimit", [](Plan &p) { p.info.connectionDepth = 65; },
             "connectionDepth 65 exceeds the limit maxConnectionDepth (64)"},
    PlanEdit{"ZeroInstances", [](Plan &p) { p.info.instances = 0; },
             "instances is 0, must be at least 1"},
    PlanEdit{"TooManyInstances", [](Plan &p) { p.info.instances = 33; },
             "instances 33 exceeds the limit maxInstances (32)"},
    PlanEdit{"NameTooLong", [](Plan &p) { p.info.name.assign(1025, 'x'); },
             "name length 1025 exceeds the limit maxNameBytes (1024)"},
    PlanEdit{"LongestNameIsFine", [](Plan &p) { p.info.name.assign(1024, 'x'); }, "ok"},
    PlanEdit{
        "TooManyThreadblocks",
        [](Plan &p) { p.ranks[1].threadblocks.resize(PlanLimits::maxThreadblocksPerRank + 1); },
        "rank 1: 1025 threadblocks exceed the limit maxThreadblocksPerRank (1024)"},
    PlanEdit{"LoadedRankNotARank",
             [](Plan &p) {
               p.loadedRank = 4;
               p.ranks.resize(1);
             },
             "loaded rank 4 is not a rank (nranks 4)"},
    PlanEdit{"LoadedRankWithAllRanks", [](Plan &p) { p.loadedRank = 1; },
             "plan loaded for rank 1 holds 4 ranks, expected 1"},
    PlanEdit{"NegativeLoadedRank", [](Plan &p) { p.loadedRank = -7; },
             "loaded rank -7 is not a rank (nranks 4)"},
};

INSTANTIATE_TEST_SUITE_P(ValidateTest, ValidateEditedPlan, ::testing::ValuesIn(PlanEdits),
                         PlanEditName());

TEST(ValidateTest, LongDependencyChains) {
  // A long acyclic chain across threadblocks is fine (and not recursive).
  Plan plan;
  plan.info.nranks = 1;
  plan.info.connectionDepth = 1;
  plan.info.inputChunks = plan.info.outputChunks = 1;
  RankPlan rp;
  for (uint32_t t = 0; t < 4; ++t) {
    Threadblock tb;
    tb.steps.assign(200000, step(Opcode::Nop, 0));
    if (t > 0)
      for (uint32_t i = 0; i < tb.steps.size(); ++i)
        addDeps(tb, i, {{t - 1, i}});
    rp.threadblocks.push_back(std::move(tb));
  }
  plan.ranks.push_back(std::move(rp));
  EXPECT_EQ(validateMessage(plan), "ok");
  // Closing it into a cycle through 800000 steps is found and reported briefly.
  addDeps(plan.ranks[0].threadblocks[0], 0, {{3, 199999}});
  std::string msg = validateMessage(plan);
  EXPECT_EQ(msg.rfind("rank 0: dependency cycle (each step waits for the next): ", 0), 0u) << msg;
  EXPECT_LT(msg.size(), 1000u);
}

TEST(ValidateTest, SingleRankPlanSkipsCrossRankChecks) {
  // A single-rank plan skips the cross-rank checks.
  Plan plan = makeRingPlan();
  tbOf(plan, 2, 0).steps[0].count = 2;
  Plan one;
  one.info = plan.info;
  one.loadedRank = 2;
  one.ranks.push_back(plan.ranks[2]);
  EXPECT_EQ(validateMessage(one), "ok");
}

//===----------------------------------------------------------------------===//
// The loader against corrupt bytes
//===----------------------------------------------------------------------===//

/// One corruption of a field: where, how wide, the bad value, the message.
struct FieldCase {
  const char *field;
  size_t pos;
  int width; ///< 1, 4 or 8 bytes.
  uint64_t value;
  std::string expected;
};
void PrintTo(const FieldCase &c, std::ostream *os) {
  *os << c.field << " = " << c.value;
}

/// Names a case after its field and value: "rank 0 offset" = 147 is
/// rank0Offset_147.
struct FieldCaseName {
  std::string operator()(const ::testing::TestParamInfo<FieldCase> &info) const {
    std::string name;
    bool upper = false;
    for (const char *p = info.param.field; *p; ++p) {
      if (!std::isalnum(static_cast<unsigned char>(*p))) {
        upper = !name.empty();
        continue;
      }
      name += upper ? char(std::toupper(static_cast<unsigned char>(*p))) : *p;
      upper = false;
    }
    return name + "_" + std::to_string(info.param.value);
  }
};

/// The bytes of the 4-rank ring plan that the cases corrupt.
const std::vector<uint8_t> &ringBytes() {
  static const std::vector<uint8_t> bytes = serializePlan(makeRingPlan());
  return bytes;
}

/// Writes \p c's value over the ring plan's bytes, fixes the checksum up when
/// \p fixup (so that the field is what fails), and checks the loader's
/// message.
void checkFieldCase(const FieldCase &c, bool fixup) {
  std::vector<uint8_t> bytes = ringBytes();
  if (c.width == 1)
    bytes.at(c.pos) = uint8_t(c.value);
  else if (c.width == 4)
    putU32(bytes, c.pos, uint32_t(c.value));
  else
    putU64(bytes, c.pos, c.value);
  if (fixup)
    fixChecksum(bytes);
  largestAllocation = 0;
  Result<Plan> p = parseExact(bytes.data(), bytes.size());
  EXPECT_LT(largestAllocation.load(), 1u << 20) << c.field;
  ASSERT_FALSE(p.ok()) << c.field << " = " << c.value;
  EXPECT_EQ(p.message(), c.expected) << c.field << " = " << c.value;
}

TEST(PlanLoaderTest, RingPlanLayout) {
  // The positions the info and table cases write to.
  ASSERT_EQ(rankCountPos(ringBytes()), 78u);
  ASSERT_EQ(tablePos(ringBytes()), 82u);
}

/// Header fields, with the checksum left as it was.
std::vector<FieldCase> headerCases() {
  const std::vector<uint8_t> &good = ringBytes();
  uint64_t body = good.size() - 32;
  uint64_t sum = getU64(good, 24);
  std::ostringstream mismatch;
  mismatch << "checksum mismatch: header says 0x" << std::hex << std::setw(16) << std::setfill('0')
           << (sum ^ 1) << ", body hashes to 0x" << std::setw(16) << sum;
  return {
      {"magic[0]", 0, 1, 'c', "bad magic (not a plan file)"},
      {"magic[7]", 7, 1, 0, "bad magic (not a plan file)"},
      {"version", 8, 4, 7,
       "unsupported format version 7 (this runtime reads version 1): the plan was written "
       "by a future version"},
      {"version", 8, 4, 0, "unsupported format version 0 (this runtime reads version 1)"},
      {"header size", 12, 4, 40, "header size 40 does not match format version 1 (32 bytes)"},
      {"body size", 16, 8, body + 1,
       "truncated: body needs " + std::to_string(body + 1) + " bytes, " + std::to_string(body) +
           " remain"},
      {"body size", 16, 8, ~0ull,
       "truncated: body needs 18446744073709551615 bytes, " + std::to_string(body) + " remain"},
      {"body size", 16, 8, body - 1,
       "1 trailing byte after the body (header says " + std::to_string(body - 1) + " bytes)"},
      {"checksum", 24, 8, sum ^ 1, mismatch.str()},
  };
}

/// The plan info and the rank table, with the checksum fixed up.
std::vector<FieldCase> infoAndTableCases() {
  const std::vector<uint8_t> &good = ringBytes();
  size_t rc = rankCountPos(good), table = tablePos(good);
  uint64_t total = good.size();
  return {
      {"collective", 32, 1, 9, "unknown collective 9"},
      {"protocol", 33, 1, 3, "unknown protocol 3"},
      {"flags", 34, 1, 2, "truncated: contract section needs 8 bytes, 0 remain"},
      {"flags", 34, 1, 4,
       "unknown info flags 0x4 (version 1 defines 0x1, in-place, and 0x2, contract)"},
      {"flags", 34, 1, 0x81,
       "unknown info flags 0x80 (version 1 defines 0x1, in-place, and 0x2, contract)"},
      {"reserved", 35, 1, 1, "reserved info byte is 1, must be 0"},
      {"nranks", 36, 4, 0, "nranks is 0, must be at least 1"},
      {"nranks", 36, 4, 70000, "nranks 70000 exceeds the limit maxRanks (65536)"},
      {"nranks", 36, 4, 3, "rank table has 4 entries, but nranks is 3"},
      {"root", 40, 4, 4, "root 4 is not a rank (nranks 4)"},
      {"root", 40, 4, 2, "root 2 given, but allreduce has no root (it must be 0)"},
      {"inputChunks", 44, 4, 2,
       "allreduce plan has 2 input and 4 output chunks; expected as many output chunks as "
       "input chunks"},
      {"inputChunks", 44, 4, (1u << 28) + 1,
       "inputChunks 268435457 exceeds the limit maxChunks (268435456)"},
      {"outputChunks", 48, 4, 0,
       "allreduce plan has 4 input and 0 output chunks; expected as many output chunks as "
       "input chunks"},
      {"connectionDepth", 52, 4, 0, "connectionDepth is 0, must be at least 1"},
      {"connectionDepth", 52, 4, 65,
       "connectionDepth 65 exceeds the limit maxConnectionDepth (64)"},
      {"instances", 56, 4, 0, "instances is 0, must be at least 1"},
      {"instances", 56, 4, 1000, "instances 1000 exceeds the limit maxInstances (32)"},
      {"name length", 60, 4, 0xffffffff,
       "name length 4294967295 exceeds the limit maxNameBytes (1024)"},
      {"name length", 60, 4, 1025, "name length 1025 exceeds the limit maxNameBytes (1024)"},
      {"rank count", rc, 4, 3, "rank table has 3 entries, but nranks is 4"},
      {"rank count", rc, 4, 1, "rank table has 1 entry, but nranks is 4"},
      {"rank count", rc, 4, 0xffffffff,
       "rank table has 4294967295 entries, over the limit maxRanks (65536)"},
      {"rank count", rc, 4, 65536,
       "truncated: rank table (65536 ranks) needs 1048576 bytes, " +
           std::to_string(total - rc - 4) + " remain"},
      {"rank 0 offset", table, 8, 147,
       "rank 0 section offset 147, expected 146 (sections follow the rank table in rank "
       "order)"},
      {"rank 0 offset", table, 8, ~0ull,
       "rank 0 section offset 18446744073709551615, expected 146 (sections follow the rank "
       "table in rank order)"},
      {"rank 0 size", table + 8, 8, 289,
       "rank 1 section offset 434, expected 435 (sections follow the rank table in rank "
       "order)"},
      {"rank 0 size", table + 8, 8, ~0ull,
       "truncated: rank 0 section needs 18446744073709551615 bytes, 1152 remain"},
      {"rank 3 size", table + 56, 8, 287, "1 byte after the last rank section"},
      {"rank 3 size", table + 56, 8, 289, "truncated: rank 3 section needs 289 bytes, 288 remain"},
  };
}

/// Rank 0's section, with the checksum fixed up.
std::vector<FieldCase> rankCases() {
  const std::vector<uint8_t> &good = ringBytes();
  size_t sec = rankSection(good, 0);
  size_t tb0 = sec + 8, step0 = tb0 + 20, step1 = step0 + 24, deps0 = step0 + 7 * 24;
  size_t tb1 = deps0 + 8, deps1 = tb1 + 20 + 2 * 24;
  return {
      {"scratchChunks", sec, 4, (1u << 28) + 1,
       "rank 0: scratchChunks 268435457 exceeds the limit maxChunks (268435456)"},
      {"scratchChunks", sec, 4, 0,
       "rank 0 threadblock 1 step 0: destination offset 0 + count 1 exceeds scratch buffer "
       "(0 chunks)"},
      {"threadblock count", sec + 4, 4, 1025,
       "rank 0: 1025 threadblocks exceed the limit maxThreadblocksPerRank (1024)"},
      {"threadblock count", sec + 4, 4, 0xffffffff,
       "rank 0: 4294967295 threadblocks exceed the limit maxThreadblocksPerRank (1024)"},
      {"threadblock count", sec + 4, 4, 1024,
       "truncated: rank 0 section (1024 threadblocks) needs 20480 bytes, 280 remain"},
      {"threadblock count", sec + 4, 4, 3,
       "truncated: rank 0 threadblock 2 needs 20 bytes, 0 remain"},
      {"threadblock count", sec + 4, 4, 1,
       "rank 0 section has 84 unused bytes after its last threadblock"},
      {"sendPeer", tb0, 4, 4, "rank 0 threadblock 0: send peer 4 is not a rank (nranks 4)"},
      {"sendPeer", tb0, 4, uint32_t(-5),
       "rank 0 threadblock 0: send peer -5 is not a rank (nranks 4)"},
      {"sendPeer", tb0, 4, 0, "rank 0 threadblock 0: send peer 0 is the threadblock's own rank"},
      {"sendPeer", tb0, 4, uint32_t(-1),
       "rank 0 threadblock 0 step 0: opcode s sends, but the threadblock has no send peer"},
      {"recvPeer", tb0 + 4, 4, 2,
       "rank 0 threadblock 0 receives from rank 2 on channel 0, but no threadblock of rank 2 "
       "sends to rank 0 on channel 0"},
      {"channel", tb0 + 8, 4, 32,
       "rank 0 threadblock 0: channel 32 is beyond the limit maxChannels (32)"},
      {"step count", tb0 + 12, 4, 0xffffffff,
       "rank 0 threadblock 0: 4294967295 steps exceed the limit maxStepsPerThreadblock "
       "(16777216)"},
      {"step count", tb0 + 12, 4, 1u << 24,
       "truncated: rank 0 threadblock 0 steps (16777216) needs 402653184 bytes, 260 remain"},
      {"dep count", tb0 + 16, 4, 0xffffffff,
       "truncated: rank 0 threadblock 0 dependencies (4294967295) needs 34359738360 bytes, "
       "92 remain"},
      {"opcode", step0, 1, 9, "rank 0 threadblock 0 step 0: unknown opcode 9"},
      {"opcode", step0, 1, 255, "rank 0 threadblock 0 step 0: unknown opcode 255"},
      {"srcBuf", step0 + 1, 1, 3, "rank 0 threadblock 0 step 0: unknown source buffer kind 3"},
      {"dstBuf", step0 + 2, 1, 1,
       "rank 0 threadblock 0 step 0: opcode s has no destination, but its destination "
       "fields are set (buffer kind 1, offset 0); unused fields must be zero"},
      {"reserved", step0 + 3, 1, 1, "rank 0 threadblock 0 step 0: reserved byte is 1, must be 0"},
      {"srcOff", step0 + 4, 4, 17,
       "rank 0 threadblock 0 step 0: source offset 17 + count 1 exceeds input buffer (4 "
       "chunks)"},
      {"srcOff", step0 + 4, 4, 0xffffffff,
       "rank 0 threadblock 0 step 0: source offset 4294967295 + count 1 exceeds input "
       "buffer (4 chunks)"},
      {"count", step0 + 12, 4, 0, "rank 0 threadblock 0 step 0: count is 0, must be at least 1"},
      {"count", step0 + 12, 4, 2,
       "connection rank 0 -> rank 1 channel 0: message 0 is 2 chunks from rank 0 "
       "threadblock 0 step 0, but rank 1 threadblock 0 step 1 receives 1 chunk"},
      {"depBegin", step1 + 16, 4, 1,
       "rank 0 threadblock 0 step 1: dependencies 1 + count 1 exceed the threadblock's 1 "
       "dependency record"},
      {"depCount", step1 + 20, 4, 1025,
       "rank 0 threadblock 0 step 1: 1025 dependencies exceed the limit maxDepsPerStep "
       "(1024)"},
      {"dep tb", deps0, 4, 5,
       "rank 0 threadblock 0 step 1 dependency 0: threadblock 5 is out of range (the rank "
       "has 2 threadblocks)"},
      {"dep tb", deps0, 4, 0,
       "rank 0 threadblock 0 step 1 dependency 0: waits for its own threadblock (its steps "
       "already run in order)"},
      {"dep step", deps0 + 4, 4, 2,
       "rank 0 threadblock 0 step 1 dependency 0: step 2 is out of range (threadblock 1 has "
       "2 steps)"},
      {"dep step", deps1 + 4, 4, 1,
       "rank 0: dependency cycle (each step waits for the next): tb0:1 -> tb1:0 -> tb0:1"},
  };
}

class CorruptHeaderField : public ::testing::TestWithParam<FieldCase> {};
class CorruptBodyField : public ::testing::TestWithParam<FieldCase> {};

TEST_P(CorruptHeaderField, IsRejected) {
  checkFieldCase(GetParam(), /*fixup=*/false);
}
TEST_P(CorruptBodyField, IsRejected) {
  checkFieldCase(GetParam(), /*fixup=*/true);
}

INSTANTIATE_TEST_SUITE_P(PlanLoaderHeader, CorruptHeaderField, ::testing::ValuesIn(headerCases()),
                         FieldCaseName());
INSTANTIATE_TEST_SUITE_P(PlanLoaderInfoAndTable, CorruptBodyField,
                         ::testing::ValuesIn(infoAndTableCases()), FieldCaseName());
INSTANTIATE_TEST_SUITE_P(PlanLoaderRank, CorruptBodyField, ::testing::ValuesIn(rankCases()),
                         FieldCaseName());

TEST(PlanLoaderTest, EveryByteFlipped) {
  Plan plan = makeRingPlan(3);
  std::vector<uint8_t> good = serializePlan(plan);
  size_t accepted = 0;
  for (size_t pos = 0; pos < good.size(); ++pos) {
    for (uint8_t mask : {uint8_t(0xff), uint8_t(0x01), uint8_t(0x80)}) {
      std::vector<uint8_t> bytes = good;
      bytes[pos] ^= mask;
      // Without a fix-up the header or the checksum catches every change.
      Result<Plan> p = parseExact(bytes.data(), bytes.size());
      ASSERT_FALSE(p.ok()) << "byte " << pos << " ^ " << unsigned(mask);
      EXPECT_FALSE(p.message().empty());
      if (pos < headerBytes)
        continue;
      // With the checksum fixed up the field checks decide; what they accept
      // must re-serialize to exactly these bytes (the encoding is canonical).
      fixChecksum(bytes);
      for (int rank : {-1, 0, 2}) {
        Result<Plan> q = parseExact(bytes.data(), bytes.size(), rank);
        if (!q.ok()) {
          EXPECT_FALSE(q.message().empty());
          continue;
        }
        if (rank == -1) {
          ++accepted;
          EXPECT_EQ(serializePlan(*q), bytes) << "byte " << pos << " ^ " << unsigned(mask);
        }
      }
    }
  }
  // Flips inside the name (and a few harmless ones) are valid plans.
  EXPECT_GE(accepted, 14u * 3);
}

TEST(PlanLoaderTest, EveryTruncation) {
  std::vector<uint8_t> good = serializePlan(makeRingPlan(3));
  for (size_t len = 0; len < good.size(); ++len) {
    Result<Plan> p = parseExact(good.data(), len);
    ASSERT_FALSE(p.ok()) << len;
    if (len < headerBytes) {
      EXPECT_EQ(p.message(),
                "truncated: header needs 32 bytes, " + std::to_string(len) + " remain");
      continue;
    }
    EXPECT_EQ(p.message(), "truncated: body needs " + std::to_string(good.size() - 32) +
                               " bytes, " + std::to_string(len - 32) + " remain");
    // With the header patched to the shorter length, the body's own
    // structure must reject it.
    std::vector<uint8_t> cut(good.begin(), good.begin() + len);
    putU64(cut, 16, len - headerBytes);
    fixChecksum(cut);
    for (int rank : {-1, 1}) {
      Result<Plan> q = parseExact(cut.data(), cut.size(), rank);
      ASSERT_FALSE(q.ok()) << len;
      EXPECT_FALSE(q.message().empty());
    }
  }
  // Spot checks of the messages.
  auto cutAt = [&](size_t len) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + len);
    putU64(cut, 16, len - headerBytes);
    fixChecksum(cut);
    return parseMessage(cut);
  };
  EXPECT_EQ(cutAt(40), "truncated: plan info needs 32 bytes, 8 remain");
  EXPECT_EQ(cutAt(70), "truncated: name needs 14 bytes, 6 remain");
  EXPECT_EQ(cutAt(80), "truncated: rank count needs 4 bytes, 2 remain");
  EXPECT_EQ(cutAt(94), "truncated: rank table (3 ranks) needs 48 bytes, 12 remain");
  EXPECT_EQ(cutAt(good.size() - 1), "truncated: rank 2 section needs " +
                                        std::to_string(getU64(good, 82 + 40)) + " bytes, " +
                                        std::to_string(getU64(good, 82 + 40) - 1) + " remain");
}

TEST(PlanLoaderTest, HostileCountsFailFast) {
  // Each count below is as large as its field allows (or as large as the
  // limit allows) in a plan whose checksum is valid: parsing must fail on
  // the count before reserving anything for it.
  // The tracker sees allocations (so the checks below can fail).
  largestAllocation = 0;
  auto big = std::make_unique<std::vector<uint8_t>>(2u << 20);
  EXPECT_GE(largestAllocation.load(), big->size());
  big.reset();

  std::vector<uint8_t> good = serializePlan(makeRingPlan());
  size_t tb0 = rankSection(good, 1) + 8;
  struct Hostile {
    size_t pos;
    uint32_t value;
  };
  for (Hostile h : {Hostile{36, 65536}, Hostile{rankCountPos(good), 65536},
                    Hostile{rankCountPos(good), 0xffffffff}, Hostile{nameLenPos, 1024},
                    Hostile{nameLenPos, 0xffffffff}, Hostile{tb0 - 4, 1024},
                    Hostile{tb0 + 12, 1u << 24}, Hostile{tb0 + 12, 0xffffffff},
                    Hostile{tb0 + 16, 0xffffffff}, Hostile{tb0 + 16, 1u << 28}}) {
    std::vector<uint8_t> bytes = good;
    putU32(bytes, h.pos, h.value);
    if (h.pos == 36 || h.pos == rankCountPos(good)) {
      putU32(bytes, 36, h.value);
      putU32(bytes, rankCountPos(good), h.value);
    }
    fixChecksum(bytes);
    largestAllocation = 0;
    Result<Plan> p = parsePlan(bytes.data(), bytes.size());
    size_t largest = largestAllocation.load();
    ASSERT_FALSE(p.ok()) << h.pos << " = " << h.value;
    EXPECT_LT(largest, 64u << 10) << h.pos << " = " << h.value << ": " << p.message();
  }
  // A rank table claimed by nranks itself is also checked against the bytes.
  std::vector<uint8_t> bytes = good;
  putU32(bytes, 36, 65536);
  putU32(bytes, rankCountPos(good), 65536);
  fixChecksum(bytes);
  EXPECT_EQ(parseMessage(bytes), "truncated: rank table (65536 ranks) needs 1048576 bytes, " +
                                     std::to_string(good.size() - tablePos(good)) + " remain");
}

TEST(PlanLoaderTest, OddInputs) {
  EXPECT_EQ(parseExact(nullptr, 0).message(), "truncated: header needs 32 bytes, 0 remain");
  EXPECT_EQ(parsePlan(nullptr, 10).message(), "no plan data (null pointer, 10 bytes)");
  std::string text = "plan ring: not a binary plan at all, just some text\n";
  EXPECT_EQ(parseExact(reinterpret_cast<const uint8_t *>(text.data()), text.size()).message(),
            "bad magic (not a plan file)");
  // An empty-bodied plan with valid header: info is missing.
  std::vector<uint8_t> header(serializePlan(makeRingPlan()));
  header.resize(32);
  putU64(header, 16, 0);
  fixChecksum(header);
  EXPECT_EQ(parseMessage(header), "truncated: plan info needs 32 bytes, 0 remain");
  // A plan whose rank count disagrees with nranks serializes, but does not load.
  Plan plan = makeRingPlan();
  plan.ranks.pop_back();
  EXPECT_EQ(parseMessage(serializePlan(plan)), "rank table has 3 entries, but nranks is 4");
}

//===----------------------------------------------------------------------===//
// Contracts: a user-declared collective's post-conditions in the plan
//===----------------------------------------------------------------------===//

/// The ring plan, declared as a user collective whose contract says what
/// the ring computes: on every rank, output chunk c is the reduction of
/// every rank's input chunk c, except that rank 0's output chunk 0 is left
/// free and rank 1's output chunk 1 must be rank 1's own input chunk 1 (a
/// contract the instructions need not meet: only its form is checked here).
Plan makeContractPlan(uint32_t n = 3) {
  Plan plan = makeRingPlan(n);
  plan.info.name = "ring_custom";
  plan.info.collective = CollectiveKind::Custom;
  PlanContract c;
  for (uint32_t chunk = 0; chunk < n; ++chunk) {
    for (uint32_t r = 0; r < n; ++r)
      c.operands.push_back({r, chunk});
    c.termBegin.push_back(uint32_t(c.operands.size()));
  }
  c.operands.push_back({1, 1});
  c.termBegin.push_back(uint32_t(c.operands.size()));
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t chunk = 0; chunk < n; ++chunk)
      c.outputs.push_back(r == 0 && chunk == 0 ? 0 : r == 1 && chunk == 1 ? n + 1 : chunk + 1);
  plan.contract = c;
  return plan;
}

/// Where the contract section starts: after the last rank section.
size_t contractPos(const std::vector<uint8_t> &b) {
  uint32_t n = getU32(b, rankCountPos(b));
  size_t last = tablePos(b) + 16 * (n - 1);
  return size_t(getU64(b, last) + getU64(b, last + 8));
}

TEST(PlanContractTest, RoundTripsWholeAndForOneRank) {
  Plan plan = makeContractPlan();
  ASSERT_EQ(validateMessage(plan), "ok");
  std::vector<uint8_t> bytes = serializePlan(plan);
  EXPECT_EQ(bytes[34], 0x2) << "the contract flag";
  // 3 terms of 3 operands and one of 1, and 9 output entries.
  EXPECT_EQ(bytes.size() - contractPos(bytes), 8u + 4 * 4 + 8 * 10 + 4 * 9);
  Result<Plan> back = parseExact(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(*back, plan);
  EXPECT_EQ(serializePlan(*back), bytes);
  Result<Plan> one = parseExact(bytes.data(), bytes.size(), 2);
  ASSERT_TRUE(one.ok()) << one.message();
  ASSERT_TRUE(one->contract.has_value());
  EXPECT_EQ(*one->contract, *plan.contract);
  // Without a contract the same plan is still valid, and one flag smaller.
  plan.contract.reset();
  std::vector<uint8_t> bare = serializePlan(plan);
  EXPECT_EQ(bare[34], 0);
  EXPECT_EQ(bare.size(), contractPos(bytes));
  Result<Plan> bareBack = parseExact(bare.data(), bare.size());
  ASSERT_TRUE(bareBack.ok());
  EXPECT_FALSE(bareBack->contract.has_value());
}

TEST(PlanContractTest, DumpListsConstrainedOutputs) {
  std::string text = dump(makeContractPlan());
  EXPECT_NE(text.find("plan ring_custom: custom, 3 ranks"), std::string::npos) << text;
  size_t at = text.find("contract: 4 terms\n");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_EQ(text.substr(at), "contract: 4 terms\n"
                             "  output[0][1] = reduce(input[0][1], input[1][1], input[2][1])\n"
                             "  output[0][2] = reduce(input[0][2], input[1][2], input[2][2])\n"
                             "  output[1][0] = reduce(input[0][0], input[1][0], input[2][0])\n"
                             "  output[1][1] = input[1][1]\n"
                             "  output[1][2] = reduce(input[0][2], input[1][2], input[2][2])\n"
                             "  output[2][0] = reduce(input[0][0], input[1][0], input[2][0])\n"
                             "  output[2][1] = reduce(input[0][1], input[1][1], input[2][1])\n"
                             "  output[2][2] = reduce(input[0][2], input[1][2], input[2][2])\n");
}

TEST(PlanContractTest, ValidatorNamesEachError) {
  auto edited = [](auto edit) {
    Plan p = makeContractPlan();
    edit(p, *p.contract);
    return validateMessage(p);
  };
  EXPECT_EQ(edited([](Plan &p, PlanContract &) { p.info.collective = CollectiveKind::AllReduce; }),
            "the plan implements the built-in collective allreduce, whose post-condition is "
            "fixed, but carries a contract");
  EXPECT_EQ(edited([](Plan &, PlanContract &c) { c.operands[4].rank = 3; }),
            "contract: operand 4 names rank 3, not a rank (nranks 3)");
  EXPECT_EQ(edited([](Plan &, PlanContract &c) { c.operands[9].chunk = 3; }),
            "contract: operand 9 names input chunk 3 of rank 1, but the input has 3 chunks");
  EXPECT_EQ(edited([](Plan &, PlanContract &c) { c.termBegin[2] = c.termBegin[1]; }),
            "contract: term 1 ends at operand 3, not after its start 3 (a term has at least one "
            "operand)");
  EXPECT_EQ(edited([](Plan &, PlanContract &c) { c.termBegin.back() = 11; }),
            "contract: term 3 ends at operand 11, but there are 10 operands");
  EXPECT_EQ(edited([](Plan &, PlanContract &c) {
              c.operands.push_back({0, 0});
            }),
            "contract: the terms use 10 operands of 11");
  EXPECT_EQ(edited([](Plan &, PlanContract &c) { c.termBegin[0] = 1; }),
            "contract: the term table does not start at operand 0");
  EXPECT_EQ(edited([](Plan &, PlanContract &c) { c.outputs[7] = 5; }),
            "contract: output chunk 1 of rank 2 names term 4, but there are 4 terms");
  EXPECT_EQ(edited([](Plan &, PlanContract &c) { c.outputs.pop_back(); }),
            "contract: 8 output entries, expected one per output chunk of every rank (9)");
}

TEST(PlanContractTest, LoaderRejectsMalformedSections) {
  const std::vector<uint8_t> good = serializePlan(makeContractPlan());
  const size_t at = contractPos(good);
  auto edited = [&](auto edit) {
    std::vector<uint8_t> b = good;
    edit(b);
    putU64(b, 16, b.size() - headerBytes);
    fixChecksum(b);
    return parseMessage(b);
  };
  // The flag with no section, and a section with no flag.
  EXPECT_EQ(edited([&](std::vector<uint8_t> &b) { b.resize(at); }),
            "truncated: contract section needs 8 bytes, 0 remain");
  EXPECT_EQ(edited([&](std::vector<uint8_t> &b) { b[34] = 0; }),
            std::to_string(good.size() - at) + " bytes after the last rank section");
  EXPECT_EQ(edited([&](std::vector<uint8_t> &b) { b[34] = 0x6; }),
            "unknown info flags 0x4 (version 1 defines 0x1, in-place, and 0x2, contract)");
  EXPECT_EQ(edited([&](std::vector<uint8_t> &b) { b.push_back(0); }),
            "contract section has 1 unused byte after its outputs");
  EXPECT_EQ(edited([&](std::vector<uint8_t> &b) { putU32(b, at, 5); }),
            "truncated: contract section (5 terms, 10 operands, 9 output chunks) needs 136 "
            "bytes, 132 remain");
  // A term table that is not increasing is the validator's to name.
  EXPECT_EQ(edited([&](std::vector<uint8_t> &b) { putU32(b, at + 8, 0); }),
            "contract: term 0 ends at operand 0, not after its start 0 (a term has at least one "
            "operand)");
}

TEST(PlanContractTest, HostileCountsFailFast) {
  const std::vector<uint8_t> good = serializePlan(makeContractPlan());
  const size_t at = contractPos(good);
  for (auto [pos, value] : {std::pair<size_t, uint32_t>{at, 0xffffffff},
                            {at + 4, 0xffffffff},
                            {at, 1u << 28},
                            {at + 4, 1u << 28}}) {
    std::vector<uint8_t> b = good;
    putU32(b, pos, value);
    fixChecksum(b);
    largestAllocation = 0;
    std::string msg = parseMessage(b);
    EXPECT_EQ(msg.rfind("truncated: contract section (", 0), 0u) << msg;
    EXPECT_LT(largestAllocation.load(), 64u << 10) << msg;
  }
}

TEST(PlanContractTest, EveryByteFlippedAndEveryTruncation) {
  const std::vector<uint8_t> good = serializePlan(makeContractPlan());
  const size_t at = contractPos(good);
  size_t accepted = 0;
  for (size_t pos = at; pos < good.size(); ++pos)
    for (uint8_t mask : {uint8_t(0xff), uint8_t(0x01), uint8_t(0x80)}) {
      std::vector<uint8_t> b = good;
      b[pos] ^= mask;
      ASSERT_FALSE(parseExact(b.data(), b.size()).ok()) << "checksum catches byte " << pos;
      fixChecksum(b);
      for (int rank : {-1, 1}) {
        Result<Plan> q = parseExact(b.data(), b.size(), rank);
        if (!q.ok()) {
          EXPECT_FALSE(q.message().empty());
          continue;
        }
        if (rank == -1) {
          ++accepted;
          EXPECT_EQ(serializePlan(*q), b) << "byte " << pos;
        }
      }
    }
  // Flipping the low bit of an output entry or an operand's chunk can give
  // another valid contract.
  EXPECT_GT(accepted, 0u);
  for (size_t len = at; len < good.size(); ++len) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + len);
    putU64(cut, 16, len - headerBytes);
    fixChecksum(cut);
    Result<Plan> q = parseExact(cut.data(), cut.size());
    ASSERT_FALSE(q.ok()) << len;
    EXPECT_EQ(q.message().rfind("truncated: contract section", 0), 0u) << q.message();
  }
}

} // namespace
