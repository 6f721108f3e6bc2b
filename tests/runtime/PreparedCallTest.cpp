//===- PreparedCallTest.cpp - The collective table and the call path -----===//
//
// Collective.h's columns and unitSource() against the definitions written
// out by hand; ValidatedPlan's identity; checkCall()'s order and wording;
// prepareCall()'s binding for every collective, plan form and call form;
// agree()'s verdicts.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/PreparedCall.h"

#include "HandPlans.h"
#include "coll/Runtime/PlanIO.h"

#include <cstdio>
#include <cstring>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>
#include <vector>

using namespace coll;
using namespace coll::test;

namespace {

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

/// What each collective computes, written out per collective: out[r][j]
/// holds in[rank][block], or the combination over every rank of in[*][block].
UnitSource byHand(CollectiveKind kind, uint32_t root, uint32_t r, uint32_t j) {
  switch (kind) {
  case CollectiveKind::AllReduce:
  case CollectiveKind::Reduce:
    return {true, 0, 0};
  case CollectiveKind::ReduceScatter:
    return {true, 0, r};
  case CollectiveKind::AllGather:
  case CollectiveKind::Gather:
    return {false, j, 0};
  case CollectiveKind::Broadcast:
    return {false, root, 0};
  case CollectiveKind::Scatter:
    return {false, root, r};
  case CollectiveKind::AllToAll:
    return {false, j, r};
  case CollectiveKind::Custom:
    break;
  }
  ADD_FAILURE() << "no definition of " << collectiveName(kind);
  return {};
}

TEST(CollectiveTable, UnitSourceIsEveryCollectivesDefinition) {
  const uint32_t n = 5, root = 3;
  for (unsigned k = 0; k < numBuiltinCollectives(); ++k) {
    const CollectiveKind kind = CollectiveKind(k);
    for (uint32_t r = 0; r < n; ++r)
      for (uint32_t j = 0; j < bufferUnits(kind, /*output=*/true, n); ++j) {
        UnitSource want = byHand(kind, root, r, j), got = unitSource(kind, root, r, j);
        EXPECT_EQ(got.everyRank, want.everyRank)
            << collectiveName(kind) << " r " << r << " j " << j;
        if (!want.everyRank) {
          EXPECT_EQ(got.rank, want.rank) << collectiveName(kind) << " r " << r << " j " << j;
        }
        EXPECT_EQ(got.block, want.block) << collectiveName(kind) << " r " << r << " j " << j;
      }
  }
}

TEST(CollectiveTable, ForEachOutputUnitVisitsDefinedUnitsAndSharesReductions) {
  auto visits = [](CollectiveKind kind, uint32_t n, uint32_t root) {
    std::string v;
    forEachOutputUnit(kind, n, root, [&](OutputUnit u, UnitSource s, const OutputUnit *same) {
      v += std::to_string(u.rank) + "." + std::to_string(u.block) + "<";
      v += s.everyRank ? "*" : std::to_string(s.rank);
      v += "." + std::to_string(s.block);
      if (same)
        v += "=" + std::to_string(same->rank) + "." + std::to_string(same->block);
      v += " ";
    });
    return v;
  };
  EXPECT_EQ(visits(CollectiveKind::AllReduce, 3, 0), "0.0<*.0 1.0<*.0=0.0 2.0<*.0=0.0 ");
  EXPECT_EQ(visits(CollectiveKind::ReduceScatter, 3, 0), "0.0<*.0 1.0<*.1 2.0<*.2 ");
  EXPECT_EQ(visits(CollectiveKind::Reduce, 3, 2), "2.0<*.0 ");
  EXPECT_EQ(visits(CollectiveKind::Gather, 2, 1), "1.0<0.0 1.1<1.0 ");
  EXPECT_EQ(visits(CollectiveKind::AllToAll, 2, 0), "0.0<0.0 0.1<1.0 1.0<0.1 1.1<1.1 ");
  EXPECT_EQ(visits(CollectiveKind::Scatter, 2, 1), "0.0<1.0 1.0<1.1 ");
}

TEST(CollectiveTable, Columns) {
  struct Row {
    CollectiveKind kind;
    const char *name;
    bool rooted, inByN, outByN, reduces, rootOutput;
    InPlaceAlias inPlace;
  };
  using A = InPlaceAlias;
  const Row rows[] = {
      {CollectiveKind::AllReduce, "allreduce", false, false, false, true, false, A::Same},
      {CollectiveKind::AllGather, "allgather", false, false, true, false, false, A::InputInOutput},
      {CollectiveKind::ReduceScatter, "reducescatter", false, true, false, true, false,
       A::OutputInInput},
      {CollectiveKind::Broadcast, "broadcast", true, false, false, false, false, A::Same},
      {CollectiveKind::Reduce, "reduce", true, false, false, true, true, A::Same},
      {CollectiveKind::Gather, "gather", true, false, true, false, true, A::None},
      {CollectiveKind::Scatter, "scatter", true, true, false, false, false, A::None},
      {CollectiveKind::AllToAll, "alltoall", false, true, true, false, false, A::None},
  };
  ASSERT_EQ(std::size(rows), numBuiltinCollectives());
  for (const Row &w : rows) {
    const CollectiveInfo &c = collectiveInfo(w.kind);
    EXPECT_EQ(c.kind, w.kind);
    EXPECT_STREQ(c.name, w.name);
    EXPECT_EQ(c.rooted, w.rooted) << w.name;
    EXPECT_EQ(c.inputByN, w.inByN) << w.name;
    EXPECT_EQ(c.outputByN, w.outByN) << w.name;
    EXPECT_EQ(c.reduces, w.reduces) << w.name;
    EXPECT_EQ(c.rootOutput, w.rootOutput) << w.name;
    EXPECT_EQ(c.inPlace, w.inPlace) << w.name;
    ASSERT_NE(findCollective(w.name), nullptr) << w.name;
    EXPECT_EQ(findCollective(w.name)->kind, w.kind);
    EXPECT_EQ(collectiveDefinesOutput(w.kind, 2, 1), !w.rootOutput) << w.name;
    EXPECT_TRUE(collectiveDefinesOutput(w.kind, 2, 2)) << w.name;
  }
  EXPECT_EQ(findCollective("custom"), nullptr);
  EXPECT_EQ(findCollective("allreduce "), nullptr);
  EXPECT_STREQ(collectiveName(CollectiveKind::Custom), "custom");
  EXPECT_STREQ(collectiveName(CollectiveKind(200)), "unknown");
  EXPECT_FALSE(collectiveInfo(CollectiveKind(200)).reduces);
}

TEST(CollectiveTable, BufferElementsAndChunksPerUnit) {
  // N = 4, count 10, C = 3.
  struct Row {
    CollectiveKind kind;
    uint64_t in, out;             ///< Elements for count 10.
    uint32_t inChunks, outChunks; ///< A plan with C = 3.
  };
  const Row rows[] = {
      {CollectiveKind::AllReduce, 10, 10, 3, 3},      {CollectiveKind::AllGather, 10, 40, 3, 12},
      {CollectiveKind::ReduceScatter, 40, 10, 12, 3}, {CollectiveKind::Broadcast, 10, 10, 3, 3},
      {CollectiveKind::Reduce, 10, 10, 3, 3},         {CollectiveKind::Gather, 10, 40, 3, 12},
      {CollectiveKind::Scatter, 40, 10, 12, 3},       {CollectiveKind::AllToAll, 40, 40, 12, 12},
  };
  for (const Row &w : rows) {
    BufferElements e = collectiveBufferElements(w.kind, 4, 10);
    EXPECT_EQ(e.input, w.in) << collectiveName(w.kind);
    EXPECT_EQ(e.output, w.out) << collectiveName(w.kind);
    PlanInfo info;
    info.name = "p";
    info.collective = w.kind;
    info.nranks = 4;
    info.inputChunks = w.inChunks;
    info.outputChunks = w.outChunks;
    Result<uint32_t> c = planChunksPerUnit(info);
    ASSERT_TRUE(c.ok()) << collectiveName(w.kind) << ": " << c.message();
    EXPECT_EQ(*c, 3u) << collectiveName(w.kind);
    // One chunk too many on the side that is by N (or on both sides).
    info.outputChunks = w.outChunks + 1;
    EXPECT_FALSE(planChunksPerUnit(info).ok()) << collectiveName(w.kind);
    info.outputChunks = w.outChunks;
    info.inplace = true;
    EXPECT_EQ(planChunksPerUnit(info).ok(), hasInPlaceForm(w.kind)) << collectiveName(w.kind);
  }
  PlanInfo a2a;
  a2a.name = "p";
  a2a.collective = CollectiveKind::AllToAll;
  a2a.nranks = 4;
  a2a.inputChunks = a2a.outputChunks = 6; // Not a multiple of 4.
  EXPECT_EQ(planChunksPerUnit(a2a).message(),
            "alltoall plan has 6 input and 6 output chunks; expected equal counts, a multiple of "
            "nranks");
  PlanInfo rs = a2a;
  rs.collective = CollectiveKind::ReduceScatter;
  rs.inputChunks = 8;
  rs.outputChunks = 3;
  EXPECT_EQ(planChunksPerUnit(rs).message(),
            "reducescatter plan has 8 input and 3 output chunks; expected nranks times as many "
            "input chunks as output chunks");
  rs.inputChunks = rs.outputChunks = 0;
  EXPECT_EQ(planChunksPerUnit(rs).message(),
            "reducescatter plan has 0 input and 0 output chunks; expected at least one chunk per "
            "rank");
}

//===----------------------------------------------------------------------===//
// ValidatedPlan
//===----------------------------------------------------------------------===//

TEST(ValidatedPlan, ChecksumIsTheFilesAndSurvivesLoadingOneRank) {
  Plan plan = ringAllReduce(3, 2);
  std::vector<uint8_t> bytes = serializePlan(plan);
  Result<ValidatedPlan> made = ValidatedPlan::make(plan);
  ASSERT_TRUE(made.ok()) << made.message();
  EXPECT_EQ(made->checksum(), planChecksum(bytes.data() + 32, bytes.size() - 32));
  EXPECT_EQ(made->chunksPerUnit(), 3u);
  EXPECT_TRUE(made->holdsEveryRank());

  Result<ValidatedPlan> whole = ValidatedPlan::parse(bytes.data(), bytes.size());
  ASSERT_TRUE(whole.ok()) << whole.message();
  EXPECT_EQ(whole->checksum(), made->checksum());
  Result<ValidatedPlan> one = ValidatedPlan::parse(bytes.data(), bytes.size(), 1);
  ASSERT_TRUE(one.ok()) << one.message();
  EXPECT_EQ(one->checksum(), made->checksum());
  EXPECT_FALSE(one->holdsEveryRank());
  EXPECT_EQ(one->section(0), nullptr);
  ASSERT_NE(one->section(1), nullptr);
  EXPECT_TRUE(*one->section(1) == plan.ranks[1]);

  // A section parsed for one rank and validated later keeps the file's
  // checksum too.
  Result<Plan> section = parsePlan(bytes.data(), bytes.size(), 2);
  ASSERT_TRUE(section.ok()) << section.message();
  EXPECT_EQ(section->sourceChecksum, made->checksum());
  EXPECT_EQ(ValidatedPlan::make(*section)->checksum(), made->checksum());
  // Changed since it was parsed, it no longer claims the file's identity.
  Plan changed = *section;
  changed.info.connectionDepth = 1;
  EXPECT_NE(ValidatedPlan::make(changed)->checksum(), made->checksum());
  changed = *section;
  changed.ranks[0].threadblocks[0].channel = 1;
  changed.ranks[0].threadblocks[0].channel = 0; // As parsed again.
  EXPECT_EQ(ValidatedPlan::make(changed)->checksum(), made->checksum());
  changed.ranks[0].scratchChunks += 1;
  EXPECT_NE(ValidatedPlan::make(changed)->checksum(), made->checksum());

  // A different plan has a different identity.
  Plan other = plan;
  other.info.name = "other";
  EXPECT_NE(ValidatedPlan::make(other)->checksum(), made->checksum());

  // borrow() keeps no copy.
  Result<ValidatedPlan> borrowed = ValidatedPlan::borrow(plan);
  ASSERT_TRUE(borrowed.ok());
  EXPECT_EQ(&borrowed->plan(), &plan);
  EXPECT_EQ(borrowed->checksum(), made->checksum());

  // load() of the file: the same identity, and the path in errors.
  char path[] = "/tmp/coll-validated-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_TRUE(writePlanFile(plan, path).ok());
  Result<ValidatedPlan> loaded = ValidatedPlan::load(path, 2);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(loaded->checksum(), made->checksum());
  std::remove(path);
  Result<ValidatedPlan> gone = ValidatedPlan::load(path);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.message().rfind(std::string("cannot open '") + path + "'", 0), 0u)
      << gone.message();
}

TEST(ValidatedPlan, RefusesWhatNoExecutorRuns) {
  Plan custom = ringAllReduce(2, 1);
  custom.info.collective = CollectiveKind::Custom;
  Result<ValidatedPlan> runs = ValidatedPlan::make(custom);
  ASSERT_TRUE(runs.ok()) << runs.message();
  EXPECT_EQ(runs->chunksPerUnit(), 2u); // gcd(2, 2)
  custom.info.inplace = true;
  EXPECT_EQ(ValidatedPlan::make(custom).message(),
            "invalid plan: plan 'hand_ring_allreduce' implements a user-declared collective, "
            "which has no in-place form, but the plan is in-place");
  custom.info.inplace = false;
  custom.info.outputChunks = 0;
  for (RankPlan &rp : custom.ranks)
    rp.threadblocks.clear();
  Result<ValidatedPlan> empty = ValidatedPlan::make(custom);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find("needs at least one of each"), std::string::npos)
      << empty.message();
  Plan broken = ringAllReduce(2, 1);
  broken.ranks[0].threadblocks[0].sendPeer = 7;
  Result<ValidatedPlan> b = ValidatedPlan::make(broken);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.message().rfind("invalid plan: ", 0), 0u) << b.message();
}

//===----------------------------------------------------------------------===//
// checkCall
//===----------------------------------------------------------------------===//

TEST(CheckCall, OrderAndWording) {
  Plan plan = ringAllReduce(2, 1);
  float a[4] = {}, b[4] = {};
  CallOptions o;
  o.worldRanks = 2;
  auto check = [&](const Plan &p, uint32_t rank, CallArgs args, CallOptions opt) {
    CallError e = checkCall(p, rank, args, opt);
    return std::make_pair(e.kind, e.message);
  };
  using P = std::pair<ErrorKind, std::string>;
  const CallArgs good{a, b, 4, DataType::Float32, RedOp::Sum};
  EXPECT_EQ(check(plan, 1, good, o), P(ErrorKind::None, ""));
  CallOptions three = o;
  three.worldRanks = 3;
  three.worldName = "job";
  EXPECT_EQ(check(plan, 1, good, three),
            P(ErrorKind::InvalidPlan,
              "rank 1: the plan 'hand_ring_allreduce' is for 2 ranks, but the job has 3"));
  EXPECT_EQ(check(plan, 2, good, CallOptions()),
            P(ErrorKind::InvalidArgument, "rank 2: not a rank of the plan, which has 2 ranks"));
  Plan one = plan;
  one.ranks = {plan.ranks[1]};
  one.loadedRank = 1;
  EXPECT_EQ(check(one, 1, good, o),
            P(ErrorKind::InvalidPlan, "rank 1: the plan 'hand_ring_allreduce' does not hold every "
                                      "rank (loaded for rank 1 only); load it whole"));
  CallOptions own = o;
  own.ownSectionSuffices = true;
  EXPECT_EQ(check(one, 1, good, own), P(ErrorKind::None, ""));
  EXPECT_EQ(check(one, 0, good, own),
            P(ErrorKind::InvalidPlan,
              "rank 0: the plan 'hand_ring_allreduce' was loaded for rank 1, not for this rank"));

  CallArgs bad = good;
  bad.type = DataType(77);
  bad.op = RedOp(9); // The type is reported first.
  EXPECT_EQ(check(plan, 0, bad, o), P(ErrorKind::InvalidArgument, "rank 0: invalid data type 77"));
  bad.type = DataType::Int32;
  EXPECT_EQ(check(plan, 0, bad, o),
            P(ErrorKind::InvalidArgument, "rank 0: invalid reduction operator 9"));
  CallOptions noSlice = o;
  noSlice.sliceElements = 0;
  EXPECT_EQ(check(plan, 0, good, noSlice),
            P(ErrorKind::InvalidArgument, "rank 0: the slice size must be at least 1 element"));
  bad = good;
  bad.count = ~uint64_t(0) / 4 / 2 + 1;
  EXPECT_EQ(check(plan, 0, bad, o),
            P(ErrorKind::InvalidArgument,
              "rank 0: count " + std::to_string(bad.count) + " is too large"));
  CallOptions roomy = o;
  roomy.countHeadroom = 4;
  bad.count = ~uint64_t(0) / 4 / 2 / 4 + 1;
  EXPECT_EQ(check(plan, 0, bad, roomy).first, ErrorKind::InvalidArgument);
  bad.count = bad.count - 1;
  EXPECT_EQ(check(plan, 0, bad, roomy), P(ErrorKind::None, ""));
  bad.sendbuf = nullptr;
  EXPECT_EQ(check(plan, 0, bad, o),
            P(ErrorKind::InvalidArgument, "rank 0: the send buffer is null (count is not 0)"));
  bad = good;
  bad.recvbuf = nullptr;
  EXPECT_EQ(check(plan, 1, bad, o),
            P(ErrorKind::InvalidArgument, "rank 1: the receive buffer is null (count is not 0)"));
  bad.sendbuf = bad.recvbuf = nullptr;
  bad.count = 0;
  EXPECT_EQ(check(plan, 1, bad, o), P(ErrorKind::None, ""));

  CallOptions aligned = o;
  aligned.alignedBuffers = true;
  CallArgs odd = good;
  odd.recvbuf = reinterpret_cast<char *>(b) + 2;
  EXPECT_EQ(check(plan, 1, odd, o), P(ErrorKind::None, ""));
  EXPECT_EQ(check(plan, 1, odd, aligned),
            P(ErrorKind::InvalidArgument,
              "rank 1: the receive buffer is not aligned to its 4-byte elements"));
}

//===----------------------------------------------------------------------===//
// prepareCall
//===----------------------------------------------------------------------===//

/// A valid plan of \p kind on 4 ranks with C = 2 chunks and no steps;
/// \p writeInput gives rank 1 a step that writes its Input.
ValidatedPlan emptyPlan(CollectiveKind kind, bool inplace, bool writeInput = false) {
  const uint32_t n = 4, c = 2;
  Plan p = makePlan("p", kind, n, c * uint32_t(bufferUnits(kind, false, n)),
                    c * uint32_t(bufferUnits(kind, true, n)), 1);
  p.info.inplace = inplace;
  p.info.root = collectiveInfo(kind).rooted ? 1 : 0;
  if (writeInput) {
    Threadblock tb;
    add(tb, step(Opcode::Copy, O, 0, I, 0, 1));
    p.ranks[1].threadblocks.push_back(tb);
  }
  Result<ValidatedPlan> v = ValidatedPlan::make(std::move(p));
  EXPECT_TRUE(v.ok()) << v.message();
  return *v;
}

std::string show(const CallBuffer &b) {
  const char *m[] = {"send", "recv", "copy"};
  return std::string(m[unsigned(b.memory)]) + "+" + std::to_string(b.offset);
}

std::string show(const std::vector<StagingCopy> &v) {
  std::string s;
  for (const StagingCopy &c : v)
    s += (s.empty() ? "" : ", ") + show(c.to) + "<-" + show(c.from) + ":" + std::to_string(c.bytes);
  return s;
}

/// The binding of rank 1 of \p kind's plan (in place or not), count 8 fp32
/// (unit 32 bytes), with sendbuf and recvbuf at the given offsets into one
/// arena, as "input output copyBytes before | after".
std::string binding(CollectiveKind kind, bool inplacePlan, int64_t sendAt, int64_t recvAt,
                    bool writeInput = false, bool *inPlace = nullptr) {
  static char arena[4096];
  ValidatedPlan vp = emptyPlan(kind, inplacePlan, writeInput);
  CallArgs args{arena + 1024 + sendAt, arena + 1024 + recvAt, 8, DataType::Float32, RedOp::Sum};
  PreparedCall c = prepareCall(vp, 1, args, CallOptions());
  EXPECT_FALSE(c.error) << c.error.message;
  if (inPlace)
    *inPlace = c.inPlace;
  return show(c.input) + " " + show(c.output) + " " + std::to_string(c.copyBytes) + " " +
         show(c.before) + " | " + show(c.after);
}

TEST(PrepareCall, OutOfPlacePlans) {
  // Disjoint buffers: the user's, as they are.
  EXPECT_EQ(binding(CollectiveKind::AllReduce, false, 0, 512), "send+0 recv+0 0  | ");
  EXPECT_EQ(binding(CollectiveKind::AllToAll, false, 0, 512), "send+0 recv+0 0  | ");
  // Called in place, or writing its input: a private copy of the input.
  EXPECT_EQ(binding(CollectiveKind::AllReduce, false, 0, 0),
            "copy+0 recv+0 32 copy+0<-send+0:32 | ");
  EXPECT_EQ(binding(CollectiveKind::ReduceScatter, false, 0, 32),
            "copy+0 recv+0 128 copy+0<-send+0:128 | ");
  EXPECT_EQ(binding(CollectiveKind::Broadcast, false, 0, 512, /*writeInput=*/true),
            "copy+0 recv+0 32 copy+0<-send+0:32 | ");
  // Overlapping by one byte is overlapping.
  EXPECT_EQ(binding(CollectiveKind::AllGather, false, 127, 0),
            "copy+0 recv+0 32 copy+0<-send+0:32 | ");
  EXPECT_EQ(binding(CollectiveKind::AllGather, false, 128, 0), "send+0 recv+0 0  | ");
}

TEST(PrepareCall, InPlacePlans) {
  bool inPlace = false;
  // Called with the alias: the one buffer.
  EXPECT_EQ(binding(CollectiveKind::AllReduce, true, 64, 64, false, &inPlace),
            "send+0 recv+0 0  | ");
  EXPECT_TRUE(inPlace);
  EXPECT_EQ(binding(CollectiveKind::AllGather, true, 32, 0, false, &inPlace),
            "send+0 recv+0 0  | "); // Rank 1's input is block 1 of its output.
  EXPECT_TRUE(inPlace);
  EXPECT_EQ(binding(CollectiveKind::ReduceScatter, true, 0, 32, false, &inPlace),
            "send+0 recv+0 0  | ");
  EXPECT_TRUE(inPlace);
  // Called out of place: the input goes to its alias position first.
  EXPECT_EQ(binding(CollectiveKind::AllReduce, true, 0, 512, false, &inPlace),
            "recv+0 recv+0 0 recv+0<-send+0:32 | ");
  EXPECT_FALSE(inPlace);
  EXPECT_EQ(binding(CollectiveKind::Reduce, true, 0, 512), "recv+0 recv+0 0 recv+0<-send+0:32 | ");
  EXPECT_EQ(binding(CollectiveKind::AllGather, true, 0, 512),
            "recv+32 recv+0 0 recv+32<-send+0:32 | ");
  // reducescatter works in a copy of the input and copies block 1 out.
  EXPECT_EQ(binding(CollectiveKind::ReduceScatter, true, 0, 512),
            "copy+0 copy+32 128 copy+0<-send+0:128 | recv+0<-copy+32:32");
  // Overlapping but not the alias: through the copy.
  EXPECT_EQ(binding(CollectiveKind::AllReduce, true, 0, 8),
            "recv+0 recv+0 32 copy+0<-send+0:32, recv+0<-copy+0:32 | ");
  EXPECT_EQ(binding(CollectiveKind::AllGather, true, 0, 0),
            "recv+32 recv+0 32 copy+0<-send+0:32, recv+32<-copy+0:32 | ");
  EXPECT_EQ(binding(CollectiveKind::ReduceScatter, true, 0, 0),
            "copy+0 copy+32 128 copy+0<-send+0:128 | recv+0<-copy+32:32");
}

/// prepareCall() of rank 1 with the receive buffer in \p blocks (offsets
/// into an arena, fp32 count 8: units of 32 bytes) and the send buffer at
/// \p sendAt: "input output copyBytes before | after", or the error.
/// \p sendBlocks, when not empty, the send buffer's blocks (and \p sendAt
/// unused); an empty \p blocks: the receive buffer at \p recvAt.
std::string blockBinding(CollectiveKind kind, bool inplacePlan, int64_t sendAt,
                         std::vector<int64_t> blocks, bool accepts = true, bool *inPlace = nullptr,
                         std::vector<int64_t> sendBlocks = {}, int64_t recvAt = 0) {
  static char arena[4096];
  ValidatedPlan vp = emptyPlan(kind, inplacePlan);
  std::vector<void *> at;
  for (int64_t b : blocks)
    at.push_back(b < 0 ? nullptr : arena + 1024 + b);
  std::vector<const void *> from;
  for (int64_t b : sendBlocks)
    from.push_back(b < 0 ? nullptr : arena + 1024 + b);
  CallArgs args{arena + 1024 + sendAt, arena + 1024 + recvAt, 8, DataType::Float32, RedOp::Sum};
  if (!at.empty()) {
    args.recvBlocks = at.data();
    args.numRecvBlocks = at.size();
  }
  if (!from.empty()) {
    args.sendBlocks = from.data();
    args.numSendBlocks = from.size();
  }
  CallOptions o;
  o.bufferBlocks = accepts;
  PreparedCall c = prepareCall(vp, 1, args, o);
  if (c.error)
    return c.error.message;
  if (inPlace)
    *inPlace = c.inPlace;
  return show(c.input) + " " + show(c.output) + " " + std::to_string(c.copyBytes) + " " +
         show(c.before) + " | " + show(c.after);
}

TEST(PrepareCall, BufferBlocks) {
  bool inPlace = true;
  // Apart from the input, in any order: the blocks as they are.
  EXPECT_EQ(blockBinding(CollectiveKind::AllGather, false, 0, {512, 256, 384, 128}, true, &inPlace),
            "send+0 recv+0 0  | ");
  EXPECT_FALSE(inPlace);
  // The input is rank 1's block: in place.
  EXPECT_EQ(
      blockBinding(CollectiveKind::AllGather, true, 256, {512, 256, 384, 128}, true, &inPlace),
      "send+0 recv+0 0  | ");
  EXPECT_TRUE(inPlace);
  // An in-place plan called out of place stages the input into block 1.
  EXPECT_EQ(blockBinding(CollectiveKind::AllGather, true, 0, {512, 256, 384, 128}, true, &inPlace),
            "recv+32 recv+0 0 recv+32<-send+0:32 | ");
  EXPECT_FALSE(inPlace);
  // The input is another rank's block: not the alias, through a copy.
  EXPECT_EQ(blockBinding(CollectiveKind::AllGather, false, 384, {512, 256, 384, 128}),
            "copy+0 recv+0 32 copy+0<-send+0:32 | ");
  // alltoall's input of four units at its first block: overlapping, not in
  // place (the other blocks are elsewhere).
  EXPECT_EQ(
      blockBinding(CollectiveKind::AllToAll, false, 512, {512, 256, 384, 128}, true, &inPlace),
      "copy+0 recv+0 128 copy+0<-send+0:128 | ");
  EXPECT_FALSE(inPlace);
  // One block that is the input: in place.
  EXPECT_EQ(blockBinding(CollectiveKind::AllReduce, true, 64, {64}, true, &inPlace),
            "send+0 recv+0 0  | ");
  EXPECT_TRUE(inPlace);
  // Refused: an executor that does not take them, a wrong number, a null
  // block, blocks that overlap.
  EXPECT_EQ(blockBinding(CollectiveKind::AllGather, false, 0, {512, 256, 384, 128}, false),
            "rank 1: the world takes its buffers whole, not in blocks (CallArgs::sendBlocks, "
            "recvBlocks)");
  EXPECT_EQ(blockBinding(CollectiveKind::AllGather, false, 0, {512, 256, 384}),
            "rank 1: the receive buffer is given as 3 blocks, but allgather of 4 ranks receives 4 "
            "units of count 8");
  EXPECT_EQ(blockBinding(CollectiveKind::AllGather, false, 0, {512, -1, 384, 128}),
            "rank 1: block 1 of the receive buffer is null (count is not 0)");
  EXPECT_EQ(blockBinding(CollectiveKind::AllGather, false, 0, {512, 256, 540, 128}),
            "rank 1: blocks 0 and 2 of the receive buffer overlap");
  EXPECT_EQ(blockBinding(CollectiveKind::AllGather, false, 0, {512, 256, 544, 128}),
            "send+0 recv+0 0  | ");

  // Send blocks: apart from the output, as they are; over it, copied block
  // by block; the same block twice is allowed (read only).
  EXPECT_EQ(blockBinding(CollectiveKind::AllToAll, false, 0, {512, 256, 384, 128}, true, nullptr,
                         {1024, 1024, 1100, 1200}),
            "send+0 recv+0 0  | ");
  EXPECT_EQ(blockBinding(CollectiveKind::AllToAll, false, 0, {512, 256, 384, 128}, true, nullptr,
                         {1024, 1060, 390, 1200}),
            "copy+0 recv+0 128 copy+0<-send+0:32, copy+32<-send+32:32, copy+64<-send+64:32, "
            "copy+96<-send+96:32 | ");
  // reducescatter whose output is the input's block 1: not in place (the
  // plan would work in the caller's other tensors), through a copy.
  EXPECT_EQ(blockBinding(CollectiveKind::ReduceScatter, true, 0, {}, true, &inPlace,
                         {700, 600, 900, 800}, 600),
            "copy+0 copy+32 128 copy+0<-send+0:32, copy+32<-send+32:32, copy+64<-send+64:32, "
            "copy+96<-send+96:32 | recv+0<-copy+32:32");
  EXPECT_FALSE(inPlace);
  // The same tensor for every block, and as the output.
  EXPECT_EQ(blockBinding(CollectiveKind::ReduceScatter, true, 0, {}, true, &inPlace,
                         {600, 600, 600, 600}, 600),
            "copy+0 copy+32 128 copy+0<-send+0:32, copy+32<-send+32:32, copy+64<-send+64:32, "
            "copy+96<-send+96:32 | recv+0<-copy+32:32");
  EXPECT_FALSE(inPlace);
  EXPECT_EQ(blockBinding(CollectiveKind::ReduceScatter, true, 0, {}, true, &inPlace,
                         {700, 600, 900, 800}, 700),
            "copy+0 copy+32 128 copy+0<-send+0:32, copy+32<-send+32:32, copy+64<-send+64:32, "
            "copy+96<-send+96:32 | recv+0<-copy+32:32");
  EXPECT_FALSE(inPlace);
  EXPECT_EQ(blockBinding(CollectiveKind::AllToAll, false, 0, {512, 256, 384, 128}, true, nullptr,
                         {1024, -1, 1100, 1200}),
            "rank 1: block 1 of the send buffer is null (count is not 0)");
  EXPECT_EQ(blockBinding(CollectiveKind::Scatter, false, 0, {}, true, nullptr, {1024, 1100}),
            "rank 1: the send buffer is given as 2 blocks, but scatter of 4 ranks sends 4 units "
            "of count 8");
}

/// A receive buffer given as blocks that lie where the whole buffer's
/// units lie binds as the whole buffer does: every collective, in-place
/// plans and not, at offsets in place, apart and overlapping.
TEST(PrepareCall, ContiguousBlocksBindAsTheWholeBuffer) {
  static char arena[8192];
  char *copy = reinterpret_cast<char *>(uintptr_t(1) << 40); // Never followed.
  const std::vector<std::pair<int64_t, int64_t>> places = {
      {0, 1024}, {0, 0}, {32, 0}, {64, 0}, {0, 32}, {0, 64}, {127, 0}, {128, 0}, {0, 8}, {8, 0}};
  for (unsigned k = 0; k < numBuiltinCollectives(); ++k) {
    const CollectiveKind kind = CollectiveKind(k);
    for (bool inplacePlan : {false, true}) {
      if (inplacePlan && collectiveInfo(kind).inPlace == InPlaceAlias::None)
        continue;
      ValidatedPlan vp = emptyPlan(kind, inplacePlan);
      for (auto [sendAt, recvAt] : places) {
        CallArgs whole{arena + 2048 + sendAt, arena + 2048 + recvAt, 8, DataType::Float32,
                       RedOp::Sum};
        const uint64_t units = planBufferElements(vp.info(), 8).output / 8;
        std::vector<void *> blocks;
        for (uint64_t i = 0; i < units; ++i)
          blocks.push_back(arena + 2048 + recvAt + i * 32);
        CallArgs split = whole;
        split.recvbuf = nullptr;
        split.recvBlocks = blocks.data();
        split.numRecvBlocks = blocks.size();
        CallOptions o;
        o.bufferBlocks = true;
        const PreparedCall a = prepareCall(vp, 1, whole, o), b = prepareCall(vp, 1, split, o);
        const std::string what = std::string(collectiveName(kind)) +
                                 (inplacePlan ? " in-place plan" : "") + " send " +
                                 std::to_string(sendAt) + " recv " + std::to_string(recvAt);
        ASSERT_FALSE(a.error) << what << ": " << a.error.message;
        ASSERT_FALSE(b.error) << what << ": " << b.error.message;
        EXPECT_EQ(a.inPlace, b.inPlace) << what;
        EXPECT_EQ(a.copyBytes, b.copyBytes) << what;
        EXPECT_EQ(resolve(a.input, a, copy), resolve(b.input, b, copy)) << what;
        EXPECT_EQ(resolve(a.output, a, copy), resolve(b.output, b, copy)) << what;
        auto resolved = [&](const PreparedCall &c, const std::vector<StagingCopy> &v) {
          std::vector<std::tuple<char *, char *, uint64_t>> out;
          for (const StagingCopy &s : v)
            out.emplace_back(resolve(s.to, c, copy), resolve(s.from, c, copy), s.bytes);
          return out;
        };
        EXPECT_EQ(resolved(a, a.before), resolved(b, b.before)) << what;
        EXPECT_EQ(resolved(a, a.after), resolved(b, b.after)) << what;
      }
    }
  }
}

TEST(PrepareCall, LayoutAvgAndDescription) {
  ValidatedPlan vp = emptyPlan(CollectiveKind::Reduce, false);
  float a[100] = {}, b[100] = {};
  CallOptions o;
  o.sliceElements = 7;
  CallArgs args{a, b, 100, DataType::Float32, RedOp::Avg};
  PreparedCall root = prepareCall(vp, 1, args, o);
  ASSERT_FALSE(root.error) << root.error.message;
  EXPECT_EQ(root.layout.chunksPerUnit, 2u);
  EXPECT_EQ(root.layout.maxChunk, 50u);
  EXPECT_EQ(root.layout.sliceElements, 7u);
  EXPECT_EQ(root.layout.numSlices, 8u);
  EXPECT_TRUE(root.divideByRanks); // The root's result is defined.
  EXPECT_FALSE(prepareCall(vp, 2, args, o).divideByRanks);
  args.op = RedOp::Sum;
  EXPECT_FALSE(prepareCall(vp, 1, args, o).divideByRanks);
  // Slices never exceed the largest chunk.
  o.sliceElements = 1000;
  EXPECT_EQ(prepareCall(vp, 1, args, o).layout.sliceElements, 50u);
  args.count = 0;
  args.sendbuf = args.recvbuf = nullptr;
  PreparedCall empty = prepareCall(vp, 1, args, o);
  EXPECT_FALSE(empty.error);
  EXPECT_TRUE(empty.empty());

  const CallDescription &d = root.description;
  EXPECT_EQ(d.planChecksum, vp.checksum());
  EXPECT_EQ(d.count, 100u);
  EXPECT_EQ(d.sliceElements, 7u);
  EXPECT_EQ(d.type, unsigned(DataType::Float32));
  EXPECT_EQ(d.op, unsigned(RedOp::Avg));
  EXPECT_EQ(d.collective, unsigned(CollectiveKind::Reduce));
  EXPECT_EQ(d.planRanks, 4u);
  EXPECT_STREQ(d.planName, "p");
  EXPECT_EQ(d.errorKind, 0u);

  args.count = 5;
  PreparedCall bad = prepareCall(vp, 3, args, o);
  EXPECT_EQ(bad.error.kind, ErrorKind::InvalidArgument);
  EXPECT_EQ(bad.description.errorKind, unsigned(ErrorKind::InvalidArgument));
  EXPECT_STREQ(bad.description.error, "rank 3: the send buffer is null (count is not 0)");
}

//===----------------------------------------------------------------------===//
// agree
//===----------------------------------------------------------------------===//

TEST(Agree, Verdicts) {
  ValidatedPlan vp = emptyPlan(CollectiveKind::AllReduce, false);
  float x[8] = {};
  CallOptions o;
  std::vector<CallDescription> d;
  for (uint32_t r = 0; r < 4; ++r)
    d.push_back(prepareCall(vp, r, {x, x, 8, DataType::Float32, RedOp::Max}, o).description);
  for (uint32_t me = 0; me <= 4; ++me)
    EXPECT_FALSE(agree(d.data(), 4, me)) << agree(d.data(), 4, me).message;

  // Arguments differ: named with rank 0's; the slice only where it differs.
  std::vector<CallDescription> args = d;
  args[2].count = 9;
  CallError e = agree(args.data(), 4, 0);
  EXPECT_EQ(e.kind, ErrorKind::Mismatch);
  EXPECT_EQ(e.message, "the ranks called with different arguments: rank 0 with count 8, fp32, max; "
                       "rank 2 with count 9, fp32, max");
  // A collective that does not reduce leaves its operator out, unless the
  // ranks' operators differ.
  std::vector<CallDescription> gathers = args;
  for (CallDescription &c : gathers)
    c.collective = unsigned(CollectiveKind::AllGather);
  EXPECT_EQ(agree(gathers.data(), 4, 0).message,
            "the ranks called with different arguments: rank 0 with count 8, fp32; rank 2 with "
            "count 9, fp32");
  gathers[2].count = 8;
  gathers[2].op = unsigned(RedOp::Sum);
  EXPECT_EQ(agree(gathers.data(), 4, 0).message,
            "the ranks called with different arguments: rank 0 with count 8, fp32, max; rank 2 "
            "with count 8, fp32, sum");
  args[2].count = 8;
  args[3].sliceElements = 3;
  EXPECT_EQ(agree(args.data(), 4, 1).message,
            "the ranks called with different arguments: rank 0 with count 8, fp32, max, slice "
            "16384; rank 3 with count 8, fp32, max, slice 3");

  // Plans differ: by checksum, described by name, collective and ranks.
  std::vector<CallDescription> plans = d;
  ValidatedPlan other = emptyPlan(CollectiveKind::AllReduce, true);
  plans[1] = prepareCall(other, 1, {x, x, 8, DataType::Float32, RedOp::Max}, o).description;
  char want[256];
  std::snprintf(want, sizeof want,
                "the ranks called with different plans: rank 0 with 'p' (allreduce, 4 ranks, "
                "checksum %016llx), rank 1 with 'p' (allreduce, 4 ranks, checksum %016llx)",
                (unsigned long long)vp.checksum(), (unsigned long long)other.checksum());
  EXPECT_EQ(agree(plans.data(), 4, 3).message, want);
  EXPECT_EQ(agree(plans.data(), 4, 3).kind, ErrorKind::Mismatch);
  // A rooted collective's plans say their roots (ranks that disagree on the
  // root of a broadcast call with plans compiled for each).
  std::vector<CallDescription> rooted = plans;
  for (CallDescription &c : rooted)
    c.collective = unsigned(CollectiveKind::Broadcast);
  rooted[1].planRoot = 2;
  EXPECT_NE(agree(rooted.data(), 4, 0)
                .message.find("rank 0 with 'p' (broadcast, root 0, 4 ranks, checksum"),
            std::string::npos);
  EXPECT_NE(agree(rooted.data(), 4, 0)
                .message.find("rank 1 with 'p' (broadcast, root 2, 4 ranks, checksum"),
            std::string::npos)
      << agree(rooted.data(), 4, 0).message;

  // An argument error wins over a mismatch; its rank gets its own message.
  plans[2] = describeFailedCall({ErrorKind::InvalidPlan, "rank 2: the plan is wrong"});
  EXPECT_EQ(agree(plans.data(), 4, 2).message, "rank 2: the plan is wrong");
  EXPECT_EQ(agree(plans.data(), 4, 2).kind, ErrorKind::InvalidPlan);
  EXPECT_EQ(agree(plans.data(), 4, 0).message, "rank 2 failed: rank 2: the plan is wrong");
  EXPECT_EQ(agree(plans.data(), 4, 4).message, "rank 2 failed: rank 2: the plan is wrong");
  // The first rank with an error is the one named.
  plans[3] = describeFailedCall({ErrorKind::InvalidArgument, "rank 3: bad"});
  EXPECT_EQ(agree(plans.data(), 4, 3).message, "rank 2 failed: rank 2: the plan is wrong");
  // A message longer than the description's field is cut, not overrun.
  CallDescription longer = describeFailedCall({ErrorKind::Internal, std::string(2000, 'x')});
  EXPECT_EQ(strnlen(longer.error, sizeof longer.error), sizeof longer.error - 1);
}

} // namespace
