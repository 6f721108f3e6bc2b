//===- LocalInterpreterGpuTest.cpp - The interpreter core on a GPU --------===//
//
// The same threadblock program (local steps, fp32 sum) through the CUDA
// instance of the interpreter core and through LocalWorld on the CPU gives
// the same bits. Skips without a usable GPU.
//
//===----------------------------------------------------------------------===//

#include "coll/Kernels/DeviceProbe.h"
#include "coll/Kernels/LocalInterpreter.h"
#include "coll/Runtime/Executor.h"

#include <gtest/gtest.h>
#include <vector>

using namespace coll;

namespace {

Instruction local(Opcode op, BufferKind src, uint32_t srcOff, BufferKind dst, uint32_t dstOff,
                  uint32_t count) {
  Instruction in;
  in.op = op;
  in.srcBuf = src;
  in.srcOff = srcOff;
  in.dstBuf = dst;
  in.dstOff = dstOff;
  in.count = count;
  return in;
}

TEST(LocalInterpreterGpu, MatchesCpu) {
  int probe = 0;
  if (!kernels::probeDevice(7, probe))
    GTEST_SKIP() << "no usable CUDA device";
  constexpr BufferKind I = BufferKind::Input, O = BufferKind::Output, S = BufferKind::Scratch;
  Plan plan;
  plan.info.name = "local";
  plan.info.nranks = 1;
  plan.info.inputChunks = plan.info.outputChunks = 3;
  plan.info.connectionDepth = 1;
  plan.ranks.resize(1);
  plan.ranks[0].scratchChunks = 2;
  Threadblock tb;
  tb.steps = {local(Opcode::Copy, I, 0, O, 0, 3), local(Opcode::Copy, I, 2, S, 1, 1),
              local(Opcode::Reduce, S, 1, O, 0, 1), local(Opcode::Reduce, I, 1, O, 2, 1)};
  plan.ranks[0].threadblocks = {tb};
  for (uint64_t count : {0ull, 2ull, 1000ull, 100001ull}) {
    std::vector<float> in(count + 1), cpu(count + 1, -1.0f), gpu(count + 1, -1.0f);
    for (uint64_t i = 0; i < count; ++i)
      in[i] = float(i % 1000) * 0.25f - 7;
    ExecOptions o;
    o.mode = ExecMode::Single;
    o.sliceElements = 4096;
    Status s =
        LocalWorld().run(plan, {in.data()}, {cpu.data()}, count, DataType::Float32, RedOp::Sum, o);
    ASSERT_TRUE(s.ok()) << s.message();
    std::string err =
        kernels::runLocalThreadblock(tb, 3, 3, 2, 3, count, 4096, in.data(), gpu.data());
    ASSERT_EQ(err, "");
    EXPECT_EQ(cpu, gpu) << "count " << count;
  }
}

} // namespace
