//===- shm-ceiling.cpp - A hand-written shared-memory allreduce -----------===//
//
// The ceiling for allreduce between processes on one host: N forked ranks
// whose input and output buffers all live in one POSIX shared-memory
// segment, so that every rank reads its peers' inputs directly; nothing is
// copied through an intermediate buffer.
//
//   two-shot (default): rank r reduces its 1/N slice of the vector from all
//     inputs straight into its own output, then copies the other ranks'
//     reduced slices from their outputs; out of place and in place.
//   one-shot: every rank reduces the whole vector from all inputs into its
//     output (more reads, one barrier less); out of place only.
//
// Rank r is pinned to CPU r (mod the CPU count) unless --no-bind.
//
//   shm-ceiling --nranks 2 -b 4K -e 64M -f 4 -n 20 -w 5 -c 1 --csv
//
//===----------------------------------------------------------------------===//

#include "PeerCommon.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace collpeer;

namespace {

constexpr int kMaxRanks = 256;
/// Bytes of each rank's output reduced per pass over the inputs: the block
/// stays in L1 while the peers' inputs stream through it.
constexpr size_t kBlockBytes = 16384;
/// Slice boundaries fall on cache lines (and whole vectors).
constexpr size_t kAlignBytes = 64;

static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "the barrier needs lock-free atomics to work across processes");

/// The control block at the start of the segment. Each counter has its own
/// cache line so that arrivals do not disturb the waiters' polling.
struct Control {
  alignas(64) std::atomic<uint32_t> arrived;
  alignas(64) std::atomic<uint32_t> generation;
  alignas(64) double timeUs[kMaxRanks];
  uint64_t wrong[kMaxRanks];
};

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// A generation barrier for all ranks. Memory ordering: each arrival is an
/// acq_rel RMW on `arrived`, so the last rank to arrive has acquired every
/// rank's writes before the barrier; its release store of the new generation,
/// read with acquire by the waiters, hands all of them on. `arrived` is reset
/// before that store, so no rank can arrive at the next barrier early.
/// Waiters spin briefly, then yield (ranks may outnumber cores).
void barrier(Control &c, int nranks) {
  uint32_t gen = c.generation.load(std::memory_order_acquire);
  if (c.arrived.fetch_add(1, std::memory_order_acq_rel) == static_cast<uint32_t>(nranks - 1)) {
    c.arrived.store(0, std::memory_order_relaxed);
    c.generation.store(gen + 1, std::memory_order_release);
    return;
  }
  for (int spins = 0; c.generation.load(std::memory_order_acquire) == gen;) {
    if (spins < 512) {
      ++spins;
      cpuRelax();
    } else {
      sched_yield();
    }
  }
}

//===----------------------------------------------------------------------===//
// Reduction kernels: plain loops over restrict pointers that the compiler
// vectorises; the operators are inlined functors.
//===----------------------------------------------------------------------===//

template <typename T> struct SumOp {
  T operator()(T a, T b) const { return a + b; }
};
/// Integer sums wrap (the timed iterations of an in-place allreduce grow).
template <> struct SumOp<int32_t> {
  int32_t operator()(int32_t a, int32_t b) const {
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  }
};
template <typename T> struct ProdOp {
  T operator()(T a, T b) const { return a * b; }
};
template <> struct ProdOp<int32_t> {
  int32_t operator()(int32_t a, int32_t b) const {
    return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
  }
};
template <typename T> struct MinOp {
  T operator()(T a, T b) const { return b < a ? b : a; }
};
template <typename T> struct MaxOp {
  T operator()(T a, T b) const { return a < b ? b : a; }
};

template <typename T, typename F>
inline void combine2(T *__restrict d, const T *__restrict a, const T *__restrict b, size_t n, F f) {
  for (size_t i = 0; i < n; ++i)
    d[i] = f(a[i], b[i]);
}

template <typename T, typename F>
inline void accumulate(T *__restrict d, const T *__restrict a, size_t n, F f) {
  for (size_t i = 0; i < n; ++i)
    d[i] = f(d[i], a[i]);
}

/// dst[i] = op over k of srcs[k][i], for i < n. When dst is srcs[self]
/// (in place), its own input is already there and only the peers' are
/// folded in, so no loop ever reads and writes through aliasing pointers.
template <typename T, typename F>
void reduceRange(T *dst, T *const *srcs, int nranks, int self, size_t n, F f) {
  constexpr size_t block = kBlockBytes / sizeof(T);
  for (size_t b = 0; b < n; b += block) {
    size_t len = std::min(block, n - b);
    T *d = dst + b;
    int k = 0;
    if (self < 0) {
      if (nranks == 1) {
        std::memcpy(d, srcs[0] + b, len * sizeof(T));
        continue;
      }
      combine2(d, srcs[0] + b, srcs[1] + b, len, f);
      k = 2;
    }
    for (; k < nranks; ++k)
      if (k != self)
        accumulate(d, srcs[k] + b, len, f);
  }
}

//===----------------------------------------------------------------------===//
// The segment
//===----------------------------------------------------------------------===//

/// Control block, then an input and an output buffer per rank.
struct Segment {
  char *base = nullptr;
  size_t bytes = 0;
  size_t bufferBytes = 0;
  int nranks = 0;

  Control &control() const { return *reinterpret_cast<Control *>(base); }
  static size_t controlBytes() { return (sizeof(Control) + 4095) / 4096 * 4096; }
  char *input(int rank) const {
    return base + controlBytes() + static_cast<size_t>(rank) * 2 * bufferBytes;
  }
  char *output(int rank) const { return input(rank) + bufferBytes; }
};

/// Creates, sizes and maps the segment, and unlinks its name at once (the
/// forked ranks inherit the mapping), so nothing is left behind in /dev/shm.
std::string createSegment(int nranks, uint64_t maxBytes, Segment &seg) {
  seg.nranks = nranks;
  seg.bufferBytes = (maxBytes + 4095) / 4096 * 4096 + 4096;
  seg.bytes = Segment::controlBytes() + static_cast<size_t>(nranks) * 2 * seg.bufferBytes;
  std::string name = "/coll-shm-ceiling-" + std::to_string(getpid());
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0)
    return "shm_open " + name + ": " + std::strerror(errno);
  shm_unlink(name.c_str());
  auto fail = [&](const char *what, int err) {
    close(fd);
    return std::string(what) + " (" + std::to_string(seg.bytes) + " bytes): " + std::strerror(err);
  };
  if (ftruncate(fd, static_cast<off_t>(seg.bytes)) != 0)
    return fail("ftruncate", errno);
  // Reserve the pages now: a short /dev/shm is an error here, not SIGBUS later.
  int rc = posix_fallocate(fd, 0, static_cast<off_t>(seg.bytes));
  if (rc != 0)
    return fail("posix_fallocate (is /dev/shm large enough?)", rc);
  void *p = mmap(nullptr, seg.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return fail("mmap", errno);
  close(fd);
  seg.base = static_cast<char *>(p);
  new (&seg.control()) Control();
  seg.control().arrived.store(0);
  seg.control().generation.store(0);
  return "";
}

//===----------------------------------------------------------------------===//
// One rank
//===----------------------------------------------------------------------===//

/// Runs every size and placement on rank \p rank; rank 0 prints.
template <typename T, typename F>
int rankMain(const Options &opts, const Segment &seg, int rank, F f) {
  int n = seg.nranks;
  Control &control = seg.control();
  bool oneShot = opts.algorithm == "one-shot";
  std::string algorithm = oneShot ? "shm-ceiling-one-shot" : "shm-ceiling";
  Reporter reporter(opts, n);
  if (rank == 0)
    reporter.begin(CollKind::AllReduce, algorithm);

  for (uint64_t b : sizeList(opts)) {
    SizeInfo size = sizeFor(CollKind::AllReduce, b, opts.dtype, n);
    if (size.count == 0)
      continue;
    size_t count = size.count;
    // Slice r of the vector, on cache-line boundaries.
    size_t align = kAlignBytes / sizeof(T);
    size_t per = (count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
    per = (per + align - 1) / align * align;
    auto sliceBegin = [&](int r) { return std::min(count, static_cast<size_t>(r) * per); };
    auto sliceEnd = [&](int r) { return std::min(count, static_cast<size_t>(r + 1) * per); };

    std::vector<Measurement> results;
    for (PlacementKind p : {PlacementKind::OutOfPlace, PlacementKind::InPlace}) {
      if (oneShot && p == PlacementKind::InPlace)
        continue;
      bool inPlace = p == PlacementKind::InPlace;
      T *ins[kMaxRanks];
      T *outs[kMaxRanks];
      for (int r = 0; r < n; ++r) {
        ins[r] = reinterpret_cast<T *>(seg.input(r));
        outs[r] = inPlace ? ins[r] : reinterpret_cast<T *>(seg.output(r));
      }
      T *in = ins[rank];
      T *out = outs[rank];

      auto allreduce = [&]() {
        // Every rank's input is ready (and the previous call's readers are
        // done with our buffers) once all have arrived.
        barrier(control, n);
        if (oneShot) {
          reduceRange(out, ins, n, -1, count, f);
          barrier(control, n);
          return;
        }
        // Reduce-scatter: our slice of every input, into our output.
        T *slices[kMaxRanks];
        size_t begin = sliceBegin(rank);
        for (int r = 0; r < n; ++r)
          slices[r] = ins[r] + begin;
        reduceRange(out + begin, slices, n, inPlace ? rank : -1, sliceEnd(rank) - begin, f);
        barrier(control, n);
        // Allgather: the peers' reduced slices, each read once, starting
        // with the next rank so that the ranks spread their reads.
        for (int i = 1; i < n; ++i) {
          int r = (rank + i) % n;
          size_t rb = sliceBegin(r);
          if (sliceEnd(r) > rb)
            std::memcpy(out + rb, outs[r] + rb, (sliceEnd(r) - rb) * sizeof(T));
        }
        // Nobody returns while a peer may still read its slice.
        barrier(control, n);
      };

      fillInput(opts, CollKind::AllReduce, size, rank, n, in);
      for (int i = 0; i < opts.warmup; ++i)
        allreduce();
      barrier(control, n);
      double start = nowSeconds();
      for (int i = 0; i < opts.iters; ++i)
        allreduce();
      control.timeUs[rank] = (nowSeconds() - start) / opts.iters * 1e6;

      control.wrong[rank] = 0;
      if (opts.check) {
        fillInput(opts, CollKind::AllReduce, size, rank, n, in);
        if (!inPlace)
          poison(opts.dtype, out, count);
        allreduce();
        control.wrong[rank] = countWrong(opts, CollKind::AllReduce, size, rank, n, out);
      }
      barrier(control, n);
      Measurement m{p, 0, 0};
      for (int r = 0; r < n; ++r) {
        m.timeUs = std::max(m.timeUs, control.timeUs[r]);
        m.wrong += control.wrong[r];
      }
      results.push_back(m);
      // Rank 0 has read the slots before anyone writes them again.
      barrier(control, n);
    }
    if (rank == 0)
      reporter.size(CollKind::AllReduce, algorithm, size, results);
  }
  uint64_t wrong = rank == 0 ? reporter.end() : 0;
  return wrong == 0 ? 0 : 1;
}

template <typename T> int dispatchOp(const Options &opts, const Segment &seg, int rank) {
  switch (opts.op) {
  case OpKind::Sum:
    return rankMain<T>(opts, seg, rank, SumOp<T>());
  case OpKind::Prod:
    return rankMain<T>(opts, seg, rank, ProdOp<T>());
  case OpKind::Min:
    return rankMain<T>(opts, seg, rank, MinOp<T>());
  case OpKind::Max:
    return rankMain<T>(opts, seg, rank, MaxOp<T>());
  }
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  PeerSpec spec;
  spec.program = "shm-ceiling";
  spec.colls = {CollKind::AllReduce};
  spec.algorithms = {"two-shot", "one-shot"};
  spec.forksRanks = true;
  // Spinning ranks that the scheduler first puts on one core wait for each
  // other's time slices; pinned, each spins on its own (as mpirun binds).
  spec.bindByDefault = true;
  spec.notes = "Ranks are pinned to cores by default (--no-bind to let them float).";
  Options opts;
  bool help = false;
  std::string err = parseOptions(argc, argv, spec, opts, help);
  if (help)
    return 0;
  if (err.empty() && opts.nranks > kMaxRanks)
    err = "at most " + std::to_string(kMaxRanks) + " ranks";
  if (!err.empty()) {
    std::fprintf(stderr, "shm-ceiling: %s\n", err.c_str());
    return 2;
  }
  Segment seg;
  err = createSegment(opts.nranks, maxBufferBytes(opts, opts.nranks), seg);
  if (!err.empty()) {
    std::fprintf(stderr, "shm-ceiling: %s\n", err.c_str());
    return 2;
  }
  int rc = runForked("shm-ceiling", opts.nranks, opts.bind, opts.timeoutSeconds, [&](int rank) {
    switch (opts.dtype) {
    case DTypeKind::F32:
      return dispatchOp<float>(opts, seg, rank);
    case DTypeKind::F64:
      return dispatchOp<double>(opts, seg, rank);
    case DTypeKind::I32:
      return dispatchOp<int32_t>(opts, seg, rank);
    }
    return 2;
  });
  munmap(seg.base, seg.bytes);
  return rc;
}
