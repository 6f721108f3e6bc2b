//===- DeviceCheck.cu - Test data and reference collectives on a GPU ------===//

#include "DeviceCheck.h"
#include "coll/Runtime/Elementwise.h"
#include "coll/Runtime/TestData.h"

#include <cuda_runtime.h>
#include <string>

namespace coll::test {

namespace {

Status cudaFailure(const char *what, cudaError_t err) {
  cudaGetLastError();
  return Status::error(std::string(what) + ": " + cudaGetErrorString(err));
}

dim3 gridFor(uint64_t n) {
  uint64_t blocks = (n + 255) / 256;
  return dim3(uint32_t(blocks < 4096 ? (blocks ? blocks : 1) : 4096));
}

template <DataType D>
__global__ void fillKernel(RedOp op, uint32_t nranks, uint32_t rank, uint64_t n, void *buf) {
  auto *p = static_cast<typename DataTypeTraits<D>::Storage *>(buf);
  for (uint64_t e = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += uint64_t(gridDim.x) * blockDim.x)
    p[e] = testInputElement<D>(op, nranks, rank, e);
}

/// dst[i] = in[N-1][i] (op) (... (in[1][i] (op) in[0][i])), then Avg.
template <DataType D, RedOp Op>
__global__ void reduceKernel(void *dst, const void *const *inputs, uint64_t offset, uint64_t n,
                             uint32_t nranks) {
  using S = typename DataTypeTraits<D>::Storage;
  S *d = static_cast<S *>(dst);
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    S acc = static_cast<const S *>(inputs[0])[offset + i];
    for (uint32_t j = 1; j < nranks; ++j)
      acc = storeElement<D>(combine<Op>(
          loadElement<D>(static_cast<const S *>(inputs[j])[offset + i]), loadElement<D>(acc)));
    if (Op == RedOp::Avg)
      acc = storeElement<D>(divideByRanks(loadElement<D>(acc), nranks));
    d[i] = acc;
  }
}

template <DataType D>
__global__ void compareKernel(const void *got, const void *want, uint64_t n,
                              unsigned long long *wrong, unsigned long long *first) {
  using S = typename DataTypeTraits<D>::Storage;
  const S *a = static_cast<const S *>(got);
  const S *b = static_cast<const S *>(want);
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    bool same;
    if constexpr (isFloatType(D)) {
      auto x = loadElement<D>(a[i]), y = loadElement<D>(b[i]);
      same = x == y || (x != x && y != y);
    } else {
      same = a[i] == b[i];
    }
    if (!same) {
      atomicAdd(wrong, 1ull);
      atomicMin(first, (unsigned long long)i);
    }
  }
}

template <class F> bool dispatchType(DataType type, F &&f) {
  return visitDataType(type, f);
}

} // namespace

Status deviceFillTestInput(DataType type, RedOp op, uint32_t nranks, uint32_t rank, uint64_t n,
                           void *buf) {
  if (n == 0)
    return Status::success();
  nranks = nranks ? nranks : 1;
  if (!dispatchType(type, [&](auto traits) {
        fillKernel<decltype(traits)::type><<<gridFor(n), 256>>>(op, nranks, rank, n, buf);
      }))
    return Status::error("invalid data type");
  if (cudaError_t err = cudaGetLastError())
    return cudaFailure("fill kernel", err);
  return Status::success();
}

Status deviceReference(CollectiveKind kind, uint32_t nranks, uint32_t root, uint64_t count,
                       DataType type, RedOp op, const std::vector<const void *> &inputs,
                       const std::vector<void *> &outputs) {
  if (nranks == 0 || inputs.size() != nranks || outputs.size() != nranks || root >= nranks)
    return Status::error("bad reference arguments");
  if (count == 0)
    return Status::success();
  if (kind == CollectiveKind::Custom)
    return Status::error("custom collectives have no reference");
  const uint64_t es = dataTypeSize(type), unit = count * es;
  const void **table = nullptr;
  cudaError_t err = cudaMalloc(&table, nranks * sizeof(void *));
  if (err)
    return cudaFailure("cudaMalloc", err);
  struct Free {
    const void **p;
    ~Free() { cudaFree(p); }
  } freeTable{table};
  if ((err = cudaMemcpy(table, inputs.data(), nranks * sizeof(void *), cudaMemcpyHostToDevice)))
    return cudaFailure("cudaMemcpy", err);
  auto in = [&](uint32_t r, uint64_t block) {
    return static_cast<const char *>(inputs[r]) + block * unit;
  };
  auto out = [&](uint32_t r, uint64_t block) {
    return static_cast<char *>(outputs[r]) + block * unit;
  };
  auto copy = [&](char *dst, const char *src) {
    if (!err)
      err = cudaMemcpy(dst, src, unit, cudaMemcpyDeviceToDevice);
  };
  auto reduceInto = [&](char *dst, uint64_t block) {
    visitDataType(type, [&](auto traits) {
      constexpr DataType D = decltype(traits)::type;
      visitRedOp(op, [&](auto opTag) {
        constexpr RedOp Op = decltype(opTag)::op;
        reduceKernel<D, Op><<<gridFor(count), 256>>>(dst, table, block * count, count, nranks);
      });
    });
    if (!err)
      err = cudaGetLastError();
  };
  // Every defined output unit from the input unit(s) unitSource() names; a
  // reduction is computed once and copied to the other units that hold it.
  forEachOutputUnit(kind, nranks, root, [&](OutputUnit u, UnitSource s, const OutputUnit *same) {
    if (same)
      copy(out(u.rank, u.block), out(same->rank, same->block));
    else if (s.everyRank)
      reduceInto(out(u.rank, u.block), s.block);
    else
      copy(out(u.rank, u.block), in(s.rank, s.block));
  });
  if (!err)
    err = cudaDeviceSynchronize();
  if (err)
    return cudaFailure("reference", err);
  return Status::success();
}

Result<uint64_t> deviceCountMismatches(DataType type, const void *got, const void *want, uint64_t n,
                                       uint64_t *firstIndex) {
  if (n == 0)
    return uint64_t(0);
  unsigned long long *counters = nullptr;
  cudaError_t err = cudaMalloc(&counters, 2 * sizeof(unsigned long long));
  if (err)
    return cudaFailure("cudaMalloc", err);
  unsigned long long host[2] = {0, ~0ull};
  if (!(err = cudaMemcpy(counters, host, sizeof host, cudaMemcpyHostToDevice))) {
    dispatchType(type, [&](auto traits) {
      compareKernel<decltype(traits)::type>
          <<<gridFor(n), 256>>>(got, want, n, counters, counters + 1);
    });
    err = cudaGetLastError();
    if (!err)
      err = cudaMemcpy(host, counters, sizeof host, cudaMemcpyDeviceToHost);
  }
  cudaFree(counters);
  if (err)
    return cudaFailure("compare", err);
  if (host[0] && firstIndex)
    *firstIndex = host[1];
  return uint64_t(host[0]);
}

} // namespace coll::test
