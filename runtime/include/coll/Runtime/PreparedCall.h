//===- PreparedCall.h - One call of a plan, ready for any executor -*- C++ -*-===//
/// \file
/// The one call path every executor shares:
///
///   Plan ──validate once──▶ ValidatedPlan ──prepareCall(rank, args)──▶
///   PreparedCall ──▶ executor (LocalWorld, World, ProcessGroup,
///                     DeviceWorld, NcclCommunicator)
///
/// A ValidatedPlan is a plan that passed validatePlan() and fits its
/// collective, with the checksum of its bytes as its identity. prepareCall()
/// is a pure function of that plan, a rank and the call's arguments: it
/// checks the arguments and says everything an executor needs to run the
/// rank: the chunk layout, where the plan's Input and Output live (the
/// user's buffers or a private copy of the input), the staging copies before
/// and after the run, whether Avg needs its division, and the fixed-size
/// CallDescription that the ranks compare with one agree(). An executor only
/// resolves the description to its memory (host or device) and runs.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_PREPAREDCALL_H
#define COLL_RUNTIME_PREPAREDCALL_H

#include "coll/Runtime/ChunkLayout.h"
#include "coll/Runtime/DataType.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace coll {

/// A plan checked once, by the loader or on construction: validatePlan()
/// passed and its chunk counts fit its built-in collective
/// (planChunksPerUnit()). Its identity across ranks and processes is
/// checksum(): the checksum a file of the plan stores (planChecksum() of the
/// bytes after the header), which is also that of a section loaded from the
/// file for one rank (Plan::sourceChecksum). A section built in memory is
/// named by its own bytes. Cheap to copy (the plan
/// is shared, never changed).
class ValidatedPlan {
public:
  /// Validates \p plan and keeps it.
  static Result<ValidatedPlan> make(Plan plan);
  /// Validates \p plan without copying it: the result refers to \p plan,
  /// which must outlive it and not change while it is in use.
  static Result<ValidatedPlan> borrow(const Plan &plan);
  /// Parses and validates a plan in memory (parsePlan()), keeping the
  /// checksum its header holds as the identity: also for \p rank >= 0,
  /// when only that rank's section is decoded.
  static Result<ValidatedPlan> parse(const uint8_t *data, size_t size, int rank = -1);
  /// parse() of the file at \p path.
  static Result<ValidatedPlan> load(const std::string &path, int rank = -1);

  const Plan &plan() const { return *thePlan; }
  const PlanInfo &info() const { return thePlan->info; }
  /// The plan's identity: equal checksums mean equal plans.
  uint64_t checksum() const { return sum; }
  /// C, the plan's chunks per rank unit.
  uint32_t chunksPerUnit() const { return chunks; }
  /// Whether every rank's section is present (not loaded for one rank).
  bool holdsEveryRank() const { return thePlan->loadedRank < 0; }
  /// The section of rank \p rank; null when it is not held.
  const RankPlan *section(uint32_t rank) const;

private:
  ValidatedPlan() = default;
  static Result<ValidatedPlan> check(std::shared_ptr<const Plan> plan, const uint64_t *knownSum);
  std::shared_ptr<const Plan> thePlan;
  uint64_t sum = 0;
  uint32_t chunks = 1;
};

/// A plan checksum as 16 hex digits: "0123456789abcdef".
std::string formatChecksum(uint64_t checksum);

/// "'ring' (allreduce, 8 ranks, checksum 0123456789abcdef)"; a rooted
/// collective's with its root ("(broadcast, root 1, 8 ranks, ...)").
std::string describePlan(const std::string &name, CollectiveKind kind, uint32_t nranks,
                         uint64_t checksum, uint32_t root = 0);

/// One rank's arguments of a call.
struct CallArgs {
  const void *sendbuf = nullptr;
  void *recvbuf = nullptr;
  uint64_t count = 0; ///< Elements of one rank's unit (Executor.h).
  DataType type = DataType::Float32;
  RedOp op = RedOp::Sum;
  /// The receive buffer as separate blocks of one unit (count elements)
  /// each, or null: block i stands where recvbuf + i units would, and
  /// recvbuf is not used. There must be as many as the receive buffer has
  /// units (numRecvBlocks), none overlapping another: the output tensors of
  /// torch.distributed's list forms (all_gather, all_to_all, gather), with
  /// no copy through one contiguous buffer. Only executors that say so take
  /// them (CallOptions::bufferBlocks).
  void *const *recvBlocks = nullptr;
  uint64_t numRecvBlocks = 0;
  /// The send buffer in blocks of one unit, as recvBlocks (sendbuf not
  /// used); they may overlap (one tensor sent to every rank): the input
  /// tensors of scatter, reduce_scatter and all_to_all lists.
  const void *const *sendBlocks = nullptr;
  uint64_t numSendBlocks = 0;
};

/// Where byte \p offset of a buffer lies: in \p whole, or in block
/// offset / \p unitBytes of \p blocks (\p n of them) when they are given.
inline const char *bufferAddress(const void *whole, const void *const *blocks, uint64_t n,
                                 uint64_t unitBytes, uint64_t offset) {
  if (!blocks)
    return static_cast<const char *>(whole) + offset;
  if (unitBytes == 0)
    return n ? static_cast<const char *>(blocks[0]) : nullptr;
  return static_cast<const char *>(blocks[offset / unitBytes]) + offset % unitBytes;
}

/// Where the receive buffer's byte \p offset lies (bufferAddress()).
inline char *recvAddress(const CallArgs &a, uint64_t unitBytes, uint64_t offset) {
  return const_cast<char *>(
      bufferAddress(a.recvbuf, a.recvBlocks, a.numRecvBlocks, unitBytes, offset));
}

/// Where the send buffer's byte \p offset lies (bufferAddress()).
inline const char *sendAddress(const CallArgs &a, uint64_t unitBytes, uint64_t offset) {
  return bufferAddress(a.sendbuf, a.sendBlocks, a.numSendBlocks, unitBytes, offset);
}

/// What an executor asks of a call besides the plan's rules.
struct CallOptions {
  /// Elements of a chunk processed per pass (at least 1); the layout's
  /// slices are no larger than the largest chunk.
  uint64_t sliceElements = 16384;
  /// The executor's number of ranks: the plan must be for as many.
  uint32_t worldRanks = 0;
  /// "world", "job", "communicator": the executor's name for its ranks, in
  /// the error when the plan is for another number.
  const char *worldName = "world";
  /// The rank's own section suffices (one rank per process or GPU);
  /// otherwise the plan must hold every rank.
  bool ownSectionSuffices = false;
  /// Buffers must be aligned to their elements (device executors).
  bool alignedBuffers = false;
  /// The bytes of N units of the count, times this, must fit in 64 bits:
  /// room an executor needs for its offsets (device executors: 4).
  uint32_t countHeadroom = 1;
  /// How the call picks its protocol (PreparedCall::protocol).
  ProtocolChoice protocol;
  /// The executor takes send and receive buffers in blocks
  /// (CallArgs::sendBlocks, recvBlocks); otherwise a call that gives them
  /// is refused.
  bool bufferBlocks = false;
};

/// An error of a call, with its kind; kind None is success.
struct CallError {
  ErrorKind kind = ErrorKind::None;
  std::string message;
  explicit operator bool() const { return kind != ErrorKind::None; }
  /// \p message as a Status.
  Status status() const { return *this ? Status::error(message) : Status::success(); }
};

/// One rank's description of its call, for the ranks to compare: fixed
/// size and trivially copyable, so that it travels through shared memory
/// or an all-gather as it is. A rank whose arguments are bad describes its
/// error instead, so that the others fail rather than wait.
struct CallDescription {
  uint64_t planChecksum = 0;
  uint64_t count = 0;
  uint64_t sliceElements = 0;
  uint32_t type = 0;
  uint32_t op = 0;
  uint32_t collective = 0;
  uint32_t planRanks = 0;
  uint32_t errorKind = 0; ///< ErrorKind of the rank's argument error; 0: none.
  uint32_t protocol = 0;  ///< ProtocolKind the call runs.
  uint32_t planRoot = 0;  ///< The plan's root (rooted collectives).
  char planName[64] = {};
  char error[512] = {}; ///< The argument error's message.
};
static_assert(std::is_trivially_copyable<CallDescription>::value,
              "a call description is copied as bytes between processes");

/// The description of a call that failed before it could be prepared (its
/// plan is invalid, say).
CallDescription describeFailedCall(const CallError &error);

/// The verdict of a call for rank \p me, given every rank's description
/// (\p calls[q] is rank q's): success when all agree. Otherwise the first
/// rank's argument error (that rank gets its own message, the others
/// "rank q failed: ..."), or a Mismatch naming rank 0 and the first rank
/// whose plan or arguments differ. Every rank computes the same verdict from
/// the same descriptions.
CallError agree(const CallDescription *calls, uint32_t n, uint32_t me);

/// Where a buffer of the run lives: the user's send or receive buffer, or
/// the executor's private copy of the input (PreparedCall::copyBytes).
enum class CallMemory : uint8_t { Send, Recv, Copy };

/// A place in a call's memory.
struct CallBuffer {
  CallMemory memory = CallMemory::Send;
  uint64_t offset = 0; ///< Bytes from the start of that memory.
};

/// A copy an executor makes before or after the run.
struct StagingCopy {
  CallBuffer to, from;
  uint64_t bytes = 0;
};

/// Everything an executor needs to run one rank of a call. The rules of
/// LocalWorld::run (Executor.h):
///  - an in-place plan called with the collective's in-place alias runs on
///    the one buffer;
///  - an in-place plan called out of place first copies the input to its
///    alias position in the output (OutputInInput: runs in a copy of the
///    input and copies block `rank` out), so sendbuf is never written;
///  - an out-of-place plan whose input overlaps its output, or which writes
///    its input, runs on a copy of the input.
struct PreparedCall {
  /// The call's error; the rest is meaningful only without one. The
  /// description holds it too.
  CallError error;
  uint32_t rank = 0;
  CallArgs args;
  size_t elementSize = 0;
  BufferElements elements;  ///< Of the user's send and receive buffers.
  uint64_t inputBytes = 0;  ///< elements.input * elementSize.
  uint64_t outputBytes = 0; ///< elements.output * elementSize.
  uint64_t unitBytes = 0;   ///< count * elementSize.
  ChunkLayout layout;       ///< Of count over the plan's C chunks.
  /// The protocol of the call's messages: chooseProtocol() of the plan's,
  /// CallOptions::protocol and the larger of the buffers.
  ProtocolKind protocol = ProtocolKind::Simple;
  bool inPlace = false;            ///< The buffers are the collective's in-place alias.
  CallBuffer input, output;        ///< What the plan's Input and Output are.
  uint64_t copyBytes = 0;          ///< The private copy of the input (0: none).
  std::vector<StagingCopy> before; ///< In order, before the run.
  std::vector<StagingCopy> after;  ///< In order, after a successful run.
  /// Avg: divide the count elements of recvbuf by the number of ranks
  /// after the run (and after `after`).
  bool divideByRanks = false;
  /// The plan runs nothing (count 0): only the staging and the division.
  bool empty() const { return layout.numSlices == 0; }
  CallDescription description;
  /// Makes \p e the call's error, in its description too.
  void fail(CallError e);
};

/// The argument checks of prepareCall(), in order, which need only the
/// plan's info and which sections it holds: executors given a plan not yet
/// validated check the arguments first, so that a bad argument is reported
/// as such whatever the plan. Errors name the rank.
CallError checkCall(const Plan &plan, uint32_t rank, const CallArgs &args,
                    const CallOptions &options);

/// Prepares rank \p rank's call of \p plan with \p args (see PreparedCall).
/// Never fails outright: a bad argument is PreparedCall::error, and its
/// description carries it. Errors name the rank: "rank 3: the send buffer
/// is null (count is not 0)".
PreparedCall prepareCall(const ValidatedPlan &plan, uint32_t rank, const CallArgs &args,
                         const CallOptions &options);

/// The address of \p b given the call's three memories.
inline char *resolve(const CallBuffer &b, const void *sendbuf, void *recvbuf, char *copy) {
  char *base = b.memory == CallMemory::Send   ? static_cast<char *>(const_cast<void *>(sendbuf))
               : b.memory == CallMemory::Recv ? static_cast<char *>(recvbuf)
                                              : copy;
  return base + b.offset;
}

/// The address of \p b in call \p c's memories, \p copy its private copy
/// of the input: also where the buffers are in blocks. A staging copy never
/// crosses a block's end (prepareCall()).
inline char *resolve(const CallBuffer &b, const PreparedCall &c, char *copy) {
  if (b.memory == CallMemory::Recv && c.args.recvBlocks)
    return recvAddress(c.args, c.unitBytes, b.offset);
  if (b.memory == CallMemory::Send && c.args.sendBlocks)
    return const_cast<char *>(sendAddress(c.args, c.unitBytes, b.offset));
  return resolve(b, c.args.sendbuf, c.args.recvbuf, copy);
}

/// Whether a step of \p rp writes the Input buffer.
bool writesInput(const RankPlan &rp);

} // namespace coll

#endif // COLL_RUNTIME_PREPAREDCALL_H
