//===- make-wrong-plan.cpp - Write a valid plan that computes wrong -------===//
//
// make-wrong-plan N out.bin
//
// Writes the hand-written ring allreduce of HandPlans.h for N ranks with
// the step that completes each rank's chunk (receive, reduce, copy, send)
// turned into a plain receive-copy-send: the plan is valid and runs to the
// end, but that chunk holds one rank's partial sum instead of the total.
// The lit tests run coll-perf on it to see a wrong result reported.
//
//===----------------------------------------------------------------------===//

#include "HandPlans.h"
#include "coll/Runtime/PlanIO.h"

#include <cstdio>
#include <cstdlib>

using namespace coll;

int main(int argc, char **argv) {
  int n = argc == 3 ? std::atoi(argv[1]) : 0;
  if (n < 2) {
    std::fprintf(stderr, "usage: make-wrong-plan N out.bin (N >= 2)\n");
    return 2;
  }
  Plan plan = test::ringAllReduce(uint32_t(n), 2);
  plan.info.name = "wrong_ring_allreduce";
  for (RankPlan &rank : plan.ranks)
    for (Threadblock &tb : rank.threadblocks)
      for (Instruction &in : tb.steps)
        if (in.op == Opcode::RecvReduceCopySend)
          in = test::step(Opcode::RecvCopySend, test::O, 0, test::O, in.dstOff, in.count);
  if (Status s = writePlanFile(plan, argv[2]); !s) {
    std::fprintf(stderr, "make-wrong-plan: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}
