//===- DeviceCopy.cuh - Data movement of one CTA ---------------*- CUDA -*-===//
/// \file
/// Copies and reductions in which every thread of the CTA takes part, with
/// 16-byte accesses, several in flight per thread.
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_LIB_DEVICECOPY_CUH
#define COLL_KERNELS_LIB_DEVICECOPY_CUH

#include "coll/Runtime/DataType.h"
#include "coll/Runtime/Elementwise.h"

#include <cstdint>

namespace coll::kernels {

/// Vectors in flight per thread and loop iteration.
constexpr int kUnroll = 4;

// The data movement functions are not inlined: one copy of each loop in the
// kernel keeps the per-step control path small, and a cold instruction cache
// (a fresh launch) costs a few lines instead of a copy per opcode handler.

/// dst[i] = src[i] for n words of type W, then dst1 too when not null.
template <class W>
__device__ __forceinline__ void copyWords(W *dst0, W *dst1, const W *src, uint64_t n) {
  const uint64_t t = threadIdx.x, nt = blockDim.x;
  uint64_t i = t;
  for (; i + (kUnroll - 1) * nt < n; i += kUnroll * nt) {
    W v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      v[u] = src[i + u * nt];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      dst0[i + u * nt] = v[u];
      if (dst1)
        dst1[i + u * nt] = v[u];
    }
  }
  for (; i < n; i += nt) {
    W v = src[i];
    dst0[i] = v;
    if (dst1)
      dst1[i] = v;
  }
}

/// Copies \p bytes from \p src to \p dst0 (and \p dst1 when not null) with
/// the widest accesses the pointers' common alignment allows: bytes up to a
/// 16-byte boundary, 16-byte words, then the tail.
static __device__ __noinline__ void copyBytes(char *dst0, char *dst1, const char *src,
                                              uint64_t bytes) {
  uintptr_t mis = uintptr_t(src) & 15;
  bool same = (uintptr_t(dst0) & 15) == mis && (!dst1 || (uintptr_t(dst1) & 15) == mis);
  uint64_t head = same ? ((16 - mis) & 15) : bytes;
  head = head < bytes ? head : bytes;
  const uint64_t t = threadIdx.x, nt = blockDim.x;
  if (!same && ((uintptr_t(src) | uintptr_t(dst0) | uintptr_t(dst1)) & 3) == 0) {
    // Differently aligned, but all to 4 bytes.
    uint64_t n = bytes / 4;
    copyWords(reinterpret_cast<uint32_t *>(dst0), reinterpret_cast<uint32_t *>(dst1),
              reinterpret_cast<const uint32_t *>(src), n);
    for (uint64_t i = n * 4 + t; i < bytes; i += nt) {
      dst0[i] = src[i];
      if (dst1)
        dst1[i] = src[i];
    }
    return;
  }
  for (uint64_t i = t; i < head; i += nt) {
    dst0[i] = src[i];
    if (dst1)
      dst1[i] = src[i];
  }
  uint64_t vecs = (bytes - head) / 16;
  copyWords(reinterpret_cast<uint4 *>(dst0 + head),
            dst1 ? reinterpret_cast<uint4 *>(dst1 + head) : nullptr,
            reinterpret_cast<const uint4 *>(src + head), vecs);
  for (uint64_t i = head + vecs * 16 + t; i < bytes; i += nt) {
    dst0[i] = src[i];
    if (dst1)
      dst1[i] = src[i];
  }
}

/// 16 bytes as elements of S.
template <class S> union Vec16 {
  uint4 raw;
  S e[16 / sizeof(S)];
};

/// dst0[i] (and dst1[i]) = in[i] (op) local[i] for n elements: elements up
/// to a 16-byte boundary, 16-byte vectors, then the tail; one element at a
/// time (several in flight) when the pointers are differently aligned.
template <DataType D, RedOp Op>
__device__ __noinline__ void reduceElements(char *dst0, char *dst1, const char *in,
                                            const char *local, uint64_t n) {
  using S = typename DataTypeTraits<D>::Storage;
  constexpr uint64_t es = sizeof(S), per = 16 / es;
  auto one = [](S a, S b) {
    return storeElement<D>(combine<Op>(loadElement<D>(a), loadElement<D>(b)));
  };
  S *d0 = reinterpret_cast<S *>(dst0);
  S *d1 = reinterpret_cast<S *>(dst1);
  const S *a = reinterpret_cast<const S *>(in);
  const S *b = reinterpret_cast<const S *>(local);
  const uint64_t t = threadIdx.x, nt = blockDim.x;
  uintptr_t mis = uintptr_t(in) & 15;
  bool same = (uintptr_t(local) & 15) == mis && (uintptr_t(dst0) & 15) == mis &&
              (!dst1 || (uintptr_t(dst1) & 15) == mis);
  uint64_t head = same ? ((16 - mis) & 15) / es : n;
  head = head < n ? head : n;
  uint64_t i = t;
  if (!same) {
    for (; i + (kUnroll - 1) * nt < n; i += kUnroll * nt) {
      S x[kUnroll], y[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        x[u] = a[i + u * nt];
        y[u] = b[i + u * nt];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        S v = one(x[u], y[u]);
        d0[i + u * nt] = v;
        if (d1)
          d1[i + u * nt] = v;
      }
    }
  }
  for (; i < head; i += nt) {
    S v = one(a[i], b[i]);
    d0[i] = v;
    if (d1)
      d1[i] = v;
  }
  if (!same)
    return;
  const uint64_t vecs = (n - head) / per;
  const uint4 *va = reinterpret_cast<const uint4 *>(a + head);
  const uint4 *vb = reinterpret_cast<const uint4 *>(b + head);
  uint4 *vd0 = reinterpret_cast<uint4 *>(d0 + head);
  uint4 *vd1 = d1 ? reinterpret_cast<uint4 *>(d1 + head) : nullptr;
  uint64_t v = t;
  for (; v + (kUnroll - 1) * nt < vecs; v += kUnroll * nt) {
    Vec16<S> x[kUnroll], y[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      x[u].raw = va[v + u * nt];
      y[u].raw = vb[v + u * nt];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (uint64_t e = 0; e < per; ++e)
        x[u].e[e] = one(x[u].e[e], y[u].e[e]);
      vd0[v + u * nt] = x[u].raw;
      if (vd1)
        vd1[v + u * nt] = x[u].raw;
    }
  }
  for (; v < vecs; v += nt) {
    Vec16<S> x, y;
    x.raw = va[v];
    y.raw = vb[v];
#pragma unroll
    for (uint64_t e = 0; e < per; ++e)
      x.e[e] = one(x.e[e], y.e[e]);
    vd0[v] = x.raw;
    if (vd1)
      vd1[v] = x.raw;
  }
  for (uint64_t k = head + vecs * per + t; k < n; k += nt) {
    S r = one(a[k], b[k]);
    d0[k] = r;
    if (d1)
      d1[k] = r;
  }
}

} // namespace coll::kernels

#endif // COLL_KERNELS_LIB_DEVICECOPY_CUH
