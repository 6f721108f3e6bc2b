//===- coll_gpu_bench.cu - The interpreter kernel beside plain kernels ----===//
//
// Prints, side by side:
//  1. copy throughput of a plain vectorised copy kernel, cudaMemcpy, and the
//     interpreter running one `cpy` step per CTA, at 1, 4, 16, 32 and 132
//     CTAs (256 MiB, 512 threads, 16-byte accesses);
//  2. the same for a reduction of two inputs (plain: c = a + b; the
//     interpreter: one `re` step per CTA, dst = src + dst);
//  3. the latency of an empty kernel launch, and of 4 KiB allreduces of 8
//     ranks on this one GPU (all-pairs, one-shot, ring), launch included,
//     then where the time goes: the device's step trace of the same runs
//     (span, start spread, step and wait; with COLL_GPU_TRACE_DIR set, each
//     plan's traced launch of the median span as Chrome trace JSON there);
//  4. the latency of allreduces from 256 B to 1 MiB per rank in each
//     protocol (Simple, LL, LL128), for choosing the thresholds, and in
//     Simple, synchronised and back to back, with the time launch() takes
//     on the host;
//  5. the algorithm bandwidth of 8-rank allreduces of 256 MiB per rank;
//  6. the same with every message through the slots and with direct reads
//     (DeviceOptions::directReads), side by side.
// Throughput is bytes of the result per second (a copy of B bytes reads and
// writes B each).
//
//   coll-gpu-bench [PLAN_DIR]    (the plans of tests/gpu/make-plans.sh)
//
//===----------------------------------------------------------------------===//

#include "coll/Kernels/DeviceWorld.h"
#include "coll/Runtime/PlanIO.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace coll;

namespace {

void check(cudaError_t err, const char *what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "coll-gpu-bench: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

void check(const Status &s, const char *what) {
  if (!s) {
    std::fprintf(stderr, "coll-gpu-bench: %s: %s\n", what, s.message().c_str());
    std::exit(1);
  }
}

constexpr int kThreads = 512, kUnroll = 4;

/// Each CTA copies its contiguous share with 16-byte accesses, kUnroll in
/// flight per thread: what a hand-written copy kernel does.
__global__ void __launch_bounds__(kThreads) plainCopy(uint4 *dst, const uint4 *src, uint64_t n) {
  uint64_t per = (n + gridDim.x - 1) / gridDim.x;
  uint64_t begin = blockIdx.x * per, end = begin + per < n ? begin + per : n;
  uint64_t i = begin + threadIdx.x;
  for (; i + (kUnroll - 1) * kThreads < end; i += kUnroll * kThreads) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      v[u] = src[i + u * kThreads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      dst[i + u * kThreads] = v[u];
  }
  for (; i < end; i += kThreads)
    dst[i] = src[i];
}

__device__ __forceinline__ uint4 add4(uint4 a, uint4 b) {
  uint4 r;
  r.x = __float_as_uint(__uint_as_float(a.x) + __uint_as_float(b.x));
  r.y = __float_as_uint(__uint_as_float(a.y) + __uint_as_float(b.y));
  r.z = __float_as_uint(__uint_as_float(a.z) + __uint_as_float(b.z));
  r.w = __float_as_uint(__uint_as_float(a.w) + __uint_as_float(b.w));
  return r;
}

/// c = a + b over floats, 16-byte accesses.
__global__ void __launch_bounds__(kThreads)
    plainReduce(uint4 *c, const uint4 *a, const uint4 *b, uint64_t n) {
  uint64_t per = (n + gridDim.x - 1) / gridDim.x;
  uint64_t begin = blockIdx.x * per, end = begin + per < n ? begin + per : n;
  uint64_t i = begin + threadIdx.x;
  for (; i + (kUnroll - 1) * kThreads < end; i += kUnroll * kThreads) {
    uint4 x[kUnroll], y[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      x[u] = a[i + u * kThreads];
      y[u] = b[i + u * kThreads];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      c[i + u * kThreads] = add4(x[u], y[u]);
  }
  for (; i < end; i += kThreads)
    c[i] = add4(a[i], b[i]);
}

/// How one side of a flag ping-pong publishes and waits.
enum class FlagMode { ReleaseAcquire, FencedRelaxed, FencedRelaxedBarrier, FencedRelaxedTimer };

/// CTA 0 and CTA 1 pass a counter back and forth \p rounds times; thread 0
/// of each polls and publishes the way the interpreter does (FencedRelaxed:
/// fence.acq_rel + st.relaxed / ld.relaxed + fence.acq_rel; with Barrier:
/// plus block-wide barriers on each side; with Timer: plus a read of the
/// global timer before each poll loop, as the timeout needs).
__global__ void pingPong(uint64_t *flags, uint32_t rounds, FlagMode mode) {
  uint64_t *mine = flags + 16 * blockIdx.x, *theirs = flags + 16 * (1 - blockIdx.x);
  for (uint32_t i = 0; i < rounds; ++i) {
    uint64_t want = 2 * i + 1 + blockIdx.x; // CTA 0 publishes odd, CTA 1 even values.
    if (threadIdx.x == 0 && (blockIdx.x == 1 || i > 0)) {
      uint64_t expect = want - 1, v;
      if (mode == FlagMode::FencedRelaxedTimer) {
        uint64_t t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t == 0)
          flags[40] = t;
      }
      if (mode == FlagMode::ReleaseAcquire) {
        do
          asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(theirs) : "memory");
        while (v < expect);
      } else {
        do
          asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(theirs) : "memory");
        while (v < expect);
        asm volatile("fence.acq_rel.gpu;" ::: "memory");
      }
    }
    if (mode == FlagMode::FencedRelaxedBarrier)
      __syncthreads_or(0);
    if (threadIdx.x == 0) {
      if (mode == FlagMode::ReleaseAcquire) {
        asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(mine), "l"(want) : "memory");
      } else {
        asm volatile("fence.acq_rel.gpu;" ::: "memory");
        asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(mine), "l"(want) : "memory");
      }
    }
    if (mode == FlagMode::FencedRelaxedBarrier)
      __syncthreads();
  }
}

__global__ void emptyKernel() {}

/// Milliseconds per call of \p f, over \p iters calls after a warm-up.
template <class F> double timeMs(int iters, F f) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  f();
  check(cudaDeviceSynchronize(), "warm-up");
  check(cudaEventRecord(a), "event");
  for (int i = 0; i < iters; ++i)
    f();
  check(cudaEventRecord(b), "event");
  check(cudaEventSynchronize(b), "event");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "event");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / iters;
}

/// One rank, \p ctas threadblocks; threadblock b runs one step on chunk b.
Plan oneStepPlan(uint32_t ctas, Opcode op) {
  Plan p;
  p.info.name = op == Opcode::Copy ? "one_copy" : "one_reduce";
  p.info.collective = CollectiveKind::AllReduce;
  p.info.nranks = 1;
  p.info.inputChunks = p.info.outputChunks = ctas;
  p.info.connectionDepth = 1;
  p.ranks.resize(1);
  for (uint32_t b = 0; b < ctas; ++b) {
    Threadblock tb;
    Instruction in;
    in.op = op;
    in.srcBuf = BufferKind::Input;
    in.srcOff = b;
    in.dstBuf = BufferKind::Output;
    in.dstOff = b;
    in.count = 1;
    tb.steps.push_back(in);
    p.ranks[0].threadblocks.push_back(tb);
  }
  return p;
}

double gbps(uint64_t bytes, double ms) {
  return double(bytes) / (ms * 1e-3) / 1e9;
}

} // namespace

int main(int argc, char **argv) {
  std::string planDir = argc > 1 ? argv[1] : "";
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "device");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::printf("device: %s, %d SMs, CUDA driver %d, runtime %d\n\n", prop.name,
              prop.multiProcessorCount, driver, runtime);

  const uint64_t bytes = 256ull << 20, vecs = bytes / 16, floats = bytes / 4;
  char *a, *b, *c;
  check(cudaMalloc(&a, bytes), "cudaMalloc");
  check(cudaMalloc(&b, bytes), "cudaMalloc");
  check(cudaMalloc(&c, bytes), "cudaMalloc");
  check(cudaMemset(a, 0, bytes), "memset");
  check(cudaMemset(b, 0, bytes), "memset");
  check(cudaMemset(c, 0, bytes), "memset");
  const int iters = 10;

  double memcpyMs = timeMs(iters, [&] { cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice); });
  std::printf("copy of 256 MiB, GB/s (cudaMemcpy: %.0f)\n", gbps(bytes, memcpyMs));
  std::printf("%6s %10s %12s %8s\n", "CTAs", "plain", "interpreter", "ratio");
  for (uint32_t ctas : {1u, 4u, 16u, 32u, 132u}) {
    double plain = timeMs(iters, [&] {
      plainCopy<<<ctas, kThreads>>>(reinterpret_cast<uint4 *>(c),
                                    reinterpret_cast<const uint4 *>(a), vecs);
    });
    DeviceOptions o;
    o.sliceBytes = bytes; // One slice: the step runs once.
    auto world = DeviceWorld::create(oneStepPlan(ctas, Opcode::Copy), o);
    check(world.getStatus(), "copy plan");
    double interp = timeMs(iters, [&] {
      check((*world)->launch({a}, {c}, floats, DataType::Float32, RedOp::Sum), "launch");
    });
    check((*world)->wait(), "copy run");
    std::printf("%6u %10.0f %12.0f %7.0f%%\n", ctas, gbps(bytes, plain), gbps(bytes, interp),
                100 * plain / interp);
  }

  std::printf("\nreduction of two inputs of 256 MiB (fp32 sum), GB/s of result\n");
  std::printf("%6s %10s %12s %8s\n", "CTAs", "plain", "interpreter", "ratio");
  for (uint32_t ctas : {1u, 4u, 16u, 32u, 132u}) {
    double plain = timeMs(iters, [&] {
      plainReduce<<<ctas, kThreads>>>(reinterpret_cast<uint4 *>(c),
                                      reinterpret_cast<const uint4 *>(a),
                                      reinterpret_cast<const uint4 *>(b), vecs);
    });
    DeviceOptions o;
    o.sliceBytes = bytes;
    auto world = DeviceWorld::create(oneStepPlan(ctas, Opcode::Reduce), o);
    check(world.getStatus(), "reduce plan");
    double interp = timeMs(iters, [&] {
      check((*world)->launch({a}, {c}, floats, DataType::Float32, RedOp::Sum), "launch");
    });
    check((*world)->wait(), "reduce run");
    std::printf("%6u %10.0f %12.0f %7.0f%%\n", ctas, gbps(bytes, plain), gbps(bytes, interp),
                100 * plain / interp);
  }

  // Latency: wall time of launch + synchronize, the median of many.
  auto medianUs = [](int iters, auto f) {
    std::vector<double> t;
    for (int i = 0; i < iters; ++i) {
      auto s = std::chrono::steady_clock::now();
      f();
      t.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  // An fp32 sum allreduce of n elements per rank: the median of
  // `iters` launches each followed by a synchronisation, and the time per
  // launch of `iters` back to back, in microseconds.
  // Also the median time launch() takes on the host in the synchronised
  // calls (its preparation of every rank's call and the launches' API
  // calls), the third of the tuple.
  auto latencyUs = [&](DeviceWorld &world, const std::vector<const void *> &in,
                       const std::vector<void *> &out, uint64_t n, int iters, const char *what) {
    std::vector<double> host;
    const double sync = medianUs(iters, [&] {
      auto s = std::chrono::steady_clock::now();
      check(world.launch(in, out, n, DataType::Float32, RedOp::Sum), "launch");
      host.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count());
      cudaStreamSynchronize(nullptr);
    });
    check(world.wait(), what);
    const double b2b =
        timeMs(iters,
               [&] { check(world.launch(in, out, n, DataType::Float32, RedOp::Sum), "launch"); }) *
        1e3;
    check(world.wait(), what);
    std::sort(host.begin(), host.end());
    return std::make_tuple(sync, b2b, host[host.size() / 2]);
  };
  std::printf("\nlatency, microseconds (median of 2000; launch + stream synchronize on the "
              "host, and per launch back to back)\n");
  double empty = medianUs(2000, [] {
    emptyKernel<<<1, 32>>>();
    cudaStreamSynchronize(nullptr);
  });
  std::printf("%-48s %8.1f\n", "empty kernel", empty);
  {
    void *noArgs[] = {nullptr};
    double coop = medianUs(2000, [&] {
      check(cudaLaunchCooperativeKernel(reinterpret_cast<const void *>(emptyKernel), dim3(56),
                                        dim3(512), noArgs, 0, nullptr),
            "cooperative launch");
      cudaStreamSynchronize(nullptr);
    });
    std::printf("%-48s %8.1f\n", "empty kernel, cooperative, 56 CTAs", coop);
  }
  {
    uint64_t *flags;
    check(cudaMalloc(&flags, 4096), "cudaMalloc");
    const uint32_t rounds = 10000;
    struct M {
      FlagMode mode;
      uint32_t threads;
      const char *name;
    };
    for (M m : {M{FlagMode::ReleaseAcquire, 32, "flag hop: st.release / ld.acquire"},
                M{FlagMode::FencedRelaxed, 32, "flag hop: fence + relaxed (the kernel's)"},
                M{FlagMode::FencedRelaxedBarrier, 512, "flag hop: fenced + 512-thread barriers"},
                M{FlagMode::FencedRelaxedBarrier, 64, "flag hop: fenced + 64-thread barriers"},
                M{FlagMode::FencedRelaxedTimer, 32, "flag hop: fenced + global timer read"}}) {
      double ms = timeMs(3, [&] {
        cudaMemsetAsync(flags, 0, 4096);
        pingPong<<<2, m.threads>>>(flags, rounds, m.mode);
      });
      std::printf("%-48s %8.2f\n", m.name, ms * 1e3 / (2.0 * rounds));
    }
    cudaFree(flags);
  }
  if (!planDir.empty()) {
    for (uint32_t threads : {64u, 128u, 256u}) {
      for (const char *name :
           {"ring_allreduce_n8", "allpairs_allreduce_n8", "oneshot_allreduce_n8"}) {
        Result<Plan> plan = loadPlanFile(planDir + "/" + name + ".bin");
        if (!plan)
          continue;
        DeviceOptions lo;
        lo.threadsPerBlock = threads;
        auto world = DeviceWorld::create(*plan, lo);
        check(world.getStatus(), name);
        std::vector<const void *> in(8);
        std::vector<void *> out(8);
        for (uint32_t r = 0; r < 8; ++r) {
          in[r] = a + r * 8192;
          out[r] = c + r * 8192;
        }
        double pipelined =
            timeMs(2000,
                   [&] {
                     check((*world)->launch(in, out, 1024, DataType::Float32, RedOp::Sum),
                           "launch");
                   }) *
            1e3;
        check((*world)->wait(), name);
        std::printf(
            "%-48s %8s %8.1f\n",
            (std::string(name) + ", 4 KiB, " + std::to_string(threads) + " threads").c_str(), "",
            pipelined);
      }
    }
    struct LatencyCase {
      const char *plan;
      bool plain;   ///< A plain launch instead of a cooperative one.
      bool inPlace; ///< No staging copies: the in-place plans run in the user's buffer.
    };
    // The out-of-place plans (all-pairs, one-shot) run out of place, the
    // in-place ring both ways: out of place it first copies each input.
    const LatencyCase latencyCases[] = {
        {"allpairs_allreduce_n8", false, false}, {"oneshot_allreduce_n8", false, false},
        {"ring_allreduce_n8", false, false},     {"ring_allreduce_n8", false, true},
        {"allpairs_allreduce_n8", true, false},  {"oneshot_allreduce_n8", true, false},
        {"ring_allreduce_n8", true, false},      {"allpairs_allreduce_n2", true, false},
        {"allpairs_allreduce_n2", false, false}, {"oneshot_allreduce_n2", false, false}};
    auto caseName = [](const LatencyCase &lc) {
      return std::string(lc.plan) + (lc.plain ? " plain" : "") + (lc.inPlace ? " in place" : "");
    };
    // 4 KiB of fp32 per rank, ranks 8 KiB apart.
    const uint64_t count = 1024;
    auto bindLatency = [&](const LatencyCase &lc, uint32_t nr, std::vector<const void *> &in,
                           std::vector<void *> &out) {
      in.resize(nr);
      out.resize(nr);
      for (uint32_t r = 0; r < nr; ++r) {
        out[r] = c + r * 8192;
        in[r] = lc.inPlace ? out[r] : a + r * 8192;
      }
    };
    for (const LatencyCase &lc : latencyCases) {
      const std::string name = caseName(lc);
      Result<Plan> plan = loadPlanFile(planDir + "/" + lc.plan + ".bin");
      if (!plan) {
        std::printf("%-48s (%s)\n", name.c_str(), plan.message().c_str());
        continue;
      }
      DeviceOptions lo;
      lo.cooperative = !lc.plain;
      auto world = DeviceWorld::create(*plan, lo);
      check(world.getStatus(), name.c_str());
      std::vector<const void *> in;
      std::vector<void *> out;
      bindLatency(lc, plan->info.nranks, in, out);
      const auto [sync, pipelined, host] = latencyUs(**world, in, out, count, 2000, name.c_str());
      (void)host;
      std::printf("%-48s %8.1f %8.1f\n", (name + ", 4 KiB fp32 sum").c_str(), sync, pipelined);
    }

    // Latency by size and protocol: the table the LL and LL128 thresholds
    // are chosen from (DeviceOptions::protocol).
    std::printf("\nlatency by size and protocol, microseconds per launch back to back (and "
                "launch + synchronize), fp32 sum, out of place\n");
    std::printf("%-24s %9s %17s %17s %17s\n", "plan", "bytes", "Simple", "LL", "LL128");
    for (const char *name : {"oneshot_allreduce_n8", "allpairs_allreduce_n8", "ring_allreduce_n8",
                             "allpairs_allreduce_n2", "oneshot_allreduce_n2"}) {
      Result<Plan> plan = loadPlanFile(planDir + "/" + name + ".bin");
      if (!plan)
        continue;
      const uint32_t nr = plan->info.nranks;
      std::vector<std::unique_ptr<DeviceWorld>> worlds;
      for (ProtocolKind p : {ProtocolKind::Simple, ProtocolKind::LL, ProtocolKind::LL128}) {
        DeviceOptions po;
        po.protocol.force = true;
        po.protocol.forced = p;
        auto world = DeviceWorld::create(*plan, po);
        check(world.getStatus(), name);
        worlds.push_back(std::move(*world));
      }
      for (uint64_t size = 256; size <= (1u << 20); size *= 4) {
        std::vector<const void *> in(nr);
        std::vector<void *> out(nr);
        for (uint32_t r = 0; r < nr; ++r) {
          in[r] = a + r * (2u << 20);
          out[r] = c + r * (2u << 20);
        }
        std::printf("%-24s %9llu", name, static_cast<unsigned long long>(size));
        for (auto &w : worlds) {
          const auto [sync, pipelined, host] = latencyUs(*w, in, out, size / 4, 500, name);
          (void)host;
          std::printf("   %6.1f (%6.1f)", pipelined, sync);
        }
        std::printf("\n");
      }
    }

    // Where a launch's time goes: the device's step trace of the same runs.
    std::printf("\nstep trace of the 4 KiB allreduces (median of 50 traced launches, "
                "microseconds): span = first CTA start to last CTA end; spread = first to last "
                "CTA start; step = a step's data movement and publication; wait = before a step "
                "(from the CTA's start or its previous step's end); end = last step to CTA end\n");
    std::printf("%-36s %7s %7s %6s %6s %6s %6s  %s\n", "plan", "span", "spread", "steps", "step",
                "wait", "end", "mean step by opcode");
    // COLL_GPU_TRACE_DIR: each plan's traced launch of the median span
    // there as Chrome trace JSON (<plan>.json, coll-run --trace's format),
    // to set against collc --emit=predict-trace (bench/compare-trace.py).
    const char *traceDir = std::getenv("COLL_GPU_TRACE_DIR");
    std::vector<LatencyCase> traceCases(std::begin(latencyCases), std::end(latencyCases));
    traceCases.push_back({"twoshot_allreduce_n8", false, false});
    traceCases.push_back({"recursive_doubling_allreduce_n8", false, false});
    for (const LatencyCase &lc : traceCases) {
      if (lc.plain)
        continue;
      const std::string name = caseName(lc);
      Result<Plan> plan = loadPlanFile(planDir + "/" + lc.plan + ".bin");
      if (!plan)
        continue;
      DeviceOptions to;
      to.traceSteps = 1024;
      auto world = DeviceWorld::create(*plan, to);
      check(world.getStatus(), name.c_str());
      std::vector<const void *> in;
      std::vector<void *> out;
      bindLatency(lc, plan->info.nranks, in, out);
      std::vector<size_t> rankFirst;
      for (size_t r = 0, first = 0; r < plan->ranks.size(); ++r) {
        rankFirst.push_back(first);
        first += plan->ranks[r].threadblocks.size();
      }
      std::vector<double> span, spread, step, wait, end;
      std::vector<std::pair<double, Timeline>> kept; // With COLL_GPU_TRACE_DIR.
      std::map<std::string, std::pair<double, uint64_t>> byOp;
      double granularity = 1e30;
      size_t steps = 0;
      for (int i = 0; i < 60; ++i) {
        check((*world)->run(in, out, count, DataType::Float32, RedOp::Sum), name.c_str());
        if (i < 10)
          continue; // Warm-up.
        DeviceTrace t;
        check((*world)->trace(t), "trace");
        const size_t ctas = t.ctaBeginUs.size();
        double first = 1e30, lastBegin = 0, lastEnd = 0, stepSum = 0, waitSum = 0, endSum = 0;
        for (size_t b = 0; b < ctas; ++b) {
          first = std::min(first, t.ctaBeginUs[b]);
          lastBegin = std::max(lastBegin, t.ctaBeginUs[b]);
          lastEnd = std::max(lastEnd, t.ctaEndUs[b]);
        }
        // Events come by rank and threadblock, each CTA's in the order they
        // ran, so a CTA's steps are consecutive. CTAs are numbered rank by
        // rank.
        auto ctaOf = [&](const TraceEvent &e) { return rankFirst[e.rank] + e.tb; };
        const TraceEvent *prev = nullptr;
        for (const TraceEvent &e : t.timeline.events) {
          if (prev && ctaOf(*prev) != ctaOf(e)) {
            endSum += t.ctaEndUs[ctaOf(*prev)] - prev->endUs;
            prev = nullptr;
          }
          stepSum += e.endUs - e.beginUs;
          waitSum += e.beginUs - (prev ? prev->endUs : t.ctaBeginUs[ctaOf(e)]);
          auto &op = byOp[opcodeInfo(e.op).mnemonic];
          op.first += e.endUs - e.beginUs;
          ++op.second;
          if (e.endUs > e.beginUs)
            granularity = std::min(granularity, e.endUs - e.beginUs);
          prev = &e;
        }
        if (prev)
          endSum += t.ctaEndUs[ctaOf(*prev)] - prev->endUs;
        steps = t.timeline.events.size();
        span.push_back(lastEnd - first);
        if (traceDir)
          kept.emplace_back(lastEnd - first, std::move(t.timeline));
        spread.push_back(lastBegin - first);
        step.push_back(steps ? stepSum / double(steps) : 0);
        wait.push_back(steps ? waitSum / double(steps) : 0);
        end.push_back(ctas ? endSum / double(ctas) : 0);
      }
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0.0 : v[v.size() / 2];
      };
      if (!kept.empty()) {
        std::sort(kept.begin(), kept.end(),
                  [](const auto &a, const auto &b) { return a.first < b.first; });
        std::string file = std::string(traceDir) + "/" + name + ".json";
        for (char &ch : file)
          if (ch == ' ')
            ch = '_';
        check(kept[kept.size() / 2].second.writeChromeTraceFile(file, *plan), "trace file");
      }
      std::string ops;
      char buf[64];
      for (const auto &[mnemonic, sum] : byOp) {
        std::snprintf(buf, sizeof buf, "%s%s %.2f", ops.empty() ? "" : ", ", mnemonic.c_str(),
                      sum.first / double(sum.second));
        ops += buf;
      }
      std::printf("%-36s %7.1f %7.2f %6zu %6.2f %6.2f %6.2f  %s\n", name.c_str(), median(span),
                  median(spread), steps, median(step), median(wait), median(end), ops.c_str());
      if (granularity < 1e30)
        std::printf("%-36s (shortest step seen: %.3f us)\n", "", granularity);
    }

    // Latency per size, so a protocol threshold can be chosen from data:
    // synchronised (median of 300) and back to back (mean of 300), fp32
    // sum, ranks 1 MiB apart; the in-place ring runs in place.
    std::printf("\nallreduce latency per size, microseconds: synchronised / back to back\n");
    std::vector<std::string> hostRows;
    const uint64_t sizes[] = {256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20};
    std::printf("%-40s", "plan");
    for (uint64_t s : sizes)
      std::printf(" %13s",
                  (s < 1024 ? std::to_string(s) + " B" : std::to_string(s >> 10) + " KiB").c_str());
    std::printf("\n");
    for (const LatencyCase &lc : {LatencyCase{"oneshot_allreduce_n8", false, false},
                                  LatencyCase{"twoshot_allreduce_n8", false, false},
                                  LatencyCase{"recursive_doubling_allreduce_n8", false, false},
                                  LatencyCase{"ring_allreduce_n8", false, true},
                                  LatencyCase{"allpairs_allreduce_n8", false, false},
                                  LatencyCase{"oneshot_allreduce_n2", false, false},
                                  LatencyCase{"allpairs_allreduce_n2", false, false}}) {
      Result<Plan> plan = loadPlanFile(planDir + "/" + lc.plan + ".bin");
      if (!plan)
        continue;
      auto world = DeviceWorld::create(*plan);
      check(world.getStatus(), lc.plan);
      const uint32_t nr = plan->info.nranks;
      std::vector<const void *> in(nr);
      std::vector<void *> out(nr);
      for (uint32_t r = 0; r < nr; ++r) {
        out[r] = c + uint64_t(r) * (1 << 20);
        in[r] = lc.inPlace ? out[r] : a + uint64_t(r) * (1 << 20);
      }
      std::printf("%-40s", caseName(lc).c_str());
      char cell[64];
      std::snprintf(cell, sizeof cell, "%-40s", caseName(lc).c_str());
      std::string hostRow = cell;
      for (uint64_t s : sizes) {
        const auto [sync, b2b, host] = latencyUs(**world, in, out, s / 4, 300, lc.plan);
        std::printf(" %6.1f/%6.1f", sync, b2b);
        std::snprintf(cell, sizeof cell, " %13.1f", host);
        hostRow += cell;
      }
      std::printf("\n");
      hostRows.push_back(hostRow);
    }
    // What of a synchronised call is the host's: launch() itself (every
    // rank's call prepared, the launches' API calls), the median of the
    // same calls.
    std::printf("\nallreduce launch() on the host per size, microseconds (median of the "
                "synchronised calls above)\n");
    for (const std::string &row : hostRows)
      std::printf("%s\n", row.c_str());

    std::printf("\nallreduce of 8 ranks on one GPU, 32 MiB fp32 per rank: algorithm bandwidth "
                "GB/s (size / time)\n");
    const uint64_t big = 8ull << 20; // Elements per rank.
    char *bigIn, *bigOut;
    check(cudaMalloc(&bigIn, 8 * big * 4), "cudaMalloc");
    check(cudaMalloc(&bigOut, 8 * big * 4), "cudaMalloc");
    check(cudaMemset(bigIn, 0, 8 * big * 4), "memset");
    struct Case {
      const char *name;
      uint64_t slice;
    };
    for (Case cs :
         {Case{"ring_allreduce_n8", 64 << 10}, Case{"ring_allreduce_n8", 256 << 10},
          Case{"ring_allreduce_n8", 1 << 20}, Case{"ring_allreduce_x2_n8", 256 << 10},
          Case{"ring_allreduce_x2_n8", 1 << 20}, Case{"tree_allreduce_n8", 256 << 10},
          Case{"allpairs_allreduce_n8", 256 << 10}, Case{"allpairs_allreduce_n8", 1 << 20}}) {
      const char *name = cs.name;
      Result<Plan> plan = loadPlanFile(planDir + "/" + name + ".bin");
      if (!plan)
        continue;
      DeviceOptions bo;
      bo.sliceBytes = cs.slice;
      auto world = DeviceWorld::create(*plan, bo);
      check(world.getStatus(), name);
      std::vector<const void *> in(8);
      std::vector<void *> out(8);
      for (int r = 0; r < 8; ++r) {
        in[r] = bigIn + r * big * 4;
        out[r] = bigOut + r * big * 4;
      }
      double ms = timeMs(5, [&] {
        check((*world)->launch(in, out, big, DataType::Float32, RedOp::Sum), "launch");
      });
      check((*world)->wait(), name);
      std::printf("%-30s slice %5llu KiB %8.1f  (%u CTAs, %.2f ms)\n", name,
                  (unsigned long long)(cs.slice >> 10), gbps(big * 4, ms), (*world)->numBlocks(),
                  ms);
    }

    // Direct reads (DeviceOptions::directReads): the same launches with
    // every message through the slots, then with the receivers reading the
    // sends whose data stays where it lies; interleaved, median of 3 rounds
    // of 5 launches each.
    std::printf("\ndirect reads, 8 ranks on one GPU, at most 32 MiB fp32 per rank and buffer, "
                "slice 256 KiB: algorithm bandwidth GB/s (output / time)\n");
    std::printf("%-34s %9s %9s %7s %10s\n", "plan", "slots", "direct", "ratio", "read direct");
    for (const char *name :
         {"ring_allreduce_n8", "ring_allgather_n8", "direct_allgather_n8", "ring_reducescatter_n8",
          "chain_broadcast_n8", "alltoall_allpairs_n8", "twoshot_allreduce_n8"}) {
      Result<Plan> plan = loadPlanFile(planDir + "/" + name + ".bin");
      if (!plan)
        continue;
      // The largest count whose buffers fit 32 MiB per rank.
      uint64_t count = big;
      for (;;) {
        const BufferElements e = collectiveBufferElements(plan->info.collective, 8, count);
        if (e.input <= big && e.output <= big)
          break;
        count /= 2;
      }
      const uint64_t outBytes =
          collectiveBufferElements(plan->info.collective, 8, count).output * 4;
      std::vector<const void *> in(8);
      std::vector<void *> out(8);
      for (int r = 0; r < 8; ++r) {
        in[r] = bigIn + r * big * 4;
        out[r] = bigOut + r * big * 4;
      }
      const uint64_t callCount = count;
      double mid[2] = {0, 0};
      uint64_t readDirect = 0;
      std::vector<double> times[2];
      std::unique_ptr<DeviceWorld> worlds[2];
      for (int d = 0; d < 2; ++d) {
        DeviceOptions dopt;
        dopt.sliceBytes = 256 << 10;
        dopt.directReads = d == 1;
        auto world = DeviceWorld::create(*plan, dopt);
        check(world.getStatus(), name);
        worlds[d] = std::move(*world);
      }
      for (int round = 0; round < 3; ++round)
        for (int d = 0; d < 2; ++d) {
          DeviceWorld &w = *worlds[d];
          check(w.run(in, out, callCount, DataType::Float32, RedOp::Sum), name);
          times[d].push_back(timeMs(5, [&] {
            check(w.launch(in, out, callCount, DataType::Float32, RedOp::Sum), "launch");
          }));
          check(w.wait(), name);
        }
      for (int d = 0; d < 2; ++d) {
        std::sort(times[d].begin(), times[d].end());
        mid[d] = times[d][times[d].size() / 2];
      }
      readDirect = worlds[1]->directMessages();
      std::printf("%-34s %9.1f %9.1f %6.2fx %10llu\n", name, gbps(outBytes, mid[0]),
                  gbps(outBytes, mid[1]), mid[0] / mid[1], (unsigned long long)readDirect);
    }
  }
  return 0;
}
