// api_example.cpp - an allreduce on 8 ranks through the C++ API.
//
// Usage: api_example PLAN.bin, where PLAN.bin is an 8-rank allreduce
// compiled by collc, e.g.
//   collc stdlib/ring_allreduce.coll --nranks 8 --emit=plan -o ring8.bin
// Each rank is a std::thread with its own Communicator. Exits 0 when every
// element is right, 1 on any error, 77 (skipped) without a plan file.
#include "coll/Runtime/Communicator.h"
#include "coll/Runtime/PlanIO.h"

#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

int main(int argc, char **argv) {
  if (argc < 2 || !std::ifstream(argv[1])) {
    std::fprintf(stderr, "usage: api_example PLAN.bin (no plan: skipped)\n");
    return 77;
  }
  // Load (and validate) every rank of the plan.
  coll::Result<coll::Plan> plan = coll::loadPlanFile(argv[1]);
  if (!plan) {
    std::fprintf(stderr, "%s\n", plan.message().c_str());
    return 1;
  }
  const int nranks = int(plan->info.nranks);
  if (plan->info.collective != coll::CollectiveKind::AllReduce) {
    std::fprintf(stderr, "%s is not an allreduce\n", argv[1]);
    return 1;
  }

  // A world of nranks ranks in this process.
  coll::Result<std::shared_ptr<coll::World>> world = coll::World::create(nranks);
  if (!world) {
    std::fprintf(stderr, "%s\n", world.message().c_str());
    return 1;
  }

  const size_t count = 1 << 20;
  std::vector<int> failed(size_t(nranks), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      auto comm = (*world)->communicator(r);
      if (!comm) {
        std::fprintf(stderr, "rank %d: %s\n", r, comm.message().c_str());
        failed[size_t(r)] = 1;
        return;
      }
      // In place: sendbuf == recvbuf.
      std::vector<double> buf(count);
      for (size_t i = 0; i < count; ++i)
        buf[i] = double(i * size_t(nranks) + size_t(r));
      coll::Status s = (*comm)->execute(*plan, buf.data(), buf.data(), count,
                                        coll::DataType::Float64, coll::RedOp::Sum);
      if (!s) {
        std::fprintf(stderr, "rank %d: %s\n", r, s.message().c_str());
        failed[size_t(r)] = 1;
        return;
      }
      for (size_t i = 0; i < count; ++i) {
        double want = double(i) * nranks * nranks + nranks * (nranks - 1) / 2.0;
        if (buf[i] != want) {
          std::fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", r, i, buf[i], want);
          failed[size_t(r)] = 1;
          return;
        }
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (int f : failed)
    if (f)
      return 1;
  std::printf("%s: allreduce of %zu doubles on %d ranks: every element right\n",
              plan->info.name.c_str(), count, nranks);
  return 0;
}
