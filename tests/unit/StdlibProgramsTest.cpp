//===- StdlibProgramsTest.cpp - Every library program, every rank count ---===//
//
// Every program in stdlib/, found by listing the directory (a new program is
// tested without being named here), with its parameters' defaults:
//  - it compiles and verifies for every N from 2 to 64, or is rejected by a
//    `require` of its own ("requirement failed for N = n"), never by the
//    verifier or another error;
//  - for N in {2, 3, 4, 5, 7, 8, 16}, where it compiles, its plan runs on
//    every CPU executor (LocalWorld's threads and single modes, and the
//    shared-memory ProcessGroup) on data distinct per (rank, element), out
//    of place and, where the collective has an in-place form, in place, and
//    every defined output matches the reference: the built-in collective's
//    post-condition, or for a user-declared collective (the point-to-point
//    programs) the post-conditions its plan carries.
// COLL_STDLIB_SWEEP builds the exhaustive variant: every data type and
// operator at every one of those N.
//
//===----------------------------------------------------------------------===//

#include "CompilerTestUtil.h"
#include "TestHelpers.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/PlanSimulator.h"

#include <algorithm>
#include <filesystem>
#include <gtest/gtest.h>
#include <string>
#include <vector>

using namespace coll;
using namespace coll::test;

namespace {

/// The library's programs, sorted by file name.
std::vector<std::string> stdlibPrograms() {
  std::vector<std::string> names;
  for (const auto &e : std::filesystem::directory_iterator(COLL_STDLIB_DIR))
    if (e.is_regular_file() && e.path().extension() == ".coll")
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class StdlibProgram : public ::testing::TestWithParam<std::string> {};

std::string testName(const ::testing::TestParamInfo<std::string> &info) {
  std::string n = info.param.substr(0, info.param.size() - 5); // Without ".coll".
  std::replace_if(
      n.begin(), n.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  return n;
}

TEST(StdlibPrograms, TheLibraryIsFound) {
  // The parameterised tests below are only as good as this list.
  std::vector<std::string> names = stdlibPrograms();
  EXPECT_GE(names.size(), 9u);
  EXPECT_NE(std::find(names.begin(), names.end(), "ring_allreduce.coll"), names.end());
}

TEST_P(StdlibProgram, VerifiesOrStatesWhyForEveryRankCountUpTo64) {
  auto run = CompilerRun::fromStdlib(GetParam());
  ASSERT_TRUE(run->frontendOk()) << run->text();
  unsigned accepted = 0;
  for (uint32_t n = 2; n <= 64; ++n) {
    const size_t before = run->diag.diagnostics().size();
    auto c = run->compile(n);
    if (c) {
      ++accepted;
      EXPECT_EQ(c->plan.info.nranks, n);
      continue;
    }
    // Rejected: only by a requirement of the program, with one error.
    std::vector<std::string> errors;
    for (size_t i = before; i < run->diag.diagnostics().size(); ++i)
      if (run->diag.diagnostics()[i].kind == DiagKind::Error)
        errors.push_back(run->diag.diagnostics()[i].message);
    ASSERT_EQ(errors.size(), 1u) << GetParam() << " at N = " << n << ":\n" << run->text();
    EXPECT_EQ(errors[0].rfind("requirement failed for N = " + std::to_string(n), 0), 0u)
        << GetParam() << " at N = " << n << " failed otherwise than by a `require`: " << errors[0];
  }
  // A library program that accepts no rank count from 2 to 64 serves nobody.
  EXPECT_GT(accepted, 0u) << GetParam();
}

/// The rank counts the executors run.
constexpr uint32_t kRunRanks[] = {2, 3, 4, 5, 7, 8, 16};

TEST_P(StdlibProgram, RunsOnTheCpuExecutors) {
  auto run = CompilerRun::fromStdlib(GetParam());
  ASSERT_TRUE(run->frontendOk()) << run->text();
  unsigned ran = 0;
  for (uint32_t n : kRunRanks) {
    auto c = run->compile(n);
    if (!c)
      continue; // Its requirement; the test above checks the message.
    const Plan &plan = c->plan;
    // A user-declared collective is checked against the post-conditions
    // its plan carries; its count is a whole number of units of C chunks,
    // and it has no Avg.
    const bool custom = plan.info.collective == CollectiveKind::Custom;
    Result<uint32_t> perUnit = planChunksPerUnit(plan.info);
    ASSERT_TRUE(perUnit.ok()) << GetParam() << ": " << perUnit.message();
    const uint64_t unit = custom ? *perUnit : 1;
    if (custom) {
      ASSERT_TRUE(plan.contract.has_value()) << GetParam();
    }
    // The plan simulator (what imported plans are checked with) agrees with
    // the compiler on every plan it makes.
    SimulateReport sim = simulatePlan(plan);
    EXPECT_TRUE(sim.ok()) << GetParam() << " N=" << n << ": "
                          << (sim.problems.empty() ? "" : sim.problems.front());
    if (custom) {
      // Derived from the plan alone (as an imported coll="custom" is), the
      // contract holds every term the compiler proved, on the same chunks.
      Plan bare = plan;
      bare.contract.reset();
      PlanContract derived;
      SimulateOptions options;
      options.derivedContract = &derived;
      SimulateReport d = simulatePlan(bare, options);
      ASSERT_TRUE(d.ok()) << GetParam() << " N=" << n << ": " << d.problems.front();
      const PlanContract &want = *plan.contract;
      ASSERT_EQ(derived.outputs.size(), want.outputs.size());
      auto operands = [](const PlanContract &c, uint32_t entry) {
        std::vector<std::pair<uint32_t, uint32_t>> ops;
        for (uint32_t k = c.termBegin[entry - 1]; k < c.termBegin[entry]; ++k)
          ops.push_back({c.operands[k].rank, c.operands[k].chunk});
        std::sort(ops.begin(), ops.end());
        return ops;
      };
      for (size_t i = 0; i < want.outputs.size(); ++i)
        if (want.outputs[i]) {
          ASSERT_NE(derived.outputs[i], 0u) << GetParam() << " N=" << n << " output entry " << i;
          EXPECT_EQ(operands(derived, derived.outputs[i]), operands(want, want.outputs[i]))
              << GetParam() << " N=" << n << " output entry " << i;
        }
    }
    ++ran;
#ifdef COLL_STDLIB_SWEEP
    std::vector<DataType> types;
    for (unsigned t = 0; t < numDataTypes(); ++t)
      types.push_back(DataType(t));
    std::vector<RedOp> ops;
    for (unsigned o = 0; o < numRedOps(); ++o)
      if (!custom || RedOp(o) != RedOp::Avg)
        ops.push_back(RedOp(o));
    const std::vector<uint64_t> counts = {0, 1, 7, 1000, 100003};
#else
    // One type and operator per rank count, turning through them.
    const std::vector<DataType> types = {n % 3 == 0   ? DataType::Int32
                                         : n % 3 == 1 ? DataType::Float32
                                                      : DataType::Float16};
    const std::vector<RedOp> ops = {n % 2   ? RedOp::Max
                                    : n % 4 ? (custom ? RedOp::Prod : RedOp::Avg)
                                            : RedOp::Sum};
    const std::vector<uint64_t> counts = {1, 7, 1001};
#endif
    for (DataType type : types)
      for (RedOp op : ops)
        for (uint64_t units : counts)
          for (bool inplace : {false, true}) {
            if (inplace && !hasInPlaceForm(plan.info.collective))
              continue;
            // Threads, single, and the shared-memory ProcessGroup.
            for (int executor = 0; executor < 3; ++executor) {
              RunCase rc;
              rc.type = type;
              rc.op = op;
              rc.count = units * unit;
              const uint64_t count = rc.count;
              rc.inplace = inplace;
              rc.mode = executor == 1 ? ExecMode::Single : ExecMode::Threads;
              rc.processGroup = executor == 2;
              rc.slice = count >= 1000 ? 64 : 3;
              rc.workersPerRank = uint32_t(count % 2);
              std::string err = runAndCheck(plan, rc);
              EXPECT_EQ(err, "") << GetParam() << " at N = " << n << ": " << describe(rc);
              if (!err.empty())
                return;
            }
          }
  }
  // Every program runs somewhere.
  EXPECT_GT(ran, 0u) << GetParam();
}

/// A user-declared collective's plan carries its post-conditions, with
/// reductions and with instances (which cut every chunk into fine chunks),
/// and runs checked against them on every executor; a run that does not
/// meet them is reported, naming the wrong element.
TEST(StdlibPrograms, UserCollectivePlansAreCheckedAgainstTheirContract) {
  CompilerRun run(R"(
collective group_allreduce(group, chunks = 1) {
  require group >= 1 && group <= N : "group must have 1 to N ranks";
  input[chunks];
  output[2 * chunks];
  post output[r][i] == reduce(input[j][i] for j in 0 .. group)
      for r in 0 .. group, i in 0 .. chunks;
  post output[r][chunks + i] == input[(r + 1) % N][i] for r in 0 .. N, i in 0 .. chunks;
}

param group_size = 3;

algorithm group_chain implements group_allreduce(group = group_size, chunks = 2)
    with instances = 2 {
  for i in 0 .. 2 {
    let acc = copy(input[0][i], to: output[0][i]);
    for r in 1 .. group_size {
      copy(input[r][i], to: output[r][i]);
      acc = reduce(acc, into: output[r][i]);
    }
    for r in group_size - 2 .. -1 step -1 {
      acc = copy(acc, to: output[r][i]);
    }
  }
  for r in 0 .. N {
    copy(input[(r + 1) % N][0 .. 2], to: output[r][2 .. 4]);
  }
}
)");
  ASSERT_TRUE(run.frontendOk()) << run.text();
  auto c = run.compile(5);
  ASSERT_TRUE(c) << run.text();
  const Plan &plan = c->plan;
  ASSERT_TRUE(plan.contract.has_value());
  // 2 chunks of input and 4 of output, each cut in 2 by the instances.
  EXPECT_EQ(plan.info.inputChunks, 4u);
  EXPECT_EQ(plan.info.outputChunks, 8u);
  EXPECT_EQ(*planChunksPerUnit(plan.info), 4u);
  // Fine chunks 0 .. 3 of ranks 0 .. 2 are reductions; 4 .. 7 copies.
  const PlanContract &k = *plan.contract;
  uint32_t t = k.outputs[1 * 8 + 3] - 1;
  ASSERT_EQ(k.termBegin[t + 1] - k.termBegin[t], 3u);
  for (uint32_t j = 0; j < 3; ++j)
    EXPECT_EQ(k.operands[k.termBegin[t] + j], (PlanContract::Operand{j, 3}));
  EXPECT_EQ(k.outputs[3 * 8 + 0], 0u) << "rank 3 is outside the group";
  t = k.outputs[4 * 8 + 5] - 1;
  ASSERT_EQ(k.termBegin[t + 1] - k.termBegin[t], 1u);
  EXPECT_EQ(k.operands[k.termBegin[t]], (PlanContract::Operand{0, 1}));

  for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Max})
    for (int executor = 0; executor < 3; ++executor) {
      RunCase rc;
      rc.type = DataType::Float64;
      rc.op = op;
      rc.count = 4 * 251;
      rc.slice = 7;
      rc.mode = executor == 1 ? ExecMode::Single : ExecMode::Threads;
      rc.processGroup = executor == 2;
      EXPECT_EQ(runAndCheck(plan, rc), "") << describe(rc);
    }

  // The same run against a contract that expects rank 4's last chunk from
  // rank 2 instead of rank 0 fails there, and only there.
  Plan wrong = plan;
  t = wrong.contract->outputs[4 * 8 + 7] - 1;
  wrong.contract->operands.push_back({2, 3});
  wrong.contract->termBegin.push_back(uint32_t(wrong.contract->operands.size()));
  wrong.contract->outputs[4 * 8 + 7] = wrong.contract->numTerms();
  ASSERT_TRUE(validatePlan(wrong).ok());
  RunCase rc;
  rc.type = DataType::Int32;
  rc.count = 4 * 10;
  std::string err = runAndCheck(wrong, rc);
  EXPECT_NE(err.find("rank 4 output element 70 is"), std::string::npos) << err;
  EXPECT_NE(err.find("(10 of 40 checked elements wrong)"), std::string::npos) << err;
}

INSTANTIATE_TEST_SUITE_P(Library, StdlibProgram, ::testing::ValuesIn(stdlibPrograms()), testName);

} // namespace
