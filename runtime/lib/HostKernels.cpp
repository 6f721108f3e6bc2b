//===- HostKernels.cpp - Element kernels of the CPU executors -------------===//

#include "HostKernels.h"

#include "coll/Runtime/Elementwise.h"
#include "coll/Runtime/Executor.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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

void streamBytes(void *dst, const void *src, size_t n) {
#if defined(__SSE2__)
  // Below a few KiB the fence and the alignment cost more than the cache
  // saves.
  constexpr size_t kStreamMin = 4096;
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  if (n < kStreamMin || (d < s + n && s < d + n))
    return moveBytes(dst, src, n);
  char *to = static_cast<char *>(dst);
  const char *from = static_cast<const char *>(src);
  // Plain stores up to the first 16-byte boundary of dst, then 64 bytes a
  // round (a whole line of write-combining), then the tail.
  const size_t head = (16 - (d & 15)) & 15;
  std::memcpy(to, from, head);
  size_t i = head;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i *>(to + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i *>(to + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i *>(to + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i *>(to + i + 48), e);
  }
  std::memcpy(to + i, from + i, n - i);
  // Non-temporal stores are not ordered with later stores: the flag or
  // counter that publishes this data must not pass them.
  _mm_sfence();
#else
  moveBytes(dst, src, n);
#endif
}

uint64_t lastLevelCacheBytes() {
  // The highest-level cache of CPU 0 that holds data ("Unified" or "Data").
  uint64_t best = 0;
  int bestLevel = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    auto read = [&](const char *name, char *buf, size_t len) {
      std::FILE *f = std::fopen((dir + name).c_str(), "r");
      if (!f)
        return false;
      const bool ok = std::fgets(buf, int(len), f) != nullptr;
      std::fclose(f);
      return ok;
    };
    char level[16], type[32], size[32];
    if (!read("level", level, sizeof level))
      break;
    if (!read("type", type, sizeof type) || !read("size", size, sizeof size) ||
        std::strncmp(type, "Instruction", 11) == 0)
      continue;
    char *end = nullptr;
    const uint64_t value = std::strtoull(size, &end, 10);
    const uint64_t scale = end && (*end == 'K' || *end == 'k')   ? 1024
                           : end && (*end == 'M' || *end == 'm') ? 1024 * 1024
                                                                 : 1;
    const int l = std::atoi(level);
    if (value && l >= bestLevel) {
      bestLevel = l;
      best = value * scale;
    }
  }
  return best;
}

bool streamsStores(uint64_t footprint, uint64_t from) {
  if (from == noStreamingStores)
    return false;
  if (from == 0) {
    static const uint64_t defaultFrom = [] {
      const uint64_t llc = lastLevelCacheBytes();
      return llc ? llc : uint64_t(32) << 20;
    }();
    from = defaultFrom;
  }
  return footprint >= from;
}

} // namespace detail
} // namespace coll
