//===- CompilerExecutionTest.cpp - Compiled plans compute the collective --===//
//
// Compiles programs and runs the plans on symbolic values (PlanSimulator.h)
// under several interleavings of threadblocks: every plan must finish and
// meet its collective's post-condition, whatever the order in which
// independent threadblocks run, at the connection depth it was proven with.
//
//===----------------------------------------------------------------------===//

#include "CompilerTestUtil.h"
#include "PlanSimulator.h"

#include <gtest/gtest.h>

using namespace coll;
using namespace coll::compiler;
using coll::test::CompilerRun;
using coll::test::PlanSimulator;

namespace {

/// Compiles \p run's algorithm \p name for \p n ranks and runs the plan with
/// \p seeds interleavings; returns the first problem, or "".
std::string compileAndRun(CompilerRun &run, uint32_t n, unsigned seeds = 8,
                          PipelineOptions opts = {}, llvm::StringRef name = "") {
  auto c = run.compile(n, opts, name);
  if (!c)
    return "compilation failed:\n" + run.text();
  PlanSimulator sim(c->plan);
  for (unsigned seed = 0; seed < seeds; ++seed) {
    std::string err = sim.run(seed);
    if (!err.empty())
      return "seed " + std::to_string(seed) + ": " + err;
    // What the verifier says about bitwise identity is what the plan does.
    if (c->trace->collective() == CollectiveKind::AllReduce)
      for (uint32_t i = 0; i < c->plan.info.outputChunks; ++i) {
        bool same = sim.sameTreeOnAllRanks(i);
        bool claimed =
            std::find(c->report.differingIndices.begin(), c->report.differingIndices.end(),
                      i / c->trace->instances) == c->report.differingIndices.end();
        if (same != claimed)
          return "seed " + std::to_string(seed) + ": output chunk " + std::to_string(i) +
                 (same ? " is" : " is not") + " the same tree on all ranks, the verifier said " +
                 (claimed ? "it is" : "it is not");
      }
  }
  return "";
}

TEST(Execution, SimulatorCatchesAWrongPlan) {
  // The simulator itself must be able to fail: drop a dependency-free step
  // from a correct plan, and swap two receives.
  auto lib = CompilerRun::fromStdlib("ring_allreduce.coll");
  ASSERT_TRUE(lib->frontendOk());
  auto c = lib->compile(4);
  ASSERT_TRUE(c);
  Plan plan = c->plan;
  {
    PlanSimulator ok(plan);
    EXPECT_EQ(ok.run(0), "");
    EXPECT_EQ(ok.outputValue(0, 0), "(((in[0][0] + in[1][0]) + in[2][0]) + in[3][0])");
    // In the ring, chunk c starts at rank c: for chunk 1, in[1][1] is the
    // innermost operand.
    EXPECT_EQ(ok.outputValue(2, 1), "(((in[1][1] + in[2][1]) + in[3][1]) + in[0][1])");
  }
  // Rank 0's last step receives chunk 2; without it rank 0 keeps a partial
  // sum there and rank 3's message stays unreceived.
  plan.ranks[0].threadblocks[0].steps.pop_back();
  PlanSimulator dropped(plan);
  EXPECT_EQ(dropped.run(0), "connection rank 3 -> rank 0 (channel 0) ends with 1 unreceived "
                            "messages");
  plan = c->plan;
  // A plan whose sends exceed the depth deadlocks.
  plan.info.connectionDepth = 0;
  PlanSimulator stuck(plan);
  EXPECT_EQ(stuck.run(0), "deadlock: no threadblock can make progress");
  plan = c->plan;
  // Receiving into the wrong chunk breaks the post-condition.
  plan.ranks[1].threadblocks[0].steps.back().dstOff ^= 1;
  PlanSimulator wrong(plan);
  EXPECT_EQ(wrong.run(0), "output[1][2] is (((in[3][3] + in[0][3]) + in[1][3]) + in[2][3]), "
                          "expected the reduction of column 2");
}

/// A library file compiled for each of \p ranks and run with \p seeds
/// interleavings, at connection depth \p depth.
struct LibraryRun {
  std::string name;
  const char *file;
  std::vector<uint32_t> ranks;
  unsigned seeds;
  uint32_t depth;
};
void PrintTo(const LibraryRun &c, std::ostream *os) {
  *os << c.name;
}

/// The rank counts \p lo to \p hi.
std::vector<uint32_t> upTo(uint32_t lo, uint32_t hi) {
  std::vector<uint32_t> out;
  for (uint32_t n = lo; n <= hi; ++n)
    out.push_back(n);
  return out;
}

class LibraryRuns : public ::testing::TestWithParam<LibraryRun> {};

TEST_P(LibraryRuns, MeetThePostCondition) {
  const LibraryRun &c = GetParam();
  auto lib = CompilerRun::fromStdlib(c.file);
  ASSERT_TRUE(lib->frontendOk()) << lib->text();
  PipelineOptions opts;
  opts.connectionDepth = c.depth;
  for (uint32_t n : c.ranks)
    EXPECT_EQ(compileAndRun(*lib, n, c.seeds, opts), "") << c.file << " N = " << n;
}

INSTANTIATE_TEST_SUITE_P(
    Execution, LibraryRuns,
    ::testing::Values(LibraryRun{"RingUpTo16", "ring_allreduce.coll", upTo(2, 16), 8, 4},
                      LibraryRun{"RingLarge", "ring_allreduce.coll", {31, 64}, 2, 4},
                      LibraryRun{"TreeUpTo16", "tree_allreduce.coll", upTo(2, 16), 8, 4},
                      LibraryRun{"TreeLarge", "tree_allreduce.coll", {31, 64}, 2, 4},
                      LibraryRun{"TreeAtDepthOne", "tree_allreduce.coll", {2, 3, 7, 12}, 8, 1},
                      LibraryRun{
                          "AlltoallAllpairs", "alltoall_allpairs.coll", {1, 2, 3, 4, 8}, 8, 4},
                      LibraryRun{"AlltoallTwostep", "alltoall_twostep.coll", {4, 8, 16}, 8, 4}),
    coll::test::CaseName());

TEST(Execution, LibraryRingAtEveryDepthAndFusion) {
  auto lib = CompilerRun::fromStdlib("ring_allreduce.coll");
  ASSERT_TRUE(lib->frontendOk()) << lib->text();
  for (uint32_t depth : {1u, 2u, 3u})
    for (auto fuse : {PipelineOptions::Fuse::Auto, PipelineOptions::Fuse::Never})
      for (uint32_t n : {2u, 3u, 5u, 8u}) {
        PipelineOptions opts;
        opts.connectionDepth = depth;
        opts.fuse = fuse;
        EXPECT_EQ(compileAndRun(*lib, n, 8, opts), "")
            << "N = " << n << " depth " << depth << " fuse " << int(fuse);
      }
}

// Programs from docs/language.md.
const char *const DocPrograms = R"(
param nchunks = 2;
param root = 1;

algorithm ring_allgather implements allgather(chunks = nchunks) {
  for r in 0 .. N {
    let lo = r * nchunks;
    let hi = lo + nchunks;
    let blk = copy(input[r][0 .. nchunks], to: output[r][lo .. hi]);
    for s in 1 .. N {
      blk = copy(blk, to: output[(r + s) % N][lo .. hi]);
    }
  }
}

algorithm ring_allgather_inplace implements allgather(chunks = nchunks) with inplace = true {
  for r in 0 .. N {
    let lo = r * nchunks;
    let blk = output[r][lo .. lo + nchunks];
    for s in 1 .. N {
      blk = copy(blk, to: output[(r + s) % N][lo .. lo + nchunks]);
    }
  }
}

algorithm tree_broadcast implements broadcast(root = root, chunks = nchunks) {
  for i in 0 .. nchunks {
    copy(input[root][i], to: output[root][i]);
    for v in 1 .. N {
      let parent = ((v - 1) / 2 + root) % N;
      let child = (v + root) % N;
      copy(output[parent][i], to: output[child][i]);
    }
  }
}

algorithm direct_broadcast implements broadcast(root = root, chunks = nchunks) {
  for r in 0 .. N {
    copy(input[root][0 .. nchunks], to: output[r][0 .. nchunks]);
  }
}

algorithm rd_allgather implements allgather() {
  require is_pow2(N);
  for r in 0 .. N {
    copy(input[r][0], to: output[r][r]);
  }
  for k in 0 .. log2(N) {
    let d = 1 << k;
    for r in 0 .. N {
      let base = r & ~(d - 1);
      copy(output[r][base .. base + d], to: output[r ^ d][base .. base + d]);
    }
  }
}

algorithm ring_left implements allgather() {
  for r in 0 .. N {
    let blk = copy(input[r][0], to: output[r][r]);
    for s in 1 .. N {
      blk = copy(blk, to: output[(r - s) % N][r]);
    }
  }
}

algorithm hinted implements allgather(chunks = 2) {
  for r in 0 .. N {
    for i in 0 .. 2 {
      let c = copy(input[r][i], to: output[r][2 * r + i], tb: i);
      for s in 1 .. N {
        c = copy(c, to: output[(r + s) % N][2 * r + i], channel: i, sendtb: i, recvtb: i);
      }
    }
  }
}

algorithm ring_reducescatter implements reducescatter(chunks = 1) {
  for b in 0 .. N {
    // Block b starts at rank b + 1 and ends, complete, at rank b.
    let acc = input[(b + 1) % N][b];
    for s in 2 .. N + 1 {
      acc = reduce(acc, into: input[(b + s) % N][b]);
    }
    copy(acc, to: output[b][0]);
  }
}

algorithm ring_reducescatter_inplace implements reducescatter(chunks = 1) with inplace = true {
  for b in 0 .. N {
    let acc = input[(b + 1) % N][b];
    for s in 2 .. N + 1 {
      acc = reduce(acc, into: input[(b + s) % N][b]);
    }
  }
}

algorithm chain_broadcast_inplace implements broadcast(root = root, chunks = nchunks)
    with inplace = true {
  for i in 0 .. nchunks {
    let c = output[root][i];
    for s in 1 .. N {
      c = copy(c, to: output[(root + s) % N][i]);
    }
  }
}

algorithm chain_reduce implements reduce(root = root, chunks = nchunks) {
  for i in 0 .. nchunks {
    let acc = copy(input[(root + 1) % N][i], to: output[(root + 1) % N][i]);
    for s in 2 .. N + 1 {
      let r = (root + s) % N;
      acc = reduce(acc, into: input[r][i]);
    }
    copy(acc, to: output[root][i]);
  }
}

algorithm direct_gather implements gather(root = root, chunks = nchunks) {
  for j in 0 .. N {
    copy(input[j][0 .. nchunks], to: output[root][j * nchunks .. (j + 1) * nchunks]);
  }
}

algorithm direct_scatter implements scatter(root = root, chunks = nchunks) {
  for r in 0 .. N {
    copy(input[root][r * nchunks .. (r + 1) * nchunks], to: output[r][0 .. nchunks]);
  }
}
)";

TEST(Execution, DocumentedPrograms) {
  CompilerRun run(DocPrograms);
  ASSERT_TRUE(run.frontendOk()) << run.text();
  for (const ast::AlgorithmDecl *a : run.module->algorithms())
    for (uint32_t n : {2u, 3u, 4u, 5u, 8u}) {
      if (a->name == "rd_allgather" && (n & (n - 1)))
        continue;
      EXPECT_EQ(compileAndRun(run, n, 8, {}, a->name), "") << a->name << " N = " << n;
    }
}

TEST(Execution, DocumentedProgramsWithInstances) {
  // Instances are declared in the program: add them to some.
  std::string source = DocPrograms;
  for (const char *name : {"ring_allgather", "tree_broadcast", "ring_reducescatter", "chain_reduce",
                           "direct_scatter"}) {
    std::string header = std::string("algorithm ") + name + " implements ";
    size_t at = source.find(header);
    ASSERT_NE(at, std::string::npos) << name;
    size_t brace = source.find(") {", at);
    source.insert(brace + 1, " with instances = 3");
  }
  CompilerRun three(source);
  ASSERT_TRUE(three.frontendOk()) << three.text();
  for (const char *name :
       {"ring_allgather", "tree_broadcast", "ring_reducescatter", "chain_reduce", "direct_scatter"})
    for (uint32_t n : {2u, 3u, 5u}) {
      EXPECT_EQ(compileAndRun(three, n, 4, {}, name), "") << name << " N = " << n;
      auto c = three.compile(n, {}, name);
      ASSERT_TRUE(c);
      EXPECT_EQ(c->plan.info.instances, 3u);
    }
}

TEST(Execution, ScratchReuseUnderEveryInterleaving) {
  // A pipeline through scratch on every rank: each chunk hops r -> r + 1
  // through a scratch slot that is dead once forwarded, so slots are
  // reused while other threadblocks may still be busy with older chunks.
  CompilerRun run("param nchunks = 4;\n"
                  "param k = 1;\n"
                  "algorithm relay implements broadcast(root = 0, chunks = nchunks)\n"
                  "    with instances = k {\n"
                  "  scratch tmp[nchunks];\n"
                  "  for i in 0 .. nchunks {\n"
                  "    copy(input[0][i], to: output[0][i]);\n"
                  "    let c = copy(input[0][i], to: tmp[1][i]);\n"
                  "    copy(c, to: output[1][i]);\n"
                  "    for r in 2 .. N {\n"
                  "      c = copy(c, to: tmp[r][i]);\n"
                  "      copy(c, to: output[r][i]);\n"
                  "    }\n"
                  "  }\n"
                  "}\n");
  ASSERT_TRUE(run.frontendOk()) << run.text();
  for (int64_t k : {1, 2})
    for (uint32_t n : {2u, 3u, 4u, 6u})
      for (uint32_t depth : {1u, 2u, 4u}) {
        PipelineOptions opts;
        opts.connectionDepth = depth;
        opts.instantiate.defines["k"] = k;
        EXPECT_EQ(compileAndRun(run, n, 16, opts), "")
            << "N = " << n << " depth " << depth << " instances " << k;
      }
}

TEST(Execution, LocalReduceIntoScratchKeepsItsOperand) {
  // A local reduce reads its destination: scratch allocation must keep the
  // reduce on the chunk that holds its operand (it once opened a new one,
  // so the plan reduced in[r] with itself and lost its neighbour's chunk).
  CompilerRun run("algorithm acc implements allreduce() {\n"
                  "  scratch t[2];\n"
                  "  for r in 0 .. N {\n"
                  "    copy(input[r][0], to: t[r][1]);\n"
                  "    copy(input[(r + 1) % N][0], to: t[r][0]);\n"
                  "    copy(t[r][1], to: output[r][0]);\n"
                  "    reduce(output[r][0], into: t[r][0]);\n"
                  "    copy(t[r][0], to: output[r][0]);\n"
                  "  }\n"
                  "}\n");
  ASSERT_TRUE(run.frontendOk()) << run.text();
  EXPECT_EQ(compileAndRun(run, 2, 16), "");
}

TEST(Execution, UserCollectives) {
  // docs/language.md 3.14; the simulator runs them to the end (a custom
  // collective's post-condition is the verifier's business).
  CompilerRun run(R"(
collective shift(chunks = 1) {
  input[chunks];
  output[chunks];
  pre input[r][i] for r in 0 .. N, i in 0 .. chunks;
  post output[r + 1][i] == input[r][i] for r in 0 .. N, i in 0 .. chunks if r + 1 < N;
}

collective group_allreduce(group, chunks = 1) {
  require group >= 1 && group <= N : "group must have 1 to N ranks";
  input[chunks];
  output[chunks];
  pre input[r][i] for r in 0 .. group, i in 0 .. chunks;
  post output[r][i] == reduce(input[j][i] for j in 0 .. group)
      for r in 0 .. group, i in 0 .. chunks;
}

param nchunks = 2;

algorithm chain_shift implements shift(chunks = nchunks) {
  for r in 0 .. N - 1 {
    copy(input[r][0 .. nchunks], to: output[r + 1][0 .. nchunks]);
  }
}

param group_size = 4;

algorithm group_chain implements group_allreduce(group = group_size) {
  require group_size >= 2 : "the chain needs two ranks";
  let acc = copy(input[0][0], to: output[0][0]);
  for r in 1 .. group_size {
    copy(input[r][0], to: output[r][0]);
    acc = reduce(acc, into: output[r][0]);
  }
  for r in group_size - 2 .. -1 step -1 {
    acc = copy(acc, to: output[r][0]);
  }
}
)");
  ASSERT_TRUE(run.frontendOk()) << run.text();
  for (uint32_t n : {2u, 3u, 5u})
    EXPECT_EQ(compileAndRun(run, n, 8, {}, "chain_shift"), "") << "N = " << n;
  for (uint32_t n : {4u, 5u, 8u})
    EXPECT_EQ(compileAndRun(run, n, 8, {}, "group_chain"), "") << "N = " << n;
  auto c = run.compile(4, {}, "group_chain");
  ASSERT_TRUE(c) << run.text();
  EXPECT_EQ(c->plan.info.collective, CollectiveKind::Custom);
  EXPECT_EQ(c->report.checkedSlots, 4u);
  PlanSimulator sim(c->plan);
  ASSERT_EQ(sim.run(0), "");
  for (uint32_t r = 0; r < 4; ++r)
    EXPECT_EQ(sim.outputValue(r, 0), "(((in[0][0] + in[1][0]) + in[2][0]) + in[3][0])");
}

} // namespace
