//===- OutOfPlace.cpp - In-place plans run out of place without staging ---===//
//
// The rank's steps are walked in one order that respects program order and
// the dependencies (StepOrder.h).
//
//===----------------------------------------------------------------------===//

#include "OutOfPlace.h"

#include "StepOrder.h"
#include "coll/Runtime/Collective.h"
#include "coll/Runtime/Interpreter.h"

#include <algorithm>

namespace coll {
namespace detail {

namespace {

bool inPlaceBuffer(BufferKind b) {
  return b == BufferKind::Input || b == BufferKind::Output;
}

/// Whether plans with \p info can have out-of-place programs at all.
bool wholeBufferInPlacePlan(const PlanInfo &info) {
  return info.inplace && collectiveInfo(info.collective).inPlace == InPlaceAlias::Same;
}

} // namespace

OutOfPlaceProgram outOfPlaceProgram(const PlanInfo &info, const RankPlan &rp) {
  if (!wholeBufferInPlacePlan(info))
    return {};
  const uint32_t chunks = info.outputChunks;
  const StepOrder order = stepOrder(rp);
  if (order.first.empty())
    return {}; // A cycle: the plan would deadlock anyway.
  // The walk below sees a chunk's accesses in the order of every run only
  // where dependencies order them: else the staging copy serves the call.
  // (The whole-buffer alias is the same on every rank: rank 0 serves.)
  if (!accessesOrderedByDependencies(info, 0, rp, order))
    return {};

  OutOfPlaceProgram out;
  for (const Threadblock &tb : rp.threadblocks)
    out.steps.push_back(tb.steps);
  std::vector<uint8_t> written(chunks, 0);
  // Whether chunks [off, off + count) are all written (1), none (0), or
  // some (-1, or out of range).
  auto state = [&](uint32_t off, uint32_t count) -> int {
    if (count == 0 || off >= chunks || count > chunks - off)
      return -1;
    uint32_t n = 0;
    for (uint32_t j = off; j < off + count; ++j)
      n += written[j];
    return n == count ? 1 : n == 0 ? 0 : -1;
  };
  for (size_t s : order.order) {
    const auto [b, i] = order.locate(s);
    Instruction &in = out.steps[b][i];
    const OpcodeFlags f = opcodeFlags(in.op);
    // Reads first: a step that reads and writes one chunk reads its value
    // from before the step.
    if (f.readSrc && inPlaceBuffer(in.srcBuf)) {
      const int st = state(in.srcOff, in.count);
      if (st < 0)
        return {};
      in.srcBuf = st == 0 ? BufferKind::Input : BufferKind::Output;
    }
    if (f.writeDst && inPlaceBuffer(in.dstBuf)) {
      // `re` reads its destination too; an original value there would need
      // a third operand.
      if (in.op == Opcode::Reduce && state(in.dstOff, in.count) != 1)
        return {};
      if (in.dstOff >= chunks || in.count > chunks - in.dstOff)
        return {};
      in.dstBuf = BufferKind::Output;
      for (uint32_t j = in.dstOff; j < in.dstOff + in.count; ++j)
        written[j] = 1;
    }
  }
  if (std::find(written.begin(), written.end(), 0) != written.end())
    return {};
  return out;
}

bool runOutOfPlace(PreparedCall &c, const PlanInfo &info) {
  if (c.error || c.inPlace || c.empty() || !wholeBufferInPlacePlan(info))
    return false;
  // prepareCall() staged the input (or its private copy, when the buffers
  // overlap) into the output: read it where it is instead.
  const CallBuffer src =
      c.copyBytes ? CallBuffer{CallMemory::Copy, 0} : CallBuffer{CallMemory::Send, 0};
  c.before.erase(
      std::remove_if(c.before.begin(), c.before.end(),
                     [](const StagingCopy &s) { return s.to.memory == CallMemory::Recv; }),
      c.before.end());
  c.input = src;
  c.output = {CallMemory::Recv, 0};
  return true;
}

} // namespace detail
} // namespace coll
