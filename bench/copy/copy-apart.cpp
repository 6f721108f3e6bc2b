//===- copy-apart.cpp - Copies by the distance between their ends ---------===//
//
// Prints the copy rate of memcpy and of the CPU executors' moveBytes for
// 64 KiB and 1 MiB copies (pieces of a 64 MiB stream) whose destination
// lies a given number of bytes past its source modulo a page: the case
// where a forward string copy stalls on false dependencies between its
// loads and its stores (docs/performance.md, "Copies a few bytes apart").
//
//   coll-copy-apart
//
//===----------------------------------------------------------------------===//

#include "HostKernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr size_t kStream = 64 << 20;

/// GB/s of copying the stream in pieces of \p n bytes, each to \p apart
/// bytes past its source modulo a page (the median of 5 passes).
double rate(char *from, char *to, size_t n, long apart, bool ours) {
  std::vector<double> rates;
  for (int pass = 0; pass < 5; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i + n <= kStream; i += n) {
      char *d = to + 4096 + i + apart;
      const char *s = from + 4096 + i;
      if (ours)
        coll::detail::moveBytes(d, s, n);
      else
        std::memcpy(d, s, n);
    }
    const double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(double(kStream) / t / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

} // namespace

int main() {
  std::vector<char> a(kStream + 3 * 4096, 1), b(kStream + 3 * 4096, 2);
  // Page-aligned starts, so that `apart` is the distance modulo a page.
  auto aligned = [](std::vector<char> &v) {
    return v.data() + (4096 - reinterpret_cast<uintptr_t>(v.data()) % 4096) % 4096;
  };
  char *from = aligned(a), *to = aligned(b);
  std::printf("%8s %6s %10s %10s   (GB/s)\n", "bytes", "apart", "memcpy", "moveBytes");
  for (size_t n : {size_t(64) << 10, size_t(1) << 20})
    for (long apart : {0L, 4L, 8L, 16L, 31L, 32L, 64L, 4080L})
      std::printf("%8zu %6ld %10.1f %10.1f\n", n, apart, rate(from, to, n, apart, false),
                  rate(from, to, n, apart, true));
  return 0;
}
