//===- StdlibProgramsTest.cpp - Every library program, every rank count ---===//
//
// Every program in stdlib/, found by listing the directory (a new program is
// tested without being named here), with its parameters' defaults:
//  - it compiles and verifies for every N from 2 to 64, or is rejected by a
//    `require` of its own ("requirement failed for N = n"), never by the
//    verifier or another error;
//  - for N in {2, 3, 4, 5, 7, 8, 16}, where it compiles, its plan runs on
//    LocalWorld (threads and single) on data distinct per (rank, element),
//    out of place and, where the collective has an in-place form, in place,
//    and every defined output matches the reference.
// COLL_STDLIB_SWEEP builds the exhaustive variant: every data type and
// operator at every one of those N.
//
//===----------------------------------------------------------------------===//

#include "CompilerTestUtil.h"
#include "TestHelpers.h"

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
    if (plan.info.collective == CollectiveKind::Custom)
      continue; // The executors run built-in collectives only.
    ++ran;
#ifdef COLL_STDLIB_SWEEP
    std::vector<DataType> types;
    for (unsigned t = 0; t < numDataTypes(); ++t)
      types.push_back(DataType(t));
    std::vector<RedOp> ops;
    for (unsigned o = 0; o < numRedOps(); ++o)
      ops.push_back(RedOp(o));
    const std::vector<uint64_t> counts = {0, 1, 7, 1000, 100003};
#else
    // One type and operator per rank count, turning through them.
    const std::vector<DataType> types = {n % 3 == 0   ? DataType::Int32
                                         : n % 3 == 1 ? DataType::Float32
                                                      : DataType::Float16};
    const std::vector<RedOp> ops = {n % 2 ? RedOp::Max : n % 4 ? RedOp::Avg : RedOp::Sum};
    const std::vector<uint64_t> counts = {1, 7, 1001};
#endif
    for (DataType type : types)
      for (RedOp op : ops)
        for (uint64_t count : counts)
          for (bool inplace : {false, true}) {
            if (inplace && !hasInPlaceForm(plan.info.collective))
              continue;
            for (ExecMode mode : {ExecMode::Threads, ExecMode::Single}) {
              RunCase rc;
              rc.type = type;
              rc.op = op;
              rc.count = count;
              rc.inplace = inplace;
              rc.mode = mode;
              rc.slice = count >= 1000 ? 64 : 3;
              rc.workersPerRank = uint32_t(count % 2);
              std::string err = runAndCheck(plan, rc);
              EXPECT_EQ(err, "") << GetParam() << " at N = " << n << ": " << describe(rc);
              if (!err.empty())
                return;
            }
          }
  }
  // User-declared collectives aside, every program runs somewhere.
  auto c = run->compile(8);
  if (c && c->plan.info.collective != CollectiveKind::Custom) {
    EXPECT_GT(ran, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Library, StdlibProgram, ::testing::ValuesIn(stdlibPrograms()), testName);

} // namespace
