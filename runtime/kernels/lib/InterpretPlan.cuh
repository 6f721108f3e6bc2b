//===- InterpretPlan.cuh - The interpreter kernel --------------*- CUDA -*-===//
/// \file
/// interpretPlan, the kernel entry that runs one threadblock of the plan per
/// CTA on a DevicePlatform, and selectInterpreter, which instantiates it for
/// every data type and operator.
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_LIB_INTERPRETPLAN_CUH
#define COLL_KERNELS_LIB_INTERPRETPLAN_CUH

#include "DevicePlatform.cuh"
#include "DeviceSync.cuh"
#include "KernelAbi.h"
#include "coll/Runtime/Interpreter.h"

#include <cstdint>

namespace coll::kernels {

/// The kernel: CTA blockIdx.x runs its threadblock's program over every
/// slice, from shared memory when it fits.
template <DataType D, RedOp Op, class Net = NoNetwork>
__global__ void __launch_bounds__(kMaxThreadsPerBlock)
    interpretPlan(const __grid_constant__ KernelParams k) {
  extern __shared__ uint32_t sharedSteps[];
  __shared__ TbDesc tb;
  const uint64_t startNs = k.trace && threadIdx.x == 0 ? globalTimerNs() : 0;
  if (threadIdx.x == 0)
    tb = k.tbs[blockIdx.x];
  __syncthreads();
  const Instruction *steps = k.steps + tb.stepsBegin;
  if (tb.numSteps <= k.maxSharedSteps) {
    constexpr uint32_t words = sizeof(Instruction) / sizeof(uint32_t);
    static_assert(sizeof(Instruction) % sizeof(uint32_t) == 0, "instructions are whole words");
    const uint32_t *from = reinterpret_cast<const uint32_t *>(steps);
    for (uint32_t i = threadIdx.x; i < tb.numSteps * words; i += blockDim.x)
      sharedSteps[i] = from[i];
    __syncthreads();
    steps = reinterpret_cast<const Instruction *>(sharedSteps);
  }
  DevicePlatform<D, Op, Net> platform(k, tb, blockIdx.x);
  ProgramView program;
  program.steps = steps;
  program.numSteps = tb.numSteps;
  program.deps = k.deps + tb.depsBegin;
  Interpreter<DevicePlatform<D, Op, Net>> interp(platform, program, k.layout.numSlices);
  ExecStatus st = platform.drain(interp.run(), tb.numSteps);
  if (st.result != WaitResult::Ready)
    platform.recordStop(st);
  platform.traceEnd(startNs);
  platform.finishLaunch();
}

/// interpretPlan over \p Net for \p type and \p op (Avg runs as Sum); null
/// when invalid. Instantiates the kernel of every data type and operator.
template <class Net> KernelFn selectInterpreter(DataType type, RedOp op) {
  switch (type) {
#define COLL_DATA_TYPE(Id, Name, Storage, Compute)                                                 \
  case DataType::Id:                                                                               \
    switch (op) {                                                                                  \
    case RedOp::Sum:                                                                               \
    case RedOp::Avg:                                                                               \
      return interpretPlan<DataType::Id, RedOp::Sum, Net>;                                         \
    case RedOp::Prod:                                                                              \
      return interpretPlan<DataType::Id, RedOp::Prod, Net>;                                        \
    case RedOp::Max:                                                                               \
      return interpretPlan<DataType::Id, RedOp::Max, Net>;                                         \
    case RedOp::Min:                                                                               \
      return interpretPlan<DataType::Id, RedOp::Min, Net>;                                         \
    }                                                                                              \
    return nullptr;
#include "coll/Runtime/DataTypes.def"
  }
  return nullptr;
}

} // namespace coll::kernels

#endif // COLL_KERNELS_LIB_INTERPRETPLAN_CUH
