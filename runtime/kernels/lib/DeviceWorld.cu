//===- DeviceWorld.cu - Every rank of a plan on one GPU -------------------===//
//
// The host side of the CUDA executor: uploads the plan as tables of
// threadblocks, instructions, dependencies and FIFOs; sizes scratch and
// connection memory for each launch's count and data type; prepares each
// rank's call (prepareCall, PreparedCall.h) and resolves its buffers and
// staging copies to device memory; launches
// one cooperative grid (all CTAs resident at once, or an error); and turns
// the device's error record into a message.
//
//===----------------------------------------------------------------------===//

#include "DeviceKernel.h"
#include "LaunchTables.h"
#include "coll/Kernels/DeviceWorld.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PlanIO.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>

namespace coll {

using namespace kernels;

/// The state behind a DeviceWorld.
struct DeviceWorldState {
  explicit DeviceWorldState(const ValidatedPlan &plan) : plan(plan) {}
  ValidatedPlan plan;
  DeviceOptions options;
  int device = 0;
  uint32_t numBlocks = 0;
  uint32_t numSms = 0;
  LaunchTables tables;
  std::vector<RankSection> sections; ///< Every rank, in order.

  DeviceBuffer tbTable, stepTable, depTable, fifoTable, rankBufferTable;
  DeviceBuffer progress, counters, abortFlag, error;
  /// Direct reads: the table of direct sends, each FIFO's slot marks and
  /// the count of messages read in place.
  DeviceBuffer directTable, marks, directCount;
  DeviceBuffer slotMemory, scratchMemory, inputCopies;
  DeviceBuffer trace;  ///< DeviceOptions::traceSteps: every CTA's step trace.
  DeviceBuffer stages; ///< Line protocols: every CTA's staging copies.
  /// The slice base and the count of finished CTAs (KernelParams::
  /// launchState): the kernel advances the base, so a launch captured in a
  /// CUDA graph replays with the right one.
  DeviceBuffer launchState;
  /// The protocol the slots were last laid out and cleared for: a line
  /// protocol's slots must hold no flag of a message to come (zero, or an
  /// earlier message's while the counters go on).
  ProtocolKind slotsProtocol = ProtocolKind::Simple;
  bool traced = false;             ///< A launch has written the trace.
  uint64_t slotsPieceStride = 0;   ///< The stride the FIFO table was laid out for.
  std::vector<char *> rankBuffers; ///< The table as last uploaded.
  uint64_t sliceBase = 0;
  uint32_t maxResident = 0;
  cudaStream_t lastStream = nullptr; ///< The stream of the last launch.
  bool launched = false;             ///< A launch since the last wait().

  Status fail(const std::string &what, cudaError_t err) {
    cudaGetLastError();
    return Status::error(what + ": " + cudaText(err));
  }

  /// Zeroes every counter and the error record: a fresh start.
  Status reset() {
    cudaError_t err;
    if ((err = cudaMemset(progress.ptr, 0, progress.bytes)) ||
        (err = cudaMemset(counters.ptr, 0, counters.bytes)) ||
        (err = cudaMemset(abortFlag.ptr, 0, abortFlag.bytes)) ||
        (err = cudaMemset(error.ptr, 0, error.bytes)) ||
        (err = cudaMemset(launchState.ptr, 0, launchState.bytes)) ||
        // cudaMemset is not ordered before kernels on non-blocking streams.
        (err = cudaDeviceSynchronize()))
      return fail("cannot reset the device state", err);
    sliceBase = 0;
    // The counters start over: lines the slots hold may carry the flags of
    // messages to come. The next launch lays out and clears them anew.
    slotsPieceStride = 0;
    return Status::success();
  }

  Status describeFailure(const DeviceError &e) const;
};

DeviceWorld::DeviceWorld(std::unique_ptr<DeviceWorldState> state) : s(std::move(state)) {}
DeviceWorld::~DeviceWorld() = default;

uint32_t DeviceWorld::numBlocks() const {
  return s->numBlocks;
}
uint32_t DeviceWorld::maxResidentBlocks() const {
  return s->maxResident;
}

Result<std::unique_ptr<DeviceWorld>> DeviceWorld::create(const Plan &plan,
                                                         const DeviceOptions &options) {
  if (plan.loadedRank >= 0)
    return Status::error(cat("the plan was loaded for rank ", plan.loadedRank,
                             " only; a DeviceWorld runs every rank"));
  // The world keeps the plan: a copy, validated once.
  Result<ValidatedPlan> validated = ValidatedPlan::make(plan);
  if (!validated)
    return validated.getStatus();
  return create(*validated, options);
}

Result<std::unique_ptr<DeviceWorld>> DeviceWorld::create(const ValidatedPlan &validated,
                                                         const DeviceOptions &options) {
  if (!validated.holdsEveryRank())
    return Status::error(cat("the plan was loaded for rank ", validated.plan().loadedRank,
                             " only; a DeviceWorld runs every rank"));
  const Plan &plan = validated.plan();
  if (Status s = checkThreadsPerBlock(options.threadsPerBlock); !s)
    return s;
  if (options.sliceBytes < 16)
    return Status::error("the slice must be at least 16 bytes");
  if (!(options.timeoutSeconds > 0) || options.timeoutSeconds > 1e9)
    return Status::error("the timeout must be in (0, 1e9] seconds");

  auto st = std::make_unique<DeviceWorldState>(validated);
  st->options = options;
  cudaError_t err;
  if (options.device >= 0) {
    if ((err = cudaSetDevice(options.device)))
      return st->fail(cat("cannot use device ", options.device), err);
  }
  if ((err = cudaGetDevice(&st->device)))
    return st->fail("no CUDA device", err);
  int sms = 0, coop = 0;
  if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, st->device)) ||
      (err = cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, st->device)))
    return st->fail("cannot query the device", err);
  if (!coop && options.cooperative)
    return Status::error("the device cannot launch cooperative grids, which the executor "
                         "needs to keep every threadblock resident");
  st->numSms = uint32_t(sms);

  // Tables: threadblocks in rank order, their instructions and dependencies
  // concatenated; one FIFO per receiving threadblock.
  for (uint32_t r = 0; r < plan.info.nranks; ++r)
    st->sections.push_back({r, st->plan.section(r)});
  st->tables = buildLaunchTables(plan.info, st->sections);
  const std::vector<Instruction> &steps = st->tables.steps;
  const std::vector<Dependency> &deps = st->tables.deps;
  st->numBlocks = uint32_t(st->tables.tbs.size());

  // Counters: progress per CTA, tail and head per FIFO, each on its own line.
  if ((err = upload(st->tbTable, st->tables.tbs)) || (err = upload(st->stepTable, steps)) ||
      (err = upload(st->depTable, deps)) ||
      (err = st->progress.reserve(uint64_t(st->numBlocks) * kCounterStride * 8)) ||
      (err = st->counters.reserve(uint64_t(st->tables.fifos.size()) * 2 * kCounterStride * 8)) ||
      (err = st->abortFlag.reserve(sizeof(unsigned int))) ||
      (err = st->error.reserve(sizeof(DeviceError))) ||
      (err = st->launchState.reserve(2 * sizeof(uint64_t))) ||
      (err = st->rankBufferTable.reserve(uint64_t(plan.info.nranks) * numBufferKinds() *
                                         sizeof(char *))))
    return st->fail("cannot allocate device memory for the plan", err);
  if (options.traceSteps &&
      ((err = st->trace.reserve(uint64_t(st->numBlocks) * traceBytesPerCta(options.traceSteps))) ||
       (err = cudaMemset(st->trace.ptr, 0, st->trace.bytes))))
    return st->fail(
        cat("cannot allocate the step trace of ", options.traceSteps, " steps per threadblock"),
        err);
  for (size_t i = 0; i < st->tables.fifos.size(); ++i) {
    st->tables.fifos[i].tail = st->counters.as<uint64_t>() + (2 * i) * kCounterStride;
    st->tables.fifos[i].head = st->counters.as<uint64_t>() + (2 * i + 1) * kCounterStride;
  }
  if (options.directReads) {
    // Every rank's buffers are this GPU's memory: any receiver reads any
    // sender's. Each FIFO's marks, one word per slot.
    uint64_t words = 0;
    for (const FifoDesc &f : st->tables.fifos)
      words += f.depth;
    if ((err = upload(st->directTable, st->tables.directSteps)) ||
        (err = st->marks.reserve(words * sizeof(uint32_t))) ||
        (err = cudaMemset(st->marks.ptr, 0, st->marks.bytes)) ||
        (err = st->directCount.reserve(sizeof(unsigned long long))) ||
        (err = cudaMemset(st->directCount.ptr, 0, st->directCount.bytes)))
      return st->fail("cannot allocate device memory for direct reads", err);
    uint64_t at = 0;
    for (FifoDesc &f : st->tables.fifos) {
      f.marks = st->marks.as<uint32_t>() + at;
      at += f.depth;
    }
  }
  if (Status rs = st->reset(); !rs)
    return rs;

  // Every CTA must be resident at once: a CTA that waits for one not yet
  // scheduled would wait forever.
  // The kernels of the data types and operators differ in registers: the
  // least occupancy over all of them holds for every launch.
  int perSm = std::numeric_limits<int>::max();
  for (unsigned t = 0; t < numDataTypes(); ++t)
    for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min}) {
      int n = 0;
      KernelFn fn = selectKernel(DataType(t), op);
      if ((err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
               &n, reinterpret_cast<const void *>(fn), int(options.threadsPerBlock),
               st->tables.sharedSteps * sizeof(Instruction))))
        return st->fail("cannot compute the kernel's occupancy", err);
      perSm = std::min(perSm, n);
    }
  st->maxResident = uint32_t(perSm) * st->numSms;
  if (st->numBlocks > st->maxResident)
    return Status::error(cat("the plan needs ", st->numBlocks,
                             " threadblocks resident at once (all ranks on one GPU), but the "
                             "device holds at most ",
                             st->maxResident, " CTAs of ", options.threadsPerBlock, " threads (",
                             perSm, " on each of ", st->numSms, " SMs)"));
  return std::unique_ptr<DeviceWorld>(new DeviceWorld(std::move(st)));
}

Status DeviceWorld::launch(const std::vector<const void *> &sendbufs,
                           const std::vector<void *> &recvbufs, uint64_t count, DataType type,
                           RedOp op, cudaStream_t stream) {
  DeviceWorldState &w = *s;
  const PlanInfo &info = w.plan.info();
  const uint32_t nranks = info.nranks;
  if (sendbufs.size() != nranks || recvbufs.size() != nranks)
    return Status::error(cat("the plan has ", nranks, " ranks but ", sendbufs.size(), " send and ",
                             recvbufs.size(), " receive buffers were given"));
  // Each rank's call, prepared as every executor's is: the first rank
  // whose arguments are bad names itself.
  CallOptions callOptions = launchCallOptions(w.options.sliceBytes, type);
  callOptions.worldRanks = nranks;
  callOptions.protocol = w.options.protocol;
  std::vector<PreparedCall> calls;
  calls.reserve(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    calls.push_back(
        prepareCall(w.plan, r, {sendbufs[r], recvbufs[r], count, type, op}, callOptions));
    if (calls.back().error)
      return calls.back().error.status();
  }
  if (count == 0)
    return Status::success();
  const KernelFn fn = selectKernel(type, op);
  assert(fn && "prepareCall() accepts only the types and operators of a kernel");
  const size_t es = calls[0].elementSize;
  // Launches share the counters and memory: one stream at a time, so a
  // launch on another stream first waits for the last one.
  cudaError_t err;
  if (w.launched && stream != w.lastStream && (err = cudaStreamSynchronize(w.lastStream)))
    return w.fail("a previous launch failed", err);

  // Slices of sliceBytes, no larger than the largest chunk; message pieces
  // start 16-byte aligned. The prepared calls have the same layout.
  const SliceShape shape = sliceShape(count, w.plan.chunksPerUnit(), w.options.sliceBytes, es);
  const ChunkLayout &layout = shape.layout;
  const uint64_t pieceStride = shape.pieceStride;
  assert(layout.sliceElements == calls[0].layout.sliceElements &&
         layout.numSlices == calls[0].layout.numSlices && "one slice shape");

  // Memory for this count: FIFO slots, scratch, private input copies, sized
  // with overflow checks and capped before anything is allocated. Growing
  // frees memory that earlier launches may still use: wait for them first.
  std::vector<uint64_t> privateCopy(nranks);
  MemoryCap cap;
  cap.limitBytes = w.options.memoryLimitBytes;
  cap.option = "DeviceOptions::memoryLimitBytes";
  for (uint32_t r = 0; r < nranks; ++r) {
    privateCopy[r] = calls[r].copyBytes;
    // Below 2^63: prepareCall() bounds the count.
    const uint64_t rankBytes = calls[r].inputBytes + calls[r].outputBytes;
    cap.bufferBytes =
        cap.bufferBytes > ~uint64_t(0) - rankBytes ? ~uint64_t(0) : cap.bufferBytes + rankBytes;
  }
  const ProtocolKind protocol = calls[0].protocol;
  Result<LaunchMemory> memory = layoutLaunchMemory(w.tables, w.sections, layout, pieceStride, es,
                                                   /*slots=*/true, privateCopy, cap, protocol);
  if (!memory)
    return memory.getStatus();
  const uint64_t slotBytes = memory->slotBytes, scratchBytes = memory->scratchBytes,
                 copyBytes = memory->copyBytes;
  const std::vector<uint64_t> &scratchOffset = memory->scratchOffset,
                              &copyOffset = memory->copyOffset;
  const uint64_t stagesBytes = memory->stagesBytes;
  if (slotBytes > w.slotMemory.bytes || scratchBytes > w.scratchMemory.bytes ||
      copyBytes > w.inputCopies.bytes || stagesBytes > w.stages.bytes) {
    if ((err = cudaDeviceSynchronize()))
      return w.fail("a previous launch failed", err);
    if ((err = w.slotMemory.reserve(slotBytes)) || (err = w.scratchMemory.reserve(scratchBytes)) ||
        (err = w.inputCopies.reserve(copyBytes)) || (err = w.stages.reserve(stagesBytes)))
      return w.fail(cat("cannot allocate ", slotBytes + scratchBytes + copyBytes + stagesBytes,
                        " bytes of connection, scratch and staging memory"),
                    err);
    w.slotsPieceStride = 0;
  }
  if (w.slotsPieceStride != pieceStride || w.slotsProtocol != protocol) {
    uint64_t offset = 0;
    for (size_t i = 0; i < w.tables.fifos.size(); ++i) {
      w.tables.fifos[i].slotBytes = slotBytesFor(protocol, w.tables.fifoMaxCount[i] * pieceStride);
      w.tables.fifos[i].slots = w.slotMemory.ptr + offset;
      offset += w.tables.fifos[i].depth * w.tables.fifos[i].slotBytes;
    }
    // Earlier launches read the old table; the new one must be in place
    // before this launch on any stream. A line protocol's slots start
    // clear: fresh memory, or another protocol's bytes, could hold a flag
    // of a message to come.
    if ((err = cudaDeviceSynchronize()) || (err = upload(w.fifoTable, w.tables.fifos)) ||
        (protocol != ProtocolKind::Simple &&
         (err = cudaMemset(w.slotMemory.ptr, 0, w.slotMemory.bytes))) ||
        (err = cudaDeviceSynchronize()))
      return w.fail("cannot upload the connection table", err);
    w.slotsPieceStride = pieceStride;
    w.slotsProtocol = protocol;
  }

  // Each rank's Input and Output as its prepared call places them, with
  // device-to-device copies on the stream. A rank's copies run in order;
  // the ranks' i-th copies (a wave) run together.
  std::vector<char *> table(size_t(nranks) * numBufferKinds());
  std::vector<std::vector<kernels::StagingCopy>> waves;
  std::vector<kernels::StagingCopy> copyOuts;
  std::vector<void *> divided;
  for (uint32_t r = 0; r < nranks; ++r) {
    DeviceBinding b = bindCall(calls[r], w.inputCopies.ptr + copyOffset[r]);
    if (waves.size() < b.before.size())
      waves.resize(b.before.size());
    for (size_t i = 0; i < b.before.size(); ++i)
      waves[i].push_back(b.before[i]);
    copyOuts.insert(copyOuts.end(), b.after.begin(), b.after.end());
    if (calls[r].divideByRanks)
      divided.push_back(recvbufs[r]);
    table[numBufferKinds() * r + unsigned(BufferKind::Input)] = b.input;
    table[numBufferKinds() * r + unsigned(BufferKind::Output)] = b.output;
    table[numBufferKinds() * r + unsigned(BufferKind::Scratch)] =
        w.scratchMemory.ptr + scratchOffset[r];
  }
  for (const std::vector<kernels::StagingCopy> &wave : waves)
    if ((err = launchStagingCopies(wave, stream)))
      return w.fail("cannot stage the ranks' inputs", err);
  if (table != w.rankBuffers) {
    // From pageable memory: staged before the call returns, ordered on the
    // stream before the kernel.
    if ((err = cudaMemcpyAsync(w.rankBufferTable.ptr, table.data(), table.size() * sizeof(char *),
                               cudaMemcpyHostToDevice, stream)))
      return w.fail("cannot upload the buffer table", err);
    w.rankBuffers = table;
  }

  DirectLaunch direct;
  if (w.options.directReads) {
    direct.steps = w.directTable.as<uint8_t>();
    direct.buffers = (1u << unsigned(BufferKind::Input)) | (1u << unsigned(BufferKind::Output));
    direct.received = w.directCount.as<unsigned long long>();
  }
  err = launchInterpreter(w, fn, layout, pieceStride, /*systemScope=*/false, stream,
                          /*network=*/nullptr, w.trace.ptr, w.options.traceSteps, protocol,
                          w.stages.ptr, memory->stageBytes, w.launchState.as<uint64_t>(),
                          /*bufferTable=*/nullptr, direct);
  if (err)
    return w.fail("cannot launch the interpreter kernel", err);
  w.traced = w.trace.ptr != nullptr;
  w.sliceBase += layout.numSlices;
  w.lastStream = stream;
  w.launched = true;

  // Finish: results computed away from the user's output, then Avg.
  if ((err = launchStagingCopies(copyOuts, stream)))
    return w.fail("cannot copy the results out", err);
  if (!divided.empty() && (err = launchDivide(type, divided, count, nranks, stream)))
    return w.fail("cannot launch the division of avg", err);
  return Status::success();
}

Status DeviceWorldState::describeFailure(const DeviceError &e) const {
  return describeDeviceFailure(e, tables, sections, plan.info().connectionDepth,
                               options.timeoutSeconds);
}

Status DeviceWorld::wait(cudaStream_t stream) {
  DeviceWorldState &w = *s;
  cudaError_t err = cudaStreamSynchronize(stream);
  if (!err && w.launched && w.lastStream != stream)
    err = cudaStreamSynchronize(w.lastStream);
  w.launched = false;
  if (err)
    return w.fail("the interpreter kernel failed", err);
  DeviceError e;
  if ((err = cudaMemcpy(&e, w.error.ptr, sizeof e, cudaMemcpyDeviceToHost)))
    return w.fail("cannot read the device's error record", err);
  if (!e.claimed && !e.abortedCtas)
    return Status::success();
  Status failure = e.claimed ? w.describeFailure(e)
                             : Status::error("the run stopped without a recorded failure");
  if (Status rs = w.reset(); !rs)
    return Status::error(failure.message() + "; and " + rs.message());
  return failure;
}

uint64_t DeviceWorld::directMessages() const {
  return readDeviceCounter(s->directCount);
}

Status DeviceWorld::trace(DeviceTrace &out) const {
  const DeviceWorldState &w = *s;
  if (!w.options.traceSteps)
    return Status::error("tracing is off (DeviceOptions::traceSteps is 0)");
  if (!w.traced)
    return Status::error("no launch has run since the world was made");
  if (w.launched)
    return Status::error("a launch may still run: wait() for it first");
  std::vector<char> raw(w.trace.bytes);
  if (cudaError_t err = cudaMemcpy(raw.data(), w.trace.ptr, raw.size(), cudaMemcpyDeviceToHost)) {
    cudaGetLastError();
    return Status::error("cannot read the step trace: " + cudaText(err));
  }
  return decodeTrace(raw, w.options.traceSteps, w.tables, w.sections, out);
}

Status DeviceWorld::run(const std::vector<const void *> &sendbufs,
                        const std::vector<void *> &recvbufs, uint64_t count, DataType type,
                        RedOp op, cudaStream_t stream) {
  if (Status st = launch(sendbufs, recvbufs, count, type, op, stream); !st)
    return st;
  return wait(stream);
}

} // namespace coll
