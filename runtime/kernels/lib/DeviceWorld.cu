//===- DeviceWorld.cu - Every rank of a plan on one GPU -------------------===//
//
// The host side of the CUDA executor: uploads the plan as tables of
// threadblocks, instructions, dependencies and FIFOs; sizes scratch and
// connection memory for each launch's count and data type; binds the
// ranks' buffers as LocalWorld does (in place or out of place); launches
// one cooperative grid (all CTAs resident at once, or an error); and turns
// the device's error record into a message.
//
//===----------------------------------------------------------------------===//

#include "DeviceKernel.h"
#include "coll/Kernels/DeviceWorld.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PlanIO.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>

namespace coll {

using namespace kernels;

namespace {

template <typename... Args> std::string cat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

std::string cudaText(cudaError_t err) {
  return cat(cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

/// Device memory that grows on demand and is freed with its owner.
struct DeviceBuffer {
  char *ptr = nullptr;
  uint64_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { release(); }
  void release() {
    if (ptr)
      cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
  }
  /// At least \p n bytes; the contents are lost when it grows.
  cudaError_t reserve(uint64_t n) {
    if (n <= bytes && ptr)
      return cudaSuccess;
    release();
    cudaError_t err = cudaMalloc(&ptr, n ? n : 1);
    if (err == cudaSuccess)
      bytes = n;
    else
      ptr = nullptr;
    return err;
  }
  template <class T> T *as() const { return reinterpret_cast<T *>(ptr); }
};

template <class T> cudaError_t upload(DeviceBuffer &buf, const std::vector<T> &v) {
  if (cudaError_t err = buf.reserve(v.size() * sizeof(T)))
    return err;
  return v.empty() ? cudaSuccess
                   : cudaMemcpy(buf.ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
}

uint64_t roundUp(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

bool overlaps(const char *a, uint64_t aBytes, const char *b, uint64_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && x < y + bBytes && y < x + aBytes;
}

bool isInPlaceCall(CollectiveKind kind, uint32_t rank, const char *in, const char *out,
                   uint64_t unitBytes) {
  switch (kind) {
  case CollectiveKind::AllReduce:
  case CollectiveKind::Broadcast:
  case CollectiveKind::Reduce:
    return in == out;
  case CollectiveKind::AllGather:
    return in == out + rank * unitBytes;
  case CollectiveKind::ReduceScatter:
    return out == in + rank * unitBytes;
  default:
    return false;
  }
}

bool writesInput(const RankPlan &rp) {
  for (const Threadblock &tb : rp.threadblocks)
    for (const Instruction &in : tb.steps)
      if (opcodeFlags(in.op).writeDst && in.dstBuf == BufferKind::Input)
        return true;
  return false;
}

/// 64-byte spacing of counters, so that neighbours do not share a line.
constexpr uint32_t kCounterStride = 8;
/// Programs of up to this many steps run from shared memory.
constexpr uint32_t kMaxSharedSteps = (40u << 10) / sizeof(Instruction);

} // namespace

/// The state behind a DeviceWorld.
struct DeviceWorldState {
  Plan plan;
  DeviceOptions options;
  int device = 0;
  uint32_t numBlocks = 0;
  uint32_t numSms = 0;
  std::vector<TbDesc> tbs;
  std::vector<FifoDesc> fifos;
  std::vector<uint32_t> fifoMaxCount; ///< Chunks of the largest message.
  std::vector<uint32_t> fifoBlock;    ///< The receiving CTA.
  std::vector<bool> writesInput;      ///< Per rank.
  uint32_t sharedSteps = 0;           ///< Steps held in shared memory per CTA.

  DeviceBuffer tbTable, stepTable, depTable, fifoTable, rankBufferTable;
  DeviceBuffer progress, counters, abortFlag, error;
  DeviceBuffer slotMemory, scratchMemory, inputCopies;
  uint64_t slotsPieceStride = 0;   ///< The stride the FIFO table was laid out for.
  std::vector<char *> rankBuffers; ///< The table as last uploaded.
  uint64_t sliceBase = 0;
  uint32_t maxResident = 0;

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
        (err = cudaMemset(error.ptr, 0, error.bytes)))
      return fail("cannot reset the device state", err);
    sliceBase = 0;
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
  if (Status st = validatePlan(plan); !st)
    return Status::error("invalid plan: " + st.message());
  if (Result<uint32_t> c = planChunksPerUnit(plan.info); !c)
    return c.getStatus();
  if (options.threadsPerBlock == 0 || options.threadsPerBlock % 32 ||
      options.threadsPerBlock > 1024)
    return Status::error(cat("threads per block must be a multiple of 32 in [32, 1024], not ",
                             options.threadsPerBlock));
  if (options.sliceBytes < 16)
    return Status::error("the slice must be at least 16 bytes");
  if (!(options.timeoutSeconds > 0) || options.timeoutSeconds > 1e9)
    return Status::error("the timeout must be in (0, 1e9] seconds");

  auto st = std::make_unique<DeviceWorldState>();
  st->plan = plan;
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
  std::vector<Instruction> steps;
  std::vector<Dependency> deps;
  std::vector<std::map<std::pair<int32_t, uint32_t>, int32_t>> recvFifo(plan.info.nranks);
  uint32_t maxSteps = 0;
  for (uint32_t r = 0; r < plan.info.nranks; ++r) {
    const RankPlan &rp = plan.ranks[r];
    st->writesInput.push_back(writesInput(rp));
    uint32_t first = uint32_t(st->tbs.size());
    for (uint32_t b = 0; b < rp.threadblocks.size(); ++b) {
      const Threadblock &tb = rp.threadblocks[b];
      TbDesc d;
      d.rank = r;
      d.tb = b;
      d.rankFirst = first;
      d.numSteps = uint32_t(tb.steps.size());
      d.stepsBegin = steps.size();
      d.depsBegin = deps.size();
      uint32_t maxRecv = 0;
      for (const Instruction &in : tb.steps) {
        OpcodeFlags f = opcodeFlags(in.op);
        d.sendsPerSlice += f.send;
        d.recvsPerSlice += f.recv;
        if (f.recv)
          maxRecv = std::max(maxRecv, in.count);
      }
      if (tb.recvPeer >= 0 && d.recvsPerSlice > 0) {
        d.recvFifo = int32_t(st->fifos.size());
        recvFifo[r][{tb.recvPeer, tb.channel}] = d.recvFifo;
        FifoDesc f;
        f.depth = plan.info.connectionDepth;
        st->fifos.push_back(f);
        st->fifoMaxCount.push_back(std::max<uint32_t>(maxRecv, 1));
        st->fifoBlock.push_back(uint32_t(st->tbs.size()));
      }
      maxSteps = std::max(maxSteps, d.numSteps);
      steps.insert(steps.end(), tb.steps.begin(), tb.steps.end());
      deps.insert(deps.end(), tb.deps.begin(), tb.deps.end());
      st->tbs.push_back(d);
    }
  }
  for (TbDesc &d : st->tbs) {
    const Threadblock &tb = plan.ranks[d.rank].threadblocks[d.tb];
    if (tb.sendPeer >= 0 && d.sendsPerSlice > 0) {
      auto it = recvFifo[tb.sendPeer].find({int32_t(d.rank), tb.channel});
      if (it != recvFifo[tb.sendPeer].end())
        d.sendFifo = it->second;
    }
  }
  st->numBlocks = uint32_t(st->tbs.size());
  st->sharedSteps = std::min(maxSteps, kMaxSharedSteps);

  // Counters: progress per CTA, tail and head per FIFO, each on its own line.
  if ((err = upload(st->tbTable, st->tbs)) || (err = upload(st->stepTable, steps)) ||
      (err = upload(st->depTable, deps)) ||
      (err = st->progress.reserve(uint64_t(st->numBlocks) * kCounterStride * 8)) ||
      (err = st->counters.reserve(uint64_t(st->fifos.size()) * 2 * kCounterStride * 8)) ||
      (err = st->abortFlag.reserve(sizeof(unsigned int))) ||
      (err = st->error.reserve(sizeof(DeviceError))) ||
      (err = st->rankBufferTable.reserve(uint64_t(plan.info.nranks) * 3 * sizeof(char *))))
    return st->fail("cannot allocate device memory for the plan", err);
  for (size_t i = 0; i < st->fifos.size(); ++i) {
    st->fifos[i].tail = st->counters.as<uint64_t>() + (2 * i) * kCounterStride;
    st->fifos[i].head = st->counters.as<uint64_t>() + (2 * i + 1) * kCounterStride;
  }
  if (Status rs = st->reset(); !rs)
    return rs;

  // Every CTA must be resident at once: a CTA that waits for one not yet
  // scheduled would wait forever.
  int perSm = 0;
  KernelFn fn = selectKernel(DataType::Float32, RedOp::Sum);
  if ((err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
           &perSm, reinterpret_cast<const void *>(fn), int(options.threadsPerBlock),
           st->sharedSteps * sizeof(Instruction))))
    return st->fail("cannot compute the kernel's occupancy", err);
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
  const PlanInfo &info = w.plan.info;
  const uint32_t nranks = info.nranks;
  if (sendbufs.size() != nranks || recvbufs.size() != nranks)
    return Status::error(cat("the plan has ", nranks, " ranks but ", sendbufs.size(), " send and ",
                             recvbufs.size(), " receive buffers were given"));
  KernelFn fn = selectKernel(type, op);
  const size_t es = dataTypeSize(type);
  if (!fn || es == 0)
    return Status::error(cat("invalid data type ", unsigned(type), " or operator ", unsigned(op)));
  if (count > std::numeric_limits<uint64_t>::max() / es / nranks / 4)
    return Status::error(cat("count ", count, " is too large"));
  if (count == 0)
    return Status::success();
  for (uint32_t r = 0; r < nranks; ++r)
    if (!sendbufs[r] || !recvbufs[r])
      return Status::error(
          cat("rank ", r, " has a null ", sendbufs[r] ? "receive" : "send", " buffer"));
  const uint32_t chunks = *planChunksPerUnit(info);
  const BufferElements elems = collectiveBufferElements(info.collective, nranks, count);

  // Slices of sliceBytes, no larger than the largest chunk; message pieces
  // start 16-byte aligned.
  ChunkLayout layout = ChunkLayout::make(count, chunks, 1);
  uint64_t sliceElems = std::max<uint64_t>(1, w.options.sliceBytes / es);
  layout = ChunkLayout::make(count, chunks, std::min(sliceElems, layout.maxChunk));
  const uint64_t pieceStride = roundUp(layout.sliceElements * es, 16);

  cudaError_t err;
  // Memory for this count: FIFO slots, scratch, private input copies. Growing
  // frees memory that earlier launches may still use: wait for them first.
  uint64_t slotBytes = 0;
  for (size_t i = 0; i < w.fifos.size(); ++i)
    slotBytes += uint64_t(w.fifos[i].depth) * w.fifoMaxCount[i] * pieceStride;
  const uint64_t inBytes = elems.input * es, outBytes = elems.output * es, unitBytes = count * es;
  std::vector<uint64_t> scratchOffset(nranks), copyOffset(nranks);
  uint64_t scratchBytes = 0, copyBytes = 0;
  for (uint32_t r = 0; r < nranks; ++r) {
    scratchOffset[r] = scratchBytes;
    scratchBytes += roundUp(layout.scratchElements(w.plan.ranks[r].scratchChunks) * es, 256);
    // A private copy of the input: see the binding below.
    const char *in = static_cast<const char *>(sendbufs[r]);
    const char *out = static_cast<const char *>(recvbufs[r]);
    bool overlap = overlaps(in, inBytes, out, outBytes);
    bool alias = isInPlaceCall(info.collective, r, in, out, unitBytes);
    bool needsCopy = info.inplace
                         ? !alias && (overlap || info.collective == CollectiveKind::ReduceScatter)
                         : overlap || w.writesInput[r];
    copyOffset[r] = copyBytes;
    if (needsCopy)
      copyBytes += roundUp(inBytes, 256);
  }
  if (slotBytes > w.slotMemory.bytes || scratchBytes > w.scratchMemory.bytes ||
      copyBytes > w.inputCopies.bytes) {
    if ((err = cudaDeviceSynchronize()))
      return w.fail("a previous launch failed", err);
    if ((err = w.slotMemory.reserve(slotBytes)) || (err = w.scratchMemory.reserve(scratchBytes)) ||
        (err = w.inputCopies.reserve(copyBytes)))
      return w.fail(cat("cannot allocate ", slotBytes + scratchBytes + copyBytes,
                        " bytes of connection, scratch and staging memory"),
                    err);
    w.slotsPieceStride = 0;
  }
  if (w.slotsPieceStride != pieceStride) {
    uint64_t offset = 0;
    for (size_t i = 0; i < w.fifos.size(); ++i) {
      w.fifos[i].slotBytes = w.fifoMaxCount[i] * pieceStride;
      w.fifos[i].slots = w.slotMemory.ptr + offset;
      offset += w.fifos[i].depth * w.fifos[i].slotBytes;
    }
    if ((err = cudaStreamSynchronize(stream)) || (err = upload(w.fifoTable, w.fifos)))
      return w.fail("cannot upload the connection table", err);
    w.slotsPieceStride = pieceStride;
  }

  // Bind each rank's buffers as the plan addresses them (LocalWorld's rules,
  // Executor.h), with device-to-device copies on the stream.
  std::vector<char *> table(size_t(nranks) * 3);
  struct CopyOut {
    char *to;
    const char *from;
    uint64_t bytes;
  };
  std::vector<CopyOut> copyOuts;
  for (uint32_t r = 0; r < nranks; ++r) {
    char *in = static_cast<char *>(const_cast<void *>(sendbufs[r]));
    char *out = static_cast<char *>(recvbufs[r]);
    char *privateCopy = w.inputCopies.ptr + copyOffset[r];
    bool alias = isInPlaceCall(info.collective, r, in, out, unitBytes);
    bool overlap = overlaps(in, inBytes, out, outBytes);
    auto snapshot = [&]() -> char * {
      err = cudaMemcpyAsync(privateCopy, in, inBytes, cudaMemcpyDeviceToDevice, stream);
      return privateCopy;
    };
    char *input = in, *output = out;
    err = cudaSuccess;
    if (!info.inplace) {
      if (overlap || w.writesInput[r])
        input = snapshot();
    } else if (!alias) {
      const char *src = overlap ? snapshot() : in;
      switch (info.collective) {
      case CollectiveKind::AllGather:
        if (!err)
          err = cudaMemcpyAsync(out + r * unitBytes, src, unitBytes, cudaMemcpyDeviceToDevice,
                                stream);
        input = out + r * unitBytes;
        break;
      case CollectiveKind::ReduceScatter:
        if (!overlap)
          snapshot();
        input = privateCopy;
        output = input + r * unitBytes;
        copyOuts.push_back({out, output, unitBytes});
        break;
      default:
        if (!err)
          err = cudaMemcpyAsync(out, src, unitBytes, cudaMemcpyDeviceToDevice, stream);
        input = out;
        break;
      }
    }
    if (err)
      return w.fail(cat("cannot stage rank ", r, "'s input"), err);
    table[3 * r + unsigned(BufferKind::Input)] = input;
    table[3 * r + unsigned(BufferKind::Output)] = output;
    table[3 * r + unsigned(BufferKind::Scratch)] = w.scratchMemory.ptr + scratchOffset[r];
  }
  if (table != w.rankBuffers) {
    // From pageable memory: staged before the call returns, ordered on the
    // stream before the kernel.
    if ((err = cudaMemcpyAsync(w.rankBufferTable.ptr, table.data(), table.size() * sizeof(char *),
                               cudaMemcpyHostToDevice, stream)))
      return w.fail("cannot upload the buffer table", err);
    w.rankBuffers = table;
  }

  KernelParams k;
  k.tbs = w.tbTable.as<TbDesc>();
  k.steps = w.stepTable.as<Instruction>();
  k.deps = w.depTable.as<Dependency>();
  k.fifos = w.fifoTable.as<FifoDesc>();
  k.rankBuffers = w.rankBufferTable.as<char *>();
  k.progress = w.progress.as<uint64_t>();
  k.progressStride = kCounterStride;
  k.layout = layout;
  k.sliceBase = w.sliceBase;
  k.pieceStride = pieceStride;
  k.timeoutNs = uint64_t(w.options.timeoutSeconds * 1e9);
  k.abortFlag = w.abortFlag.as<unsigned int>();
  k.error = w.error.as<DeviceError>();
  k.maxSharedSteps = w.sharedSteps;
  k.systemScope = false;
  void *args[] = {&k};
  err = w.options.cooperative
            ? cudaLaunchCooperativeKernel(reinterpret_cast<const void *>(fn), dim3(w.numBlocks),
                                          dim3(w.options.threadsPerBlock), args,
                                          w.sharedSteps * sizeof(Instruction), stream)
            : cudaLaunchKernel(reinterpret_cast<const void *>(fn), dim3(w.numBlocks),
                               dim3(w.options.threadsPerBlock), args,
                               w.sharedSteps * sizeof(Instruction), stream);
  if (err)
    return w.fail("cannot launch the interpreter kernel", err);
  w.sliceBase += layout.numSlices;

  // Finish: results computed away from the user's output, then Avg.
  for (const CopyOut &c : copyOuts)
    if ((err = cudaMemcpyAsync(c.to, c.from, c.bytes, cudaMemcpyDeviceToDevice, stream)))
      return w.fail("cannot copy a result out", err);
  if (op == RedOp::Avg && collectiveReduces(info.collective))
    for (uint32_t r = 0; r < nranks; ++r)
      if (collectiveDefinesOutput(info.collective, info.root, r) &&
          (err = launchDivide(type, recvbufs[r], count, nranks, stream)))
        return w.fail("cannot launch the division of avg", err);
  return Status::success();
}

Status DeviceWorldState::describeFailure(const DeviceError &e) const {
  if (e.block >= tbs.size())
    return Status::error("the device reported a failure of an unknown threadblock");
  const TbDesc &d = tbs[e.block];
  const Threadblock &tb = plan.ranks[d.rank].threadblocks[d.tb];
  const char *mnemonic = e.step < tb.steps.size() ? opcodeInfo(tb.steps[e.step].op).mnemonic : "?";
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", options.timeoutSeconds);
  std::string what;
  switch (WaitKind(e.waitKind)) {
  case WaitKind::Dependency:
    what = cat("threadblock ", e.depTb, " to finish step ", e.depStep);
    break;
  case WaitKind::RecvMessage:
    what = cat("message ", e.expected - e.sliceBase * d.recvsPerSlice, " from rank ", tb.recvPeer,
               " on channel ", tb.channel);
    break;
  case WaitKind::SendSlot: {
    uint64_t base = e.sliceBase * d.sendsPerSlice;
    uint32_t depth = plan.info.connectionDepth;
    what = cat("a free slot to rank ", tb.sendPeer, " on channel ", tb.channel, " (all ", depth,
               " slots full: ", e.expected + depth - 1 - base, " messages sent, ",
               e.observed >= base ? e.observed - base : 0, " taken)");
    break;
  }
  case WaitKind::None:
    what = "nothing";
    break;
  }
  std::string msg =
      cat("rank ", d.rank, " threadblock ", d.tb, " step ", e.step, " (", mnemonic, ", slice ",
          e.slice, "): timed out after ", seconds, " s on the GPU waiting for ", what);
  if (e.failedCtas > 1)
    msg += cat("; ", e.failedCtas - 1, " more threadblocks timed out");
  if (e.abortedCtas)
    msg += cat("; ", e.abortedCtas, " stopped with it");
  return Status::error(msg);
}

Status DeviceWorld::wait(cudaStream_t stream) {
  DeviceWorldState &w = *s;
  cudaError_t err = cudaStreamSynchronize(stream);
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

Status DeviceWorld::run(const std::vector<const void *> &sendbufs,
                        const std::vector<void *> &recvbufs, uint64_t count, DataType type,
                        RedOp op, cudaStream_t stream) {
  if (Status st = launch(sendbufs, recvbufs, count, type, op, stream); !st)
    return st;
  return wait(stream);
}

} // namespace coll
