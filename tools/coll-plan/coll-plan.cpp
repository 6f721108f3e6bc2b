//===- coll-plan.cpp - Inspect plan files ---------------------------------===//
//
// coll-plan dump plan.bin [--rank R]   the plan as text (as collc --emit=plan-text)
// coll-plan info plan.bin              a summary: collective, ranks, sizes, hash
// coll-plan check plan.bin             load and validate; exit status only
// coll-plan check plan.bin --simulate  and simulate: what it computes, deadlock
//                                      at the plan's (or --depth N) slots
//
// Built on the runtime alone (no LLVM, no ANTLR), like anything that loads
// plans in a user's job.
//
//===----------------------------------------------------------------------===//

#include "OutOfMemory.h"
#include "coll/Runtime/Collective.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/PlanSimulator.h"

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

using namespace coll;

namespace {

int usage() {
  std::cerr << "usage: coll-plan dump <plan> [--rank R]\n"
               "       coll-plan info <plan>\n"
               "       coll-plan check <plan> [--simulate [--depth N]]\n";
  return 2;
}

/// Prints the summary of coll-plan info.
void printInfo(const Plan &plan, uint64_t checksum, size_t bytes, std::ostream &os) {
  const PlanInfo &info = plan.info;
  uint64_t tbs = 0, steps = 0, deps = 0, maxTbs = 0, maxScratch = 0, sends = 0;
  for (const RankPlan &rp : plan.ranks) {
    tbs += rp.threadblocks.size();
    maxTbs = std::max<uint64_t>(maxTbs, rp.threadblocks.size());
    maxScratch = std::max<uint64_t>(maxScratch, rp.scratchChunks);
    for (const Threadblock &tb : rp.threadblocks) {
      steps += tb.steps.size();
      deps += tb.deps.size();
      if (tb.sendPeer >= 0)
        ++sends;
    }
  }
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(checksum));
  os << "plan:          " << printablePlanName(info.name) << "\n"
     << "collective:    " << collectiveName(info.collective);
  if (collectiveInfo(info.collective).rooted)
    os << " (root " << info.root << ")";
  os << (info.inplace ? ", in-place" : ", out-of-place") << "\n";
  if (info.collective == CollectiveKind::Custom) {
    // A user-declared collective's post-conditions, when the plan has them.
    os << "contract:      ";
    if (!plan.contract) {
      os << "none (a run cannot be checked)\n";
    } else {
      uint64_t constrained = 0;
      for (uint32_t e : plan.contract->outputs)
        constrained += e != 0;
      os << plan.contract->numTerms() << (plan.contract->numTerms() == 1 ? " term, " : " terms, ")
         << constrained << " of " << plan.contract->outputs.size()
         << " output chunks constrained\n";
    }
  }
  os << "ranks:         " << info.nranks << "\n"
     << "chunks:        input " << info.inputChunks << ", output " << info.outputChunks
     << ", scratch up to " << maxScratch << " per rank\n"
     << "protocol:      " << protocolName(info.protocol) << ", connection depth "
     << info.connectionDepth << ", instances " << info.instances << "\n"
     << "threadblocks:  " << tbs << " (up to " << maxTbs << " per rank)\n"
     << "instructions:  " << steps << ", cross-threadblock dependencies " << deps << "\n"
     << "connections:   " << sends << "\n"
     << "size:          " << bytes << " bytes, checksum " << hash << "\n";
}

} // namespace

int main(int argc, char **argv) {
  coll::tools::exitCleanlyWhenOutOfMemory("coll-plan");
  if (argc < 3)
    return usage();
  std::string cmd = argv[1], path = argv[2];
  int rank = -1;
  bool simulate = false;
  unsigned depth = 0;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--simulate") == 0 && cmd == "check") {
      simulate = true;
    } else if (std::strcmp(argv[i], "--depth") == 0 && i + 1 < argc && cmd == "check") {
      char *end = nullptr;
      long d = std::strtol(argv[++i], &end, 10);
      if (!*argv[i] || *end || d < 1 || d > long(PlanLimits::maxConnectionDepth)) {
        std::cerr << "coll-plan: error: bad --depth '" << argv[i] << "' (1 to "
                  << PlanLimits::maxConnectionDepth << ")\n";
        return 2;
      }
      depth = unsigned(d);
    } else if (std::strcmp(argv[i], "--rank") == 0 && i + 1 < argc && cmd == "dump") {
      char *end = nullptr;
      long r = std::strtol(argv[++i], &end, 10);
      if (!*argv[i] || *end || r < 0 || r > long(PlanLimits::maxRanks)) {
        std::cerr << "coll-plan: error: bad --rank '" << argv[i] << "'\n";
        return 2;
      }
      rank = int(r);
    } else {
      return usage();
    }
  }
  if (depth && !simulate) {
    std::cerr << "coll-plan: error: --depth goes with --simulate\n";
    return 2;
  }
  if (cmd != "dump" && cmd != "info" && cmd != "check")
    return usage();

  // The loader's reader: it checks the size against the plan limit before
  // reading, and refuses directories and what it cannot size.
  Result<std::vector<uint8_t>> read = readPlanFile(path);
  if (!read) {
    std::cerr << "coll-plan: error: " << read.message() << "\n";
    return 1;
  }
  const std::vector<uint8_t> &bytes = *read;
  Result<Plan> plan = parsePlan(bytes.data(), bytes.size(), rank);
  if (!plan) {
    std::cerr << "coll-plan: error: " << path << ": " << plan.message() << "\n";
    return 1;
  }
  if (cmd == "check" && simulate) {
    SimulateOptions options;
    options.depth = depth;
    // A user-declared collective's plan without a contract has nothing to
    // be checked against: say what it computes instead.
    PlanContract derived;
    const bool uncontracted =
        plan->info.collective == CollectiveKind::Custom && !plan->contract && plan->loadedRank < 0;
    if (uncontracted)
      options.derivedContract = &derived;
    SimulateReport report = simulatePlan(*plan, options);
    for (const std::string &p : report.problems)
      std::cerr << "coll-plan: error: " << path << ": " << p << "\n";
    if (!report.ok())
      return 1;
    const uint32_t slots = depth ? depth : plan->info.connectionDepth;
    std::cout << path << ": computes " << collectiveName(plan->info.collective) << " on "
              << plan->info.nranks << " ranks and finishes with " << slots
              << (slots == 1 ? " slot" : " slots") << " per connection (" << report.stepsRun
              << " steps)\n";
    if (!report.racesChecked)
      std::cout << path << ": note: the plan is too large for the race check ("
                << maxRaceCheckedThreadblocks
                << " threadblocks with steps at most, steps times those up to 2^28): another "
                << "order "
                << "of its threadblocks was not checked\n";
    if (uncontracted) {
      uint64_t defined = 0;
      for (uint32_t e : derived.outputs)
        defined += e != 0;
      std::cout << path << ": note: the plan carries no contract, so nothing was checked against "
                << "one; its outputs hold " << derived.numTerms()
                << (derived.numTerms() == 1 ? " term" : " terms") << " in " << defined << " of "
                << derived.outputs.size() << " output chunks (coll-run needs a contract)\n";
    }
  }
  if (cmd == "dump")
    printPlanText(*plan, std::cout);
  else if (cmd == "info")
    printInfo(*plan, planChecksum(bytes.data() + 32, bytes.size() - 32), bytes.size(), std::cout);
  return 0;
}
