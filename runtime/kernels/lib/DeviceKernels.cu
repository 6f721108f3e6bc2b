//===- DeviceKernels.cu - The interpreter kernel for every type and op ----===//
//
// One instance of interpretPlan per data type and operator (Avg runs as Sum
// and is divided afterwards), from DataTypes.def; Avg's division; and the
// staging copies around a launch. The last two serve every rank of a launch
// with one kernel: a small launch's time is mostly launches.
//
//===----------------------------------------------------------------------===//

#include "DeviceKernel.h"
#include "LaunchTables.h"

#include <algorithm>
#include <vector>

namespace coll::kernels {

namespace {

/// Buffers served by one launch of the batch kernels.
constexpr uint32_t kMaxBatch = 64;

/// Division: every buffer holds n elements.
struct DivideBatch {
  void *ptrs[kMaxBatch];
};

/// blockIdx.y picks the buffer; the x blocks share its elements.
template <DataType D>
__global__ void divideKernel(const __grid_constant__ DivideBatch b, uint64_t n, uint32_t nranks) {
  divideRange<D>(b.ptrs[blockIdx.y], n, nranks, uint64_t(blockIdx.x) * blockDim.x + threadIdx.x,
                 uint64_t(gridDim.x) * blockDim.x);
}

/// Copies: blockIdx.y picks the copy, block x copies bytes
/// [x * chunk, (x + 1) * chunk) of it (chunk a multiple of 16).
struct CopyBatch {
  uint64_t chunk;
  StagingCopy copies[kMaxBatch];
};

__global__ void copyBatchKernel(const __grid_constant__ CopyBatch b) {
  const StagingCopy &c = b.copies[blockIdx.y];
  const uint64_t begin = uint64_t(blockIdx.x) * b.chunk;
  if (begin >= c.bytes)
    return;
  const uint64_t n = c.bytes - begin < b.chunk ? c.bytes - begin : b.chunk;
  copyBytes(c.to + begin, nullptr, c.from + begin, n);
}

} // namespace

KernelFn selectKernel(DataType type, RedOp op) {
  return selectInterpreter<NoNetwork>(type, op);
}

cudaError_t launchDivide(DataType type, const std::vector<void *> &ptrs, uint64_t n,
                         uint32_t nranks, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  const uint32_t threads = 256;
  uint64_t blocks = (n + threads - 1) / threads;
  blocks = blocks < 1024 ? blocks : 1024;
  for (size_t first = 0; first < ptrs.size(); first += kMaxBatch) {
    DivideBatch b = {};
    const uint32_t count = uint32_t(std::min<size_t>(kMaxBatch, ptrs.size() - first));
    for (uint32_t i = 0; i < count; ++i)
      b.ptrs[i] = ptrs[first + i];
    const dim3 grid(uint32_t(blocks), count);
    switch (type) {
#define COLL_DATA_TYPE(Id, Name, Storage, Compute)                                                 \
  case DataType::Id:                                                                               \
    divideKernel<DataType::Id><<<grid, threads, 0, stream>>>(b, n, nranks);                        \
    break;
#include "coll/Runtime/DataTypes.def"
    default:
      return cudaErrorInvalidValue;
    }
    if (cudaError_t err = cudaGetLastError())
      return err;
  }
  return cudaSuccess;
}

cudaError_t launchDivide(DataType type, void *p, uint64_t n, uint32_t nranks, cudaStream_t stream) {
  return launchDivide(type, std::vector<void *>{p}, n, nranks, stream);
}

cudaError_t launchStagingCopies(const std::vector<StagingCopy> &copies, cudaStream_t stream) {
  // Copies share one kernel below 1 MiB, and below 16 MiB where the
  // kernel copies in words (the two pointers alike modulo 16, or both
  // 4-byte aligned; copyBytes() goes byte by byte otherwise): a
  // cudaMemcpyAsync costs the host some 5 us, so the 1 MiB copies of 8
  // ranks took 40 us of a call's time on an H200 (docs/gpu.md, "The
  // one-device mode made to fit"), where one kernel moves them all at once.
  // The others go to cudaMemcpyAsync.
  constexpr uint64_t kSmall = 1ull << 20, kWords = 16ull << 20;
  auto batches = [&](const StagingCopy &c) {
    const uintptr_t from = uintptr_t(c.from), to = uintptr_t(c.to);
    return c.bytes < kSmall ||
           (c.bytes < kWords && ((from & 15) == (to & 15) || ((from | to) & 3) == 0));
  };
  constexpr uint64_t kChunk = 64ull << 10; // Bytes per CTA.
  CopyBatch b = {};
  uint32_t batched = 0;
  uint64_t largest = 0;
  auto flush = [&]() -> cudaError_t {
    if (batched == 0)
      return cudaSuccess;
    b.chunk = kChunk;
    const uint32_t ctas = uint32_t((largest + kChunk - 1) / kChunk);
    copyBatchKernel<<<dim3(ctas, batched), 512, 0, stream>>>(b);
    batched = 0;
    largest = 0;
    return cudaGetLastError();
  };
  for (const StagingCopy &c : copies) {
    cudaError_t err = cudaSuccess;
    if (c.bytes == 0)
      continue;
    if (!batches(c)) {
      err = cudaMemcpyAsync(c.to, c.from, c.bytes, cudaMemcpyDeviceToDevice, stream);
    } else {
      b.copies[batched++] = c;
      largest = std::max(largest, c.bytes);
      if (batched == kMaxBatch)
        err = flush();
    }
    if (err)
      return err;
  }
  return flush();
}

} // namespace coll::kernels
