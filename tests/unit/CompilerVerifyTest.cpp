//===- CompilerVerifyTest.cpp - The symbolic post-condition check ---------===//
//
// The verifier on traces built by hand: correct ring allreduce, allgather and
// alltoall; every kind of wrong program, with the exact message and the line
// of the operation it blames; and bitwise identity across ranks.
//
//===----------------------------------------------------------------------===//

#include "CompilerTestUtil.h"

#include <functional>
#include <gtest/gtest.h>

using namespace coll;
using namespace coll::compiler;
using coll::test::CompilerRun;
using coll::test::ExpectedDiagnostics;
using coll::test::siteLine;

namespace {

// The operations of hand-built traces borrow their source sites from this
// program, so a diagnostic's line says which operation it blames.
const std::string SitesSource =
    coll::test::sitesProgram("algorithm sites implements allreduce()",
                             {
                                 "copy(input[0][0], to: output[0][0]);",     // site 0
                                 "reduce(input[0][0], into: output[0][0]);", // site 1
                                 "copy(input[0][0], to: output[0][0]);",     // site 2
                                 "reduce(input[0][0], into: output[0][0]);", // site 3
                             });
enum : uint32_t { CopySite = 0, ReduceSite = 1, OtherCopySite = 2, OtherReduceSite = 3 };
/// The source line of the algorithm's name.
constexpr unsigned AlgorithmLine = 1, AlgorithmNameColumn = 11;

SlotRange in(uint32_t rank, uint32_t index, uint32_t count = 1) {
  return SlotRange{rank, InputBuffer, index, count};
}
SlotRange out(uint32_t rank, uint32_t index, uint32_t count = 1) {
  return SlotRange{rank, OutputBuffer, index, count};
}
SlotRange tmp(uint32_t rank, uint32_t index) {
  return SlotRange{rank, FirstScratchBuffer, index, 1};
}

/// Gives \p t one scratch buffer `tmp` of \p chunks chunks.
void addScratch(Trace &t, uint32_t chunks) {
  t.scratchChunks.push_back(chunks);
  t.scratchNames.push_back("tmp");
}
/// Appends a copy or a reduce from \p src to \p dst, blamed on \p site.
void transfer(Trace &t, OpKind kind, SlotRange src, SlotRange dst, uint32_t site) {
  ChunkOp op;
  op.kind = kind;
  op.src = src;
  op.dst = dst;
  op.site = site;
  t.ops.push_back(op);
}
void copy(Trace &t, SlotRange src, SlotRange dst, uint32_t site = CopySite) {
  transfer(t, OpKind::Copy, src, dst, site);
}
void reduce(Trace &t, SlotRange src, SlotRange dst, uint32_t site = ReduceSite) {
  transfer(t, OpKind::Reduce, src, dst, site);
}

/// Makes an empty trace of a built-in collective (VerifyTrace::trace).
using MakeTrace =
    std::function<Trace(llvm::StringRef collective, uint32_t n, uint32_t chunks, bool inplace)>;

class VerifyTrace : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(run.frontendOk()) << run.text();
    ASSERT_EQ(run.topLevelTransfers().size(), 4u);
  }

  /// An empty trace of built-in \p collective for \p n ranks and \p chunks.
  Trace trace(llvm::StringRef collective, uint32_t n, uint32_t chunks, bool inplace = false) {
    Trace t;
    t.algorithm = run.algorithm();
    t.name = "hand";
    t.collectiveName = collective.str();
    t.builtin = findCollective(collective);
    EXPECT_NE(t.builtin, nullptr) << collective.str();
    t.nranks = n;
    t.chunks = chunks;
    t.inputChunks = chunks * bufferUnits(t.builtin->kind, /*output=*/false, n);
    t.outputChunks = chunks * bufferUnits(t.builtin->kind, /*output=*/true, n);
    t.inplace = inplace;
    t.sites = run.topLevelTransfers();
    return t;
  }

  /// The in-place ring allreduce of stdlib/ring_allreduce.coll, by hand.
  Trace ringAllreduce(uint32_t n) {
    Trace t = trace("allreduce", n, n, /*inplace=*/true);
    for (uint32_t c = 0; c < n; ++c) {
      SlotRange acc = in(c, c);
      for (uint32_t s = 1; s < n; ++s) {
        reduce(t, acc, in((c + s) % n, c));
        acc = in((c + s) % n, c);
      }
      for (uint32_t s = 0; s + 1 < n; ++s) {
        copy(t, acc, in((c + s) % n, c));
        acc = in((c + s) % n, c);
      }
    }
    return t;
  }

  std::optional<VerifyReport> verify(const Trace &t) {
    auto r = compiler::verify(t, run.diag);
    run.text();
    return r;
  }

  CompilerRun run{SitesSource};
};

//===--------------------------------------------------------------------===//
// Correct programs
//===--------------------------------------------------------------------===//

TEST_F(VerifyTrace, RingAllreduceIsCorrectAndBitwiseIdentical) {
  Trace t = ringAllreduce(4);
  ASSERT_EQ(t.ops.size(), 24u);
  std::optional<VerifyReport> r = verify(t);
  ASSERT_TRUE(r) << run.text();
  EXPECT_TRUE(run.diag.diagnostics().empty()) << run.text();
  EXPECT_TRUE(r->identicalAcrossRanks);
  EXPECT_TRUE(r->differingIndices.empty());
  EXPECT_EQ(r->reductions, 12u); // N - 1 per chunk, each built once
  EXPECT_EQ(r->checkedSlots, 16u);

  std::string report;
  llvm::raw_string_ostream os(report);
  printVerifyReport(t, *r, os);
  EXPECT_EQ(os.str(), "verified: hand implements allreduce for N = 4\n"
                      "  24 chunk operations, 12 distinct reductions, 16 output chunks checked\n"
                      "  bitwise identical: every rank combines every output chunk in the same "
                      "order\n");
}

TEST_F(VerifyTrace, HandBuiltRingMatchesTheInstantiatedLibraryRing) {
  auto lib = CompilerRun::fromStdlib("ring_allreduce.coll");
  ASSERT_TRUE(lib->frontendOk()) << lib->text();
  std::optional<Trace> inst = lib->instantiate(4);
  ASSERT_TRUE(inst) << lib->text();
  Trace hand = ringAllreduce(4);
  EXPECT_TRUE(inst->inplace);
  EXPECT_EQ(inst->chunks, 4u);
  EXPECT_EQ(inst->inputChunks, 4u);
  EXPECT_EQ(inst->outputChunks, 4u);
  ASSERT_EQ(inst->ops.size(), hand.ops.size());
  for (size_t k = 0; k < hand.ops.size(); ++k) {
    const ChunkOp &a = inst->ops[k], &b = hand.ops[k];
    EXPECT_EQ(a.kind, b.kind) << "op " << k;
    EXPECT_EQ(std::tie(a.src.rank, a.src.buffer, a.src.index, a.src.count),
              std::tie(b.src.rank, b.src.buffer, b.src.index, b.src.count))
        << "op " << k;
    EXPECT_EQ(std::tie(a.dst.rank, a.dst.buffer, a.dst.index, a.dst.count),
              std::tie(b.dst.rank, b.dst.buffer, b.dst.index, b.dst.count))
        << "op " << k;
  }
  std::optional<VerifyReport> r = compiler::verify(*inst, lib->diag);
  ASSERT_TRUE(r) << lib->text();
  EXPECT_TRUE(r->identicalAcrossRanks);
}

TEST_F(VerifyTrace, RingAllgatherWithTwoChunkRangesIsCorrect) {
  const uint32_t n = 4, c = 2;
  Trace t = trace("allgather", n, c);
  EXPECT_EQ(t.inputChunks, 2u);
  EXPECT_EQ(t.outputChunks, 8u);
  for (uint32_t r = 0; r < n; ++r) {
    copy(t, in(r, 0, c), out(r, r * c, c));
    for (uint32_t s = 1; s < n; ++s)
      copy(t, out((r + s - 1) % n, r * c, c), out((r + s) % n, r * c, c));
  }
  std::optional<VerifyReport> r = verify(t);
  ASSERT_TRUE(r) << run.text();
  EXPECT_TRUE(run.diag.diagnostics().empty()) << run.text();
  EXPECT_TRUE(r->identicalAcrossRanks);
  EXPECT_EQ(r->reductions, 0u);
  EXPECT_EQ(r->checkedSlots, 32u);
}

TEST_F(VerifyTrace, DirectAlltoallIsCorrect) {
  const uint32_t n = 3, c = 2;
  Trace t = trace("alltoall", n, c);
  EXPECT_EQ(t.inputChunks, 6u);
  EXPECT_EQ(t.outputChunks, 6u);
  // Block r of rank j's input goes to block j of rank r's output.
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t j = 0; j < n; ++j)
      copy(t, in(j, r * c, c), out(r, j * c, c));
  std::optional<VerifyReport> r = verify(t);
  ASSERT_TRUE(r) << run.text();
  EXPECT_TRUE(run.diag.diagnostics().empty()) << run.text();
  EXPECT_EQ(r->checkedSlots, 18u);
  EXPECT_EQ(r->reductions, 0u);
}

TEST_F(VerifyTrace, ReduceChecksOnlyTheRoot) {
  Trace t = trace("reduce", 3, 1);
  t.root = 1;
  // Chain 0 -> 2 -> 1 into the root's output; other outputs stay empty.
  copy(t, in(0, 0), out(2, 0));
  reduce(t, in(2, 0), out(2, 0));
  copy(t, in(1, 0), out(1, 0));
  reduce(t, out(2, 0), out(1, 0));
  std::optional<VerifyReport> r = verify(t);
  ASSERT_TRUE(r) << run.text();
  EXPECT_EQ(r->checkedSlots, 1u);
  EXPECT_EQ(r->reductions, 2u);
  EXPECT_TRUE(r->identicalAcrossRanks);
}

//===--------------------------------------------------------------------===//
// Wrong programs
//===--------------------------------------------------------------------===//

/// A hand-built trace the verifier rejects, and what it reports.
struct WrongTrace {
  std::string name;
  /// Builds the trace from an empty one that \p trace makes.
  Trace (*build)(const MakeTrace &trace);
  ExpectedDiagnostics expected;
  /// A piece of what the engine printed, or "" for no check.
  std::string printed;
};
void PrintTo(const WrongTrace &c, std::ostream *os) {
  *os << c.name;
}

class VerifyWrongTrace : public VerifyTrace, public ::testing::WithParamInterface<WrongTrace> {};

TEST_P(VerifyWrongTrace, IsReportedAtTheOperationToBlame) {
  const WrongTrace &c = GetParam();
  Trace t = c.build([this](llvm::StringRef collective, uint32_t n, uint32_t chunks, bool inplace) {
    return trace(collective, n, chunks, inplace);
  });
  EXPECT_FALSE(verify(t));
  expectDiagnostics(run, c.expected);
  if (!c.printed.empty()) {
    EXPECT_NE(run.text().find(c.printed), std::string::npos) << run.text();
  }
}

INSTANTIATE_TEST_SUITE_P(
    VerifyTrace, VerifyWrongTrace,
    ::testing::Values(
        WrongTrace{"AlltoallWithTransposedBlocksIsWrong",
                   [](const MakeTrace &trace) {
                     // out[r][j] = in[r][j] instead of in[j][r]: rank 0 is right by
                     // accident, output[0][1] is the first wrong chunk.
                     const uint32_t n = 3;
                     Trace t = trace("alltoall", n, 1, false);
                     for (uint32_t r = 0; r < n; ++r)
                       for (uint32_t j = 0; j < n; ++j)
                         copy(t, in(r, j), out(r, j), r == 0 && j == 1 ? OtherCopySite : CopySite);
                     return t;
                   },
                   ExpectedDiagnostics()
                       .error("output[0][1] ends holding in[0][1] for N = 3; it should hold "
                              "in[1][0]",
                              siteLine(OtherCopySite))
                       // Six of the nine slots are wrong: all but the diagonal.
                       .note("5 more output chunks are wrong", AlgorithmLine),
                   ""},
        WrongTrace{"WrongSlotNamesRankIndexAndBothValues",
                   [](const MakeTrace &trace) {
                     // Direct allgather where rank 2 gets rank 0's block in place of
                     // rank 1's.
                     const uint32_t n = 3;
                     Trace t = trace("allgather", n, 1, false);
                     for (uint32_t r = 0; r < n; ++r)
                       for (uint32_t j = 0; j < n; ++j) {
                         if (r == 2 && j == 1)
                           copy(t, in(0, 0), out(2, 1), OtherCopySite);
                         else
                           copy(t, in(j, 0), out(r, j));
                       }
                     return t;
                   },
                   ExpectedDiagnostics()
                       .error("output[2][1] ends holding in[0][0] for N = 3; it should hold "
                              "in[1][0]",
                              siteLine(OtherCopySite), 3)
                       .noNotes(),
                   "test.coll:4:3: error: output[2][1] ends holding in[0][0]"},
        WrongTrace{"IncompleteReductionListsWhatIsMissingAndWhatIsExtra",
                   [](const MakeTrace &trace) {
                     // Chain allreduce, 2 chunks: rank 1's chunk 0 adds in[2][1] where
                     // in[2][0] belongs; everything else is right.
                     const uint32_t n = 3, c = 2;
                     Trace t = trace("allreduce", n, c, false);
                     for (uint32_t r = 0; r < n; ++r)
                       for (uint32_t i = 0; i < c; ++i) {
                         copy(t, in(0, i), out(r, i));
                         reduce(t, in(1, i), out(r, i));
                         if (r == 1 && i == 0)
                           reduce(t, in(2, 1), out(r, i), OtherReduceSite);
                         else
                           reduce(t, in(2, i), out(r, i));
                       }
                     return t;
                   },
                   ExpectedDiagnostics()
                       .error("output[1][0] ends holding in[2][1] + (in[1][0] + in[0][0]) for N "
                              "= 3; it should hold the reduction of in[0][0] + in[1][0] + "
                              "in[2][0]; missing in[2][0]; not expected: in[2][1]",
                              siteLine(OtherReduceSite))
                       .noNotes(),
                   ""},
        WrongTrace{"PartialReductionNamesTheMissingContribution",
                   [](const MakeTrace &trace) {
                     const uint32_t n = 3;
                     Trace t = trace("allreduce", n, 1, false);
                     for (uint32_t r = 0; r < n; ++r) {
                       copy(t, in(0, 0), out(r, 0));
                       reduce(t, in(1, 0), out(r, 0), r == 1 ? OtherReduceSite : ReduceSite);
                       if (r != 1)
                         reduce(t, in(2, 0), out(r, 0));
                     }
                     return t;
                   },
                   ExpectedDiagnostics().error(
                       "output[1][0] ends holding in[1][0] + in[0][0] for N = 3; it should hold "
                       "the reduction of in[0][0] + in[1][0] + in[2][0]; missing in[2][0]",
                       siteLine(OtherReduceSite)),
                   ""},
        WrongTrace{"ContributionCountedTwiceBlamesTheReduceThatRepeatedIt",
                   [](const MakeTrace &trace) {
                     const uint32_t n = 2;
                     Trace t = trace("allreduce", n, 1, false);
                     addScratch(t, 1);
                     // Rank 0 builds in1 + (in0 + in1) in scratch, then copies it out.
                     copy(t, in(1, 0), tmp(0, 0));
                     reduce(t, in(0, 0), tmp(0, 0));
                     reduce(t, in(1, 0), tmp(0, 0), OtherReduceSite); // in[1][0] again
                     copy(t, tmp(0, 0), out(0, 0), OtherCopySite);
                     // Rank 1 is right.
                     copy(t, in(0, 0), out(1, 0));
                     reduce(t, in(1, 0), out(1, 0));
                     return t;
                   },
                   ExpectedDiagnostics()
                       .error("contribution in[1][0] is counted twice for N = 2",
                              siteLine(OtherReduceSite))
                       .note("output[0][0] ends holding in[1][0] + (in[0][0] + in[1][0]); it "
                             "should hold the reduction of in[0][0] + in[1][0]",
                             siteLine(OtherCopySite)), // the last write of the slot
                   ""},
        WrongTrace{"CopyFromAnEmptySlotIsRejected",
                   [](const MakeTrace &trace) {
                     const uint32_t n = 2;
                     Trace t = trace("allgather", n, 1, false);
                     copy(t, in(0, 0), out(0, 0));
                     copy(t, out(1, 0), out(0, 1), OtherCopySite); // nothing is in output[1][0]
                     copy(t, in(0, 0), out(1, 0));
                     return t;
                   },
                   ExpectedDiagnostics()
                       .error("copy reads output[1][0], which holds nothing at this point for N "
                              "= 2",
                              siteLine(OtherCopySite))
                       .noNotes(),
                   ""},
        WrongTrace{"ReadOfUninitialisedScratchNamesTheScratchBuffer",
                   [](const MakeTrace &trace) {
                     Trace t = trace("broadcast", 2, 1, false);
                     addScratch(t, 2);
                     copy(t, in(0, 0), tmp(1, 0));
                     reduce(t, tmp(1, 1), out(1, 0), OtherReduceSite);
                     return t;
                   },
                   ExpectedDiagnostics().error(
                       "reduce reads tmp[1][1], which holds nothing at this point for N = 2",
                       siteLine(OtherReduceSite)),
                   ""},
        WrongTrace{"ReduceIntoAnEmptySlotIsRejected",
                   [](const MakeTrace &trace) {
                     Trace t = trace("allreduce", 2, 1, false);
                     copy(t, in(1, 0), out(0, 0));
                     reduce(t, in(0, 0), out(1, 0), OtherReduceSite); // output[1][0] is empty
                     return t;
                   },
                   ExpectedDiagnostics().error(
                       "reduce into output[1][0], which holds nothing at this point for N = 2",
                       siteLine(OtherReduceSite)),
                   ""},
        WrongTrace{"OverwritingAPartialSumBeforeItIsReadIsRejected",
                   [](const MakeTrace &trace) {
                     const uint32_t n = 2;
                     Trace t = trace("allreduce", n, 1, false);
                     copy(t, in(1, 0), out(0, 0));
                     reduce(t, in(0, 0), out(0, 0)); // rank 0: in0 + in1, right
                     copy(t, in(0, 0), out(1, 0));
                     reduce(t, in(1, 0), out(1, 0));              // rank 1: in1 + in0 ...
                     copy(t, in(1, 0), out(1, 0), OtherCopySite); // ... destroyed unread
                     return t;
                   },
                   ExpectedDiagnostics()
                       .error("copy overwrites output[1][0], which holds in[1][0] + in[0][0], "
                              "before anything reads it for N = 2; the result needs it",
                              siteLine(OtherCopySite))
                       .note("output[1][0] ends holding in[1][0]; it should hold the reduction "
                             "of in[0][0] + in[1][0]",
                             siteLine(OtherCopySite)),
                   ""},
        WrongTrace{"InPlaceOverwriteOfAnUnreadInputIsRejected",
                   [](const MakeTrace &trace) {
                     // In place, input is output: copying rank 1's chunk over rank 0's
                     // before anything read rank 0's loses in[0][0]; both ranks then
                     // hold in[1][0].
                     Trace t = trace("allreduce", 2, 1, /*inplace=*/true);
                     copy(t, in(1, 0), in(0, 0), OtherCopySite);
                     copy(t, in(0, 0), in(1, 0));
                     return t;
                   },
                   ExpectedDiagnostics()
                       .error("copy overwrites input[0][0], which holds in[0][0], before "
                              "anything reads it for N = 2; the result needs it",
                              siteLine(OtherCopySite))
                       .note("output[0][0] ends holding in[1][0]; it should hold the reduction "
                             "of in[0][0] + in[1][0]",
                             siteLine(OtherCopySite))
                       .note("1 more output chunk is wrong", AlgorithmLine),
                   ""},
        WrongTrace{"OutputNeverWrittenPointsAtTheAlgorithm",
                   [](const MakeTrace &trace) {
                     Trace t = trace("allgather", 2, 1, false);
                     copy(t, in(0, 0), out(0, 0));
                     copy(t, in(1, 0), out(0, 1));
                     copy(t, in(1, 0), out(1, 1)); // output[1][0] is never written
                     return t;
                   },
                   ExpectedDiagnostics()
                       .error("output[1][0] is never written for N = 2; it should hold in[0][0]",
                              AlgorithmLine, AlgorithmNameColumn)
                       .noNotes(),
                   ""},
        WrongTrace{"EmptyAllreduceCountsTheOtherWrongChunks",
                   [](const MakeTrace &trace) { return trace("allreduce", 3, 1, false); },
                   ExpectedDiagnostics()
                       .error("output[0][0] is never written for N = 3; it should hold the "
                              "reduction of in[0][0] + in[1][0] + in[2][0]",
                              AlgorithmLine)
                       .note("2 more output chunks are wrong"),
                   ""},
        WrongTrace{"LargeReductionsAreSummarised",
                   [](const MakeTrace &trace) {
                     // Eight ranks, rank 0's output never written: the expected
                     // reduction is too long to print in full.
                     Trace t = trace("allreduce", 8, 1, false);
                     for (uint32_t r = 1; r < 8; ++r) {
                       copy(t, in(0, 0), out(r, 0));
                       for (uint32_t j = 1; j < 8; ++j)
                         reduce(t, in(j, 0), out(r, 0));
                     }
                     return t;
                   },
                   ExpectedDiagnostics().error("output[0][0] is never written for N = 8; it "
                                               "should hold the reduction of 8 chunks (in[0][0] "
                                               "... in[7][0])"),
                   ""}),
    coll::test::CaseName());

//===--------------------------------------------------------------------===//
// Bitwise identity
//===--------------------------------------------------------------------===//

TEST_F(VerifyTrace, DifferentOperandOrdersAreNotBitwiseIdentical) {
  const uint32_t n = 2, c = 2;
  Trace t = trace("allreduce", n, c);
  // Chunk 0: both ranks compute in0 + in1.
  for (uint32_t r = 0; r < n; ++r) {
    copy(t, in(1, 0), out(r, 0));
    reduce(t, in(0, 0), out(r, 0));
  }
  // Chunk 1: rank 0 computes in0 + in1, rank 1 computes in1 + in0.
  copy(t, in(1, 1), out(0, 1));
  reduce(t, in(0, 1), out(0, 1));
  copy(t, in(0, 1), out(1, 1));
  reduce(t, in(1, 1), out(1, 1));
  std::optional<VerifyReport> r = verify(t);
  ASSERT_TRUE(r) << run.text();
  EXPECT_TRUE(run.diag.diagnostics().empty()) << run.text();
  EXPECT_FALSE(r->identicalAcrossRanks);
  EXPECT_EQ(r->differingIndices, std::vector<uint32_t>{1});
  EXPECT_EQ(r->reductions, 3u);
  EXPECT_EQ(r->checkedSlots, 4u);
  std::string report;
  llvm::raw_string_ostream os(report);
  printVerifyReport(t, *r, os);
  EXPECT_NE(os.str().find("  not bitwise identical: ranks combine output chunk 1 in different "
                          "orders\n"),
            std::string::npos)
      << os.str();
}

TEST_F(VerifyTrace, DifferentGroupingsAreNotBitwiseIdentical) {
  // Ranks 0 and 2 compute in2 + (in1 + in0), rank 1 in2 + (in0 + in1): the
  // same operands, grouped alike, in a different inner order.
  const uint32_t n = 3;
  Trace t = trace("allreduce", n, 1);
  for (uint32_t r = 0; r < n; ++r) {
    uint32_t first = r == 1 ? 1 : 0, second = r == 1 ? 0 : 1;
    copy(t, in(first, 0), out(r, 0));
    reduce(t, in(second, 0), out(r, 0));
    reduce(t, in(2, 0), out(r, 0));
  }
  std::optional<VerifyReport> r = verify(t);
  ASSERT_TRUE(r) << run.text();
  EXPECT_FALSE(r->identicalAcrossRanks);
  EXPECT_EQ(r->differingIndices, std::vector<uint32_t>{0});
  EXPECT_EQ(r->reductions, 4u);
}

// The exchange program of docs/language.md 3.11, and its variant that
// reduces in the other order on rank 0.
const char *const ExchangeSource =
    "algorithm exchange implements allreduce() with inplace = true {\n"
    "  require N == 2 : \"this example is written for two ranks\";\n"
    "  scratch tmp[1];\n"
    "  copy(input[0][0], to: tmp[1][0]);\n"
    "  copy(input[1][0], to: tmp[0][0]);\n"
    "  reduce(tmp[1][0], into: input[1][0]);\n"
    "  REDUCE0\n"
    "}\n";

std::string exchange(llvm::StringRef rank0) {
  std::string s = ExchangeSource;
  s.replace(s.find("REDUCE0"), 7, rank0.str());
  return s;
}

TEST(VerifyProgram, ExchangeIsBitwiseIdentical) {
  CompilerRun run(exchange("reduce(input[0][0], into: tmp[0][0]);\n"
                           "  copy(tmp[0][0], to: input[0][0]);"));
  ASSERT_TRUE(run.frontendOk()) << run.text();
  auto c = run.compile(2);
  ASSERT_TRUE(c) << run.text();
  EXPECT_TRUE(c->report.identicalAcrossRanks);
  EXPECT_TRUE(c->report.differingIndices.empty());
  EXPECT_EQ(c->report.reductions, 1u);
}

TEST(VerifyProgram, ExchangeReducedTheOtherWayIsNotBitwiseIdentical) {
  CompilerRun run(exchange("reduce(tmp[0][0], into: input[0][0]);"));
  ASSERT_TRUE(run.frontendOk()) << run.text();
  auto c = run.compile(2);
  ASSERT_TRUE(c) << run.text();
  EXPECT_TRUE(run.diag.diagnostics().empty()) << run.text();
  EXPECT_FALSE(c->report.identicalAcrossRanks);
  EXPECT_EQ(c->report.differingIndices, std::vector<uint32_t>{0});
  EXPECT_EQ(c->report.reductions, 2u);
}

TEST(VerifyProgram, WrongProgramIsReportedAtItsSourceLine) {
  // A ring allreduce that stops one reduce short. Chunk 0 is reduced on
  // ranks 0 and 1 only, and that partial sum is copied back to rank 0 by the
  // copy lap: in[2][0] is never combined.
  coll::test::expectRejected(coll::test::RejectedProgram{
      "short_ring",
      "algorithm short_ring implements allreduce(chunks = N) with inplace = true {\n"
      "  for c in 0 .. N {\n"
      "    let acc = input[c][c];\n"
      "    for s in 1 .. N - 1 {\n"
      "      acc = reduce(acc, into: input[(c + s) % N][c]);\n"
      "    }\n"
      "    for s in 0 .. N - 1 {\n"
      "      acc = copy(acc, to: input[(c + s) % N][c]);\n"
      "    }\n"
      "  }\n"
      "}\n",
      3,
      ExpectedDiagnostics().error("output[0][0] ends holding in[0][0] + in[1][0] for N = 3; it "
                                  "should hold the reduction of in[0][0] + in[1][0] + in[2][0]; "
                                  "missing in[2][0]",
                                  8)});
}

} // namespace
