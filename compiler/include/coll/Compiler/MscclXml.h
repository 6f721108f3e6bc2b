//===- MscclXml.h - MSCCL-IR XML in ----------------------------*- C++ -*-===//
/// \file
/// Reads MSCCL-IR XML, the algorithm format of msccl-tools (MSCCLang), the
/// MSCCL executor and RCCL, into a Collc plan: `algo` becomes the plan's
/// info, each `gpu` a rank, each `tb` a threadblock (send and receive peer,
/// channel), each `step` an instruction with its dependency. The XML's
/// per-rank instruction streams are the plan as they are (nothing is
/// rescheduled; the nops that carry a step's extra dependencies become
/// those dependencies, as the executors read them), so running the plan
/// runs what the file says; then
/// simulatePlan() (coll/Runtime/PlanSimulator.h) checks what it computes.
///
/// The reader streams the file (memory bounded by the plan it builds) and
/// stops at the first error, as `file:line:col: error: ...` naming the
/// element (gpu, tb and step).
//===----------------------------------------------------------------------===//
#ifndef COLL_COMPILER_MSCCLXML_H
#define COLL_COMPILER_MSCCLXML_H

#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Status.h"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace coll::compiler {

/// Options of importMscclXml().
struct MscclImportOptions {
  /// Slots per connection the plan is run and checked with.
  uint32_t connectionDepth = 4;
};

/// What the XML's `algo` says beyond the plan.
struct MscclAlgoInfo {
  std::string collName; ///< `coll` as written.
  uint32_t nchannels = 0;
  uint32_t nchunksperloop = 0;
  bool outOfPlace = true;              ///< `outofplace` (default: not in place).
  uint64_t minBytes = 0, maxBytes = 0; ///< 0: not given.
  /// Per gpu and threadblock, each plan step's position among the file's
  /// steps (which nops folded into the next step's dependencies shift), for
  /// messages: SimulateOptions::position.
  std::vector<std::vector<std::vector<uint32_t>>> positions;
  /// What the MSCCL executors would do differently (a dependency on a
  /// step without hasdep="1" waits there forever), as "file:line:col: ...".
  std::vector<std::string> warnings;
  /// Where each step of the file is: [gpu][tb][the step's number in the
  /// file] -> (line, column); stepLocation() reads it.
  std::vector<std::vector<std::vector<std::pair<unsigned, unsigned>>>> stepLocations;
  /// Where step \p step of threadblock \p tb of gpu \p gpu is, if the file
  /// has it.
  std::optional<std::pair<unsigned, unsigned>> stepLocation(uint64_t gpu, uint64_t tb,
                                                            uint64_t step) const {
    if (gpu >= stepLocations.size() || tb >= stepLocations[gpu].size() ||
        step >= stepLocations[gpu][tb].size())
      return std::nullopt;
    return stepLocations[gpu][tb][step];
  }
  /// Where each <tb> is, (gpu, tb) -> (line, column), and each <gpu>, as
  /// (gpu, UINT32_MAX): for problems that name no step.
  std::map<std::array<uint32_t, 2>, std::pair<unsigned, unsigned>> elementLocations;
};

/// \p problem (of a check of a plan imported from \p fileName) as an error
/// diagnostic: at the line and column of the first step it names (else of
/// the first threadblock, else gpu, it names), as
/// `gpu R tb T step S` in the file's numbering (SimulateOptions::position)
/// or as the plan checks name one (`rank R threadblock T step S`, which
/// \p folded says are the plan's steps, after nops were folded, rather than
/// the file's); at the file alone when it names none. The plan's names are
/// turned into the file's (`gpu`, `tb`).
std::string mscclProblem(const MscclAlgoInfo &algo, const std::string &fileName,
                         const std::string &problem, bool folded = false);

/// The limits of the runtime an exported file is for (steps per
/// threadblock, threadblocks per gpu, channels, chunks per step, the
/// highest dependency threadblock, chunk offsets, threadblocks sending or
/// receiving on one channel).
struct MscclLimits {
  const char *runtime; ///< "executor", "rccl", "legacy", "none".
  uint32_t maxSteps, maxThreadblocks, maxChannels, maxCount, maxDepTb, maxOffset, maxPerChannel;
  /// The limits of \p runtime, or null when it names none of them.
  static const MscclLimits *named(const std::string &runtime);
};

/// Writes \p plan as MSCCL-IR XML for the runtime of \p limits: a step
/// with several dependencies becomes nops (one dependency each) before it,
/// `hasdep="1"` marks every step another waits for, and the in-place alias
/// is written as msccl-tools writes it. Refuses a plan MSCCL-IR cannot say
/// (a rooted or user-declared collective) or that exceeds a limit, naming
/// it and the step.
Status exportMscclXml(const Plan &plan, const MscclLimits &limits, std::string &out);

/// Parses the MSCCL-IR XML \p text (named \p fileName in errors) into a
/// plan that passed validatePlan().
Result<Plan> importMscclXml(const std::string &text, const std::string &fileName,
                            const MscclImportOptions &options = MscclImportOptions(),
                            MscclAlgoInfo *algo = nullptr);

} // namespace coll::compiler

#endif // COLL_COMPILER_MSCCLXML_H
