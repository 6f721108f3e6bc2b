//===- DeviceKernels.cu - The interpreter kernel for every type and op ----===//
//
// One instance of interpretPlan per data type and operator (Avg runs as Sum
// and is divided afterwards), from DataTypes.def, and Avg's division.
//
//===----------------------------------------------------------------------===//

#include "DeviceKernel.h"

namespace coll::kernels {

namespace {

template <DataType D> __global__ void divideKernel(void *p, uint64_t n, uint32_t nranks) {
  divideRange<D>(p, n, nranks, uint64_t(blockIdx.x) * blockDim.x + threadIdx.x,
                 uint64_t(gridDim.x) * blockDim.x);
}

} // namespace

KernelFn selectKernel(DataType type, RedOp op) {
  return selectInterpreter<NoNetwork>(type, op);
}

cudaError_t launchDivide(DataType type, void *p, uint64_t n, uint32_t nranks, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  const uint32_t threads = 256;
  uint64_t blocks = (n + threads - 1) / threads;
  blocks = blocks < 1024 ? blocks : 1024;
  switch (type) {
#define COLL_DATA_TYPE(Id, Name, Storage, Compute)                                                 \
  case DataType::Id:                                                                               \
    divideKernel<DataType::Id><<<uint32_t(blocks), threads, 0, stream>>>(p, n, nranks);            \
    return cudaGetLastError();
#include "coll/Runtime/DataTypes.def"
  }
  return cudaErrorInvalidValue;
}

} // namespace coll::kernels
