//===- copy-stream.cpp - Plain and streaming copies by working set --------===//
//
// Prints the copy rate of the CPU executors' plain copy (moveBytes) and of
// their streaming copy (streamBytes: non-temporal stores) for a buffer
// copied in pieces of 64 KiB, straight and through a 64 KiB slot as a
// message crosses the FIFOs (into the slot plainly, out of it as the
// receiver copies), by the buffer's size and the number of threads
// copying buffers of their own at once (docs/performance.md, "Streaming
// stores").
//
//   coll-copy-stream
//
//===----------------------------------------------------------------------===//

#include "HostKernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr size_t kPiece = 64 << 10;

enum class Way { Plain, Stream, SlotPlain, SlotStream };

/// GB/s of copying \p bytes in pieces (the median of 5 passes over the
/// same buffers, so that what fits the cache stays there).
double rate(size_t bytes, Way way) {
  std::vector<char> from(bytes, 1), to(bytes, 2), slot(kPiece, 3);
  std::vector<double> rates;
  for (int pass = 0; pass < 5; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i + kPiece <= bytes; i += kPiece) {
      const char *s = from.data() + i;
      if (way == Way::SlotPlain || way == Way::SlotStream) {
        coll::detail::moveBytes(slot.data(), s, kPiece);
        s = slot.data();
      }
      if (way == Way::Stream || way == Way::SlotStream)
        coll::detail::streamBytes(to.data() + i, s, kPiece);
      else
        coll::detail::moveBytes(to.data() + i, s, kPiece);
    }
    const double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(double(bytes) / t / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

/// The summed rate of \p threads threads, each copying buffers of its own.
double rateOf(size_t bytes, Way way, unsigned threads) {
  std::vector<double> each(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { each[t] = rate(bytes, way); });
  for (std::thread &t : pool)
    t.join();
  double sum = 0;
  for (double r : each)
    sum += r;
  return sum;
}

} // namespace

int main() {
  std::printf("last-level cache: %llu bytes\n",
              static_cast<unsigned long long>(coll::detail::lastLevelCacheBytes()));
  std::printf("%7s %10s %9s %9s %11s %11s   (GB/s, all threads)\n", "threads", "MiB each", "plain",
              "stream", "slot+plain", "slot+stream");
  for (unsigned threads : {1u, 2u})
    for (size_t mib : {2, 4, 8, 16, 32, 64})
      std::printf("%7u %10zu %9.1f %9.1f %11.1f %11.1f\n", threads, mib,
                  rateOf(mib << 20, Way::Plain, threads), rateOf(mib << 20, Way::Stream, threads),
                  rateOf(mib << 20, Way::SlotPlain, threads),
                  rateOf(mib << 20, Way::SlotStream, threads));
  return 0;
}
