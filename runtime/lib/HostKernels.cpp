//===- HostKernels.cpp - Element kernels of the CPU executors -------------===//

#include "HostKernels.h"

#include "coll/Runtime/Elementwise.h"

#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace coll {
namespace detail {

namespace {
// Contiguous loops with the element count as their only bound, which the
// compiler vectorises (this file is built with -O3; docs/performance.md has
// the measurement). Each element is computed exactly as Elementwise.h's
// ranges do, so results are bit-identical to the reference's.
template <DataType D, RedOp Op>
void reduceKernel(void *dst, const void *in, const void *local, uint64_t n) {
  using S = typename DataTypeTraits<D>::Storage;
  S *d = static_cast<S *>(dst);
  const S *a = static_cast<const S *>(in);
  const S *b = static_cast<const S *>(local);
  for (uint64_t i = 0; i < n; ++i)
    d[i] = storeElement<D>(combine<Op>(loadElement<D>(a[i]), loadElement<D>(b[i])));
}
template <DataType D, RedOp Op>
void reduce2Kernel(void *dst0, void *dst1, const void *in, const void *local, uint64_t n) {
  using S = typename DataTypeTraits<D>::Storage;
  S *d0 = static_cast<S *>(dst0);
  S *d1 = static_cast<S *>(dst1);
  const S *a = static_cast<const S *>(in);
  const S *b = static_cast<const S *>(local);
  for (uint64_t i = 0; i < n; ++i) {
    S v = storeElement<D>(combine<Op>(loadElement<D>(a[i]), loadElement<D>(b[i])));
    d0[i] = v;
    d1[i] = v;
  }
}
template <DataType D> void divideKernel(void *p, uint64_t n, uint32_t nranks) {
  divideRange<D>(p, n, nranks);
}
} // namespace

bool selectHostKernels(DataType type, RedOp op, HostKernels &out) {
  return visitDataType(type,
                       [&](auto traits) {
                         constexpr DataType D = decltype(traits)::type;
                         out.elementSize = dataTypeSize(D);
                         out.divide = &divideKernel<D>;
                         visitRedOp(op, [&](auto tag) {
                           constexpr RedOp Op = decltype(tag)::op;
                           out.reduce = &reduceKernel<D, Op>;
                           out.reduce2 = &reduce2Kernel<D, Op>;
                         });
                       }) &&
         out.reduce != nullptr;
}

void moveBytes(void *dst, const void *src, size_t n) {
#if defined(__SSE2__)
  // Below 2 KiB the library's copy is a short vector loop, which pays
  // little for the aliasing.
  constexpr size_t kBackwardMin = 2048;
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  const uintptr_t apart = (d - s) & 4095;
  // Backwards is right for any dst past src, and for disjoint ranges.
  if (n >= kBackwardMin && apart >= 1 && apart <= 63 && (d > s || d + n <= s)) {
    char *to = static_cast<char *>(dst);
    const char *from = static_cast<const char *>(src);
    size_t i = n - n % 64;
    std::memmove(to + i, from + i, n - i); // The tail first: it lies highest.
    while (i >= 64) {
      i -= 64;
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + i + 48));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + i + 32));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + i + 16));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + i));
      _mm_storeu_si128(reinterpret_cast<__m128i *>(to + i + 48), a);
      _mm_storeu_si128(reinterpret_cast<__m128i *>(to + i + 32), b);
      _mm_storeu_si128(reinterpret_cast<__m128i *>(to + i + 16), c);
      _mm_storeu_si128(reinterpret_cast<__m128i *>(to + i), e);
    }
    return;
  }
#endif
  std::memmove(dst, src, n);
}

} // namespace detail
} // namespace coll
