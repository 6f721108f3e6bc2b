//===- NcclCommunicator.cpp - One rank per GPU over an NCCL comm ----------===//
//
// Setup (collective, every step a function of what all ranks sent, so that
// the ranks stop together):
//  1. Each rank prepares its part alone: its section of the plan, the
//     kernel's tables, which peers its LSA team holds, the layout of its
//     connection memory (layoutConnections in NcclSetup.h).
//  2. Hellos (ncclAllGather of a fixed-size record): the plan's identity
//     (ValidatedPlan::checksum()), the slice size, the transport asked for, the memory and GIN
//     signals needed, whether step 1 failed. Every rank picks the same transport.
//  3. Connection memory: IPC, a cudaMalloc exported with a CUDA IPC handle;
//     symmetric, an ncclMemAlloc of the largest size any rank needs, then
//     a device communicator (with GIN signals when some connection crosses
//     the network; NCCL also refuses it where the communicator has no
//     symmetric memory), then the window, each step agreed on by all. The
//     address (and handle) go to every rank.
//  4. Connection entries (ncclAllGather, padded to the largest): where each
//     rank's FIFOs and counters sit in its memory; every connection is
//     matched with its other end.
//  5. Each rank reaches the peers it talks to (IPC mappings, peer access or
//     LSA pointers; GIN needs only the offsets) and uploads its FIFO table.
//  6. A last ncclAllGather of "ok" flags: a rank that failed in step 5
//     takes every rank with it.
// The counters and slots are sized for the largest slice, so that the
// layout does not depend on a launch's count and a sender's next launch
// never writes where the receiver's current one still reads.
//
//===----------------------------------------------------------------------===//

#include "coll/Kernels/NcclCommunicator.h"

#include "DeviceKernel.h"
#include "LaunchTables.h"
#include "NcclSetup.h"
#include "NcclSymmetric.h"
#include "coll/Kernels/CaptureMode.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PlanIO.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <thread>
#include <unistd.h>

namespace coll {

using namespace kernels;

namespace {

/// Makes \p device current for a scope, then restores the caller's.
class DeviceScope {
public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous) != cudaSuccess)
      previous = -1;
    if (previous != device)
      cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (previous >= 0)
      cudaSetDevice(previous);
  }
  DeviceScope(const DeviceScope &) = delete;
  DeviceScope &operator=(const DeviceScope &) = delete;

private:
  int previous = -1;
};

/// Equal for every rank of this process, different across processes.
uint64_t processToken() {
  static const uint64_t token = [] {
    std::random_device rd;
    return (uint64_t(uint32_t(getpid())) << 32) ^ uint64_t(rd());
  }();
  return token;
}

std::string ncclText(ncclResult_t r) {
  return cat("NCCL error ", int(r), ": ", ncclGetErrorString(r));
}

Status cudaFail(const std::string &what, cudaError_t err) {
  cudaGetLastError();
  return Status::error(what + ": " + cudaText(err));
}

} // namespace

/// The state behind an NcclCommunicator.
struct NcclCommunicatorState {
  std::optional<ValidatedPlan> validated; ///< The plan as given; each launch is prepared on it.
  Plan plan;                              ///< This rank's section.
  NcclOptions options;
  ncclComm_t comm = nullptr;
  uint32_t rank = 0, nranks = 0;
  int device = 0;
  std::vector<RankSection> sections; ///< This rank.
  LaunchTables tables;
  uint32_t numBlocks = 0;
  uint64_t slotStride = 0; ///< maxPieceStride(sliceBytes).

  DeviceBuffer tbTable, stepTable, depTable, fifoTable, rankBufferTable;
  DeviceBuffer progress, abortFlag, error, exchange;
  NcclTransport transport = NcclTransport::Ipc;
  ConnectionLayout connections;  ///< This rank's connection memory.
  std::vector<int32_t> lsaRanks; ///< Per rank: its rank in this rank's LSA team, or -1.
  uint32_t networkPeers = 0;     ///< Peers reached over the network.
  DeviceBuffer connection;       ///< IPC: exported to the peers.
  std::unique_ptr<SymmetricMemory> symmetric; ///< Symmetric: the window (and GIN).
  DeviceBuffer scratchMemory, inputCopies;
  std::vector<void *> ipcMapped; ///< Peers' memory, closed on destruction.
  uint32_t ipcPeers = 0;
  cudaStream_t setupStream = nullptr; ///< Exchanges and error reads.
  cudaEvent_t lastLaunch = nullptr;
  bool launched = false;
  std::vector<char *> rankBuffers; ///< The table as last uploaded.
  /// The slice base and the count of finished CTAs (KernelParams::
  /// launchState): the kernel advances the base, so that a launch captured
  /// in a CUDA graph replays with the base of each replay.
  DeviceBuffer launchState;
  /// What KernelParams::sliceBase is given: unused, the base is in
  /// launchState.
  uint64_t sliceBase = 0;
  /// A launch was captured into a CUDA graph: its replays are not
  /// recorded in lastLaunch, and memory it uses is never freed before the
  /// communicator is.
  bool captured = false;
  /// The buffer tables of captured launches, by their contents: a graph
  /// reads its own at every replay, whatever later launches upload.
  std::map<std::vector<char *>, DeviceBuffer> capturedTables;
  /// Scratch and staging memory replaced while captured launches may
  /// still use it: freed with the communicator.
  std::vector<char *> retired;
  std::optional<Status> failure; ///< A device-side failure: unusable from then on.

  /// Registered windows (registerWindow()): this rank's, and where the
  /// receivers on this rank read each peer's (one view per LSA peer and
  /// window, this rank's own included).
  struct Window {
    ncclWindow_t window = nullptr;
    uint64_t base = 0, bytes = 0;
  };
  std::vector<Window> windows;
  std::vector<DirectView> views;
  std::vector<ncclWindow_t> viewWindow; ///< The window of each view.
  /// Device copies: LaunchTables::directSteps, the views, the count of
  /// messages read in place.
  DeviceBuffer directTable, viewTable, directCount;
  /// Makes \p table (the views, uploaded) the launches' table; the old one
  /// goes to \p table, or is kept while captured graphs may read it.
  void swapViews(DeviceBuffer &table);
  /// Waits for this rank's launches, captured replays included.
  Status quiesce();

  ~NcclCommunicatorState() {
    DeviceScope scope(device);
    symmetric.reset(); // On this rank's device; collective when registered.
    for (void *p : ipcMapped)
      cudaIpcCloseMemHandle(p);
    for (char *p : retired)
      cudaFree(p);
    if (lastLaunch)
      cudaEventDestroy(lastLaunch);
    if (setupStream)
      cudaStreamDestroy(setupStream);
  }

  /// Waits for \p stream, watching the communicator for NCCL's errors.
  Status waitNccl(cudaStream_t stream) {
    for (;;) {
      cudaError_t err = cudaStreamQuery(stream);
      if (err == cudaSuccess)
        return Status::success();
      if (err != cudaErrorNotReady)
        return cudaFail("an exchange between the ranks failed", err);
      ncclResult_t async = ncclSuccess;
      ncclResult_t r = ncclCommGetAsyncError(comm, &async);
      if (r != ncclSuccess || async != ncclSuccess)
        return Status::error("an exchange between the ranks failed: " +
                             ncclText(r != ncclSuccess ? r : async));
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  /// ncclAllGather of \p bytes from every rank into \p all (rank by rank).
  Status allGather(const void *mine, size_t bytes, std::vector<uint8_t> &all) {
    all.assign(bytes * nranks, 0);
    if (bytes == 0)
      return Status::success();
    cudaError_t err;
    if ((err = exchange.reserve(bytes * (uint64_t(nranks) + 1))) ||
        (err = cudaMemcpyAsync(exchange.ptr, mine, bytes, cudaMemcpyHostToDevice, setupStream)))
      return cudaFail("cannot stage an exchange between the ranks", err);
    if (ncclResult_t r =
            ncclAllGather(exchange.ptr, exchange.ptr + bytes, bytes, ncclUint8, comm, setupStream))
      return Status::error("ncclAllGather failed: " + ncclText(r));
    if (Status st = waitNccl(setupStream); !st)
      return st;
    if ((err = cudaMemcpyAsync(all.data(), exchange.ptr + bytes, all.size(), cudaMemcpyDeviceToHost,
                               setupStream)) ||
        (err = cudaStreamSynchronize(setupStream)))
      return cudaFail("cannot read an exchange between the ranks", err);
    return Status::success();
  }

  /// Step 1: this rank's part of \p given (or its error), alone; fills
  /// \p hello.
  Status prepare(const Result<ValidatedPlan> &given, PeerHello &hello);
  /// Step 3: the connection memory of the chosen transport; fills \p mine.
  Status allocate(const std::vector<PeerHello> &hellos, PeerMemory &mine);
  /// Step 5: reaches the peers and uploads the FIFO table.
  Status connect(const std::vector<PeerHello> &hellos, const std::vector<PeerMemory> &memories,
                 const ConnectionMatch &match);
  /// Collective: \p mine, or an error when another rank failed to \p what.
  Status agree(const Status &mine, const char *what);
  /// Reads the device's error record once this rank's runs are done.
  Status collect(bool block);
};

Status NcclCommunicatorState::prepare(const Result<ValidatedPlan> &given, PeerHello &hello) {
  const NcclOptions &o = options;
  if (Status s = checkThreadsPerBlock(o.threadsPerBlock); !s)
    return s;
  if (o.sliceBytes < 16)
    return Status::error("the slice must be at least 16 bytes");
  if (!(o.timeoutSeconds > 0) || o.timeoutSeconds > 1e9)
    return Status::error("the timeout must be in (0, 1e9] seconds");
  if (uint32_t(o.transport) > uint32_t(NcclTransport::Symmetric))
    return Status::error(cat("unknown transport ", uint32_t(o.transport)));
  if (!given)
    return given.getStatus();
  const ValidatedPlan &whole = given.value();
  hello.nranks = whole.info().nranks;
  if (whole.info().nranks != nranks)
    return Status::error(
        cat("the plan has ", whole.info().nranks, " ranks but the NCCL communicator has ", nranks));
  if (!whole.section(rank))
    return Status::error(cat("the plan was loaded for rank ", whole.plan().loadedRank,
                             ", but this is rank ", rank, " of the NCCL communicator"));

  // This rank's section, and the plan's identity: the checksum of the
  // file every rank loaded, whole or for itself.
  validated = whole;
  hello.plan = whole.checksum();
  plan.info = whole.info();
  plan.ranks = {*whole.section(rank)};
  plan.loadedRank = int32_t(rank);
  sections = {{rank, &plan.ranks[0]}};
  tables = buildLaunchTables(plan.info, sections);
  numBlocks = uint32_t(tables.tbs.size());
  slotStride = maxPieceStride(o.sliceBytes);

  // Which peers loads and stores reach; the others go over the network
  // (the symmetric transport only: with IPC, such a peer is an error).
  // Without an answer from NCCL, IPC takes every peer for one on this node
  // (and fails to map one that is not).
  Result<std::vector<int32_t>> lsa = queryLsaRanks(comm);
  if (lsa) {
    lsaRanks = std::move(*lsa);
  } else if (o.transport == NcclTransport::Symmetric) {
    return lsa.getStatus();
  } else {
    lsaRanks.resize(nranks);
    for (uint32_t p = 0; p < nranks; ++p)
      lsaRanks[p] = int32_t(p);
  }
  if (lsaRanks.size() != nranks)
    return Status::error(
        cat("NCCL reports ", lsaRanks.size(), " ranks in the world team, not ", nranks));
  std::vector<bool> network(nranks);
  for (uint32_t p = 0; p < nranks; ++p)
    network[p] = p != rank && lsaRanks[p] < 0;
  // Connection memory, sized with overflow checks and capped before the
  // ranks meet (a failure here fails every rank's setup).
  Result<ConnectionLayout> laidOut =
      layoutConnections(tables, plan.ranks[0], rank, slotStride, network);
  if (!laidOut)
    return Status::error("invalid plan: " + laidOut.message());
  connections = std::move(*laidOut);
  if (Status st = checkConnectionMemory(connections, rank, o.memoryLimitBytes); !st)
    return st;
  std::vector<bool> offNode(nranks);
  for (const ConnectionEntry &e : connections.entries)
    if (e.network && !offNode[e.peer]) {
      offNode[e.peer] = true;
      ++networkPeers;
    }
  hello.offNode = networkPeers;
  hello.signals = connections.signals;
  hello.bytes = connections.bytes;
  hello.numEntries = uint32_t(connections.entries.size());

  // Tables, counters, and the residency of every CTA at once.
  cudaError_t err;
  if ((err = upload(tbTable, tables.tbs)) || (err = upload(stepTable, tables.steps)) ||
      (err = upload(depTable, tables.deps)) ||
      (err = progress.reserve(uint64_t(numBlocks) * kCounterStride * 8)) ||
      (err = abortFlag.reserve(sizeof(unsigned int))) ||
      (err = error.reserve(sizeof(DeviceError))) ||
      (err = rankBufferTable.reserve(numBufferKinds() * sizeof(char *))) ||
      (err = launchState.reserve(2 * sizeof(uint64_t))) ||
      (err = cudaMemsetAsync(launchState.ptr, 0, launchState.bytes, setupStream)) ||
      (err = cudaMemsetAsync(progress.ptr, 0, progress.bytes, setupStream)) ||
      (err = cudaMemsetAsync(abortFlag.ptr, 0, abortFlag.bytes, setupStream)) ||
      (err = cudaMemsetAsync(error.ptr, 0, error.bytes, setupStream)) ||
      (err = upload(directTable, tables.directSteps)) ||
      (err = directCount.reserve(sizeof(unsigned long long))) ||
      (err = cudaMemsetAsync(directCount.ptr, 0, directCount.bytes, setupStream)))
    return cudaFail("cannot allocate device memory for the plan", err);
  int perSm = 0, sms = 0, coop = 0;
  if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) ||
      (err = cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device)))
    return cudaFail("cannot query the device", err);
  if (!coop && o.cooperative)
    return Status::error("the device cannot launch cooperative grids, which the executor "
                         "needs to keep every threadblock resident");
  // The kernel with the most registers of those this rank may launch.
  std::vector<KernelFn> kernels = {selectKernel(DataType::Float32, RedOp::Sum)};
  if (networkPeers && haveGin())
    kernels.push_back(selectGinKernel(DataType::Float32, RedOp::Sum));
  for (KernelFn fn : kernels) {
    if ((err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
             &perSm, reinterpret_cast<const void *>(fn), int(o.threadsPerBlock),
             tables.sharedSteps * sizeof(Instruction))))
      return cudaFail("cannot compute the kernel's occupancy", err);
    if (numBlocks > uint32_t(perSm) * uint32_t(sms))
      return Status::error(cat("rank ", rank, " needs ", numBlocks,
                               " threadblocks resident at once, but the device holds at most ",
                               uint32_t(perSm) * uint32_t(sms), " CTAs of ", o.threadsPerBlock,
                               " threads"));
  }
  return Status::success();
}

Status NcclCommunicatorState::allocate(const std::vector<PeerHello> &hellos, PeerMemory &mine) {
  cudaError_t err;
  if (transport == NcclTransport::Ipc) {
    const uint64_t bytes = connections.bytes;
    if ((err = connection.reserve(bytes)) ||
        (err = cudaMemsetAsync(connection.ptr, 0, bytes, setupStream)) ||
        (err = cudaStreamSynchronize(setupStream)))
      return cudaFail(cat("cannot allocate ", bytes, " bytes of connection memory"), err);
    cudaIpcMemHandle_t handle;
    static_assert(sizeof handle <= sizeof mine.ipc, "an IPC handle fits the record");
    if ((err = cudaIpcGetMemHandle(&handle, connection.ptr)))
      return cudaFail("cannot export the connection memory with CUDA IPC", err);
    std::memcpy(mine.ipc, &handle, sizeof handle);
    mine.base = reinterpret_cast<uintptr_t>(connection.ptr);
    return Status::success();
  }
  // One window of the same size everywhere: the largest any rank needs.
  uint64_t most = 0;
  for (const PeerHello &h : hellos)
    most = std::max(most, h.bytes);
  Result<std::unique_ptr<SymmetricMemory>> m = SymmetricMemory::allocate(comm, most, setupStream);
  if (!m)
    return m.getStatus();
  symmetric = std::move(*m);
  mine.base = reinterpret_cast<uintptr_t>(symmetric->base());
  return Status::success();
}

Status NcclCommunicatorState::connect(const std::vector<PeerHello> &hellos,
                                      const std::vector<PeerMemory> &memories,
                                      const ConnectionMatch &match) {
  std::vector<PeerReference> refs = resolveConnections(tables, connections, match);
  std::vector<char *> pointers(refs.size());
  if (transport == NcclTransport::Symmetric) {
    Result<std::vector<char *>> r = symmetric->resolve(refs, lsaRanks, setupStream);
    if (!r)
      return r.getStatus();
    pointers = std::move(*r);
  } else {
    // Each peer's connection memory in this process: the same pointer for
    // a peer of this process (through peer access), else an IPC mapping.
    std::vector<char *> peerBase(nranks, nullptr);
    auto map = [&](uint32_t p) -> Result<char *> {
      if (peerBase[p])
        return peerBase[p];
      const PeerHello &h = hellos[p];
      cudaError_t err;
      if (h.processToken == processToken()) {
        if (h.device != device) {
          int can = 0;
          if ((err = cudaDeviceCanAccessPeer(&can, device, h.device)))
            return cudaFail("cannot query peer access", err);
          if (!can)
            return Status::error(cat("device ", device, " of rank ", rank, " cannot access device ",
                                     h.device, " of rank ", p));
          err = cudaDeviceEnablePeerAccess(h.device, 0);
          if (err == cudaErrorPeerAccessAlreadyEnabled)
            cudaGetLastError();
          else if (err)
            return cudaFail(cat("cannot enable access to device ", h.device, " of rank ", p), err);
        }
        peerBase[p] = reinterpret_cast<char *>(uintptr_t(memories[p].base));
      } else {
        cudaIpcMemHandle_t handle;
        std::memcpy(&handle, memories[p].ipc, sizeof handle);
        void *ptr = nullptr;
        if ((err = cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess)))
          return cudaFail(cat("cannot map rank ", p, "'s connection memory with CUDA IPC"), err);
        ipcMapped.push_back(ptr);
        ++ipcPeers;
        peerBase[p] = static_cast<char *>(ptr);
      }
      return peerBase[p];
    };
    for (size_t k = 0; k < refs.size(); ++k) {
      Result<char *> b = map(refs[k].peer);
      if (!b)
        return b.getStatus();
      pointers[k] = *b + refs[k].offset;
    }
  }
  applyPeerPointers(tables, refs, pointers);
  if (cudaError_t err = upload(fifoTable, tables.fifos))
    return cudaFail("cannot upload the connection table", err);
  return Status::success();
}

Status NcclCommunicatorState::agree(const Status &mine, const char *what) {
  uint32_t failed = mine ? 0 : 1;
  std::vector<uint8_t> bytes;
  if (Status x = allGather(&failed, sizeof failed, bytes); !x)
    return mine ? x : mine;
  if (!mine)
    return mine;
  std::vector<uint32_t> others;
  for (uint32_t r = 0; r < nranks; ++r) {
    uint32_t f;
    std::memcpy(&f, bytes.data() + r * sizeof f, sizeof f);
    if (f)
      others.push_back(r);
  }
  if (!others.empty())
    return Status::error(cat(formatRanks(others), " could not ", what, " (see ",
                             others.size() > 1 ? "their errors)" : "its error)"));
  return Status::success();
}

Result<std::unique_ptr<NcclCommunicator>>
NcclCommunicator::create(const Plan &plan, ncclComm_t comm, const NcclOptions &options) {
  // The communicator keeps the plan: a copy, validated once (a section
  // loaded for one rank and left as parsed keeps its file's checksum,
  // Plan::sourceChecksum).
  return join(ValidatedPlan::make(plan), comm, options);
}

Result<std::unique_ptr<NcclCommunicator>>
NcclCommunicator::create(const ValidatedPlan &plan, ncclComm_t comm, const NcclOptions &options) {
  return join(plan, comm, options);
}

Result<std::unique_ptr<NcclCommunicator>> NcclCommunicator::join(const Result<ValidatedPlan> &plan,
                                                                 ncclComm_t comm,
                                                                 const NcclOptions &options) {
  if (!comm)
    return Status::error("the NCCL communicator is null");
  auto st = std::make_unique<NcclCommunicatorState>();
  st->options = options;
  st->comm = comm;
  int count = 0, rank = 0;
  if (ncclResult_t r = ncclCommCount(comm, &count))
    return Status::error("cannot query the NCCL communicator: " + ncclText(r));
  if (ncclResult_t r = ncclCommUserRank(comm, &rank))
    return Status::error("cannot query the NCCL communicator: " + ncclText(r));
  if (ncclResult_t r = ncclCommCuDevice(comm, &st->device))
    return Status::error("cannot query the NCCL communicator: " + ncclText(r));
  st->nranks = uint32_t(count);
  st->rank = uint32_t(rank);
  DeviceScope scope(st->device);
  cudaError_t err;
  if ((err = cudaStreamCreateWithFlags(&st->setupStream, cudaStreamNonBlocking)) ||
      (err = cudaEventCreateWithFlags(&st->lastLaunch, cudaEventDisableTiming)))
    return cudaFail("cannot create a stream", err);

  // 1 and 2: prepare alone, then meet.
  PeerHello hello;
  hello.rank = st->rank;
  hello.sliceBytes = options.sliceBytes;
  hello.processToken = processToken();
  hello.device = st->device;
  hello.transport = uint32_t(options.transport);
  Status prepared = st->prepare(plan, hello);
  if (!prepared) {
    hello.failed = 1;
    hello.numEntries = 0;
  }
  std::vector<uint8_t> bytes;
  if (Status x = st->allGather(&hello, sizeof hello, bytes); !x)
    return prepared ? x : prepared;
  std::vector<PeerHello> hellos(st->nranks);
  std::memcpy(hellos.data(), bytes.data(), bytes.size());
  if (!prepared)
    return prepared;
  if (Status x = checkHellos(hellos); !x)
    return x;
  Result<NcclTransport> transport = chooseTransport(hellos);
  if (!transport)
    return transport.getStatus();
  st->transport = *transport;

  // 3: connection memory, then where everyone's is.
  PeerMemory mine;
  Status allocated = st->allocate(hellos, mine);
  mine.failed = allocated ? 0 : 1;
  if (Status x = st->allGather(&mine, sizeof mine, bytes); !x)
    return allocated ? x : allocated;
  if (!allocated)
    return allocated;
  std::vector<PeerMemory> memories(st->nranks);
  std::memcpy(memories.data(), bytes.data(), bytes.size());
  std::vector<uint32_t> failed;
  for (uint32_t r = 0; r < st->nranks; ++r)
    if (memories[r].failed)
      failed.push_back(r);
  if (!failed.empty())
    return Status::error(cat(formatRanks(failed), " could not allocate ",
                             failed.size() > 1 ? "their" : "its", " connection memory (see ",
                             failed.size() > 1 ? "their" : "its", " error)"));
  char *base = st->connection.ptr;
  if (st->transport == NcclTransport::Symmetric) {
    // Collective: GIN signals for the network's connections (the most any
    // rank needs), then the window.
    uint32_t signals = 0;
    for (const PeerHello &h : hellos)
      signals = std::max(signals, h.signals);
    if (Status x = st->agree(st->symmetric->createDeviceComm(signals),
                             "create NCCL's device communicator");
        !x)
      return x;
    if (Status x = st->agree(st->symmetric->registerWindow(st->setupStream),
                             "register the symmetric window");
        !x)
      return x;
    base = st->symmetric->base();
  }
  bindLocalConnections(st->tables, st->connections, base);

  // 4: connection entries, padded to the most any rank has.
  uint32_t most = 0;
  for (const PeerHello &h : hellos)
    most = std::max(most, h.numEntries);
  std::vector<ConnectionEntry> padded(most);
  std::copy(st->connections.entries.begin(), st->connections.entries.end(), padded.begin());
  if (Status x = st->allGather(padded.data(), most * sizeof(ConnectionEntry), bytes); !x)
    return x;
  std::vector<std::vector<ConnectionEntry>> all(st->nranks);
  for (uint32_t r = 0; r < st->nranks; ++r) {
    all[r].resize(hellos[r].numEntries);
    std::memcpy(all[r].data(), bytes.data() + uint64_t(r) * most * sizeof(ConnectionEntry),
                all[r].size() * sizeof(ConnectionEntry));
  }
  Result<ConnectionMatch> match = matchConnections(all, st->rank);
  if (!match)
    return match.getStatus();

  // 5 and 6: connect, then agree that everyone did.
  if (Status x = st->agree(st->connect(hellos, memories, *match), "reach their peers' memory"); !x)
    return x;
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(st)));
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<NcclCommunicatorState> state)
    : s(std::move(state)) {}

NcclCommunicator::~NcclCommunicator() {
  NcclCommunicatorState &w = *s;
  DeviceScope scope(w.device);
  // Peers write this rank's counters up to their last step (a receiver
  // hands a slot back after its last message): free nothing before every
  // rank's runs are over. Replays of captured launches may be on any
  // stream: the whole device.
  if (w.captured)
    cudaDeviceSynchronize();
  else if (w.launched)
    cudaEventSynchronize(w.lastLaunch);
  uint64_t sliceBase = 0;
  if ((w.launched || w.captured) &&
      (cudaMemcpyAsync(&sliceBase, w.launchState.ptr, sizeof sliceBase, cudaMemcpyDeviceToHost,
                       w.setupStream) != cudaSuccess ||
       cudaStreamSynchronize(w.setupStream) != cudaSuccess)) {
    cudaGetLastError();
    sliceBase = 0;
  }
  if ((w.launched || w.captured) && w.symmetric && w.networkPeers) {
    // The slots freed after this rank's last sends come back as signals
    // that may land after the kernels end: wait for them before the
    // signals go back to NCCL.
    std::vector<std::pair<uint32_t, uint64_t>> owed;
    for (const RemoteSend &rs : w.tables.remoteSends) {
      const FifoDesc &f = w.tables.fifos[rs.fifo];
      if (f.netPeer != kNoNetPeer)
        owed.push_back({f.headSignal, sliceBase * w.tables.tbs[rs.block].sendsPerSlice});
    }
    (void)w.symmetric->drainSignals(owed, w.options.timeoutSeconds, w.setupStream);
  }
  uint32_t token = 1;
  std::vector<uint8_t> bytes;
  if (!w.allGather(&token, sizeof token, bytes)) {
    // A peer may still write here; leaking is safer than reuse (and the
    // window's deregistration is collective).
    w.connection.ptr = nullptr;
    w.connection.bytes = 0;
    (void)w.symmetric.release();
  }
}

Status NcclCommunicatorState::quiesce() {
  cudaError_t err = cudaSuccess;
  if (captured)
    err = cudaDeviceSynchronize();
  else if (launched)
    err = cudaEventSynchronize(lastLaunch);
  if (err)
    return cudaFail("a previous launch failed", err);
  return Status::success();
}

void NcclCommunicatorState::swapViews(DeviceBuffer &table) {
  // A captured launch reads the table it was captured with: keep it.
  if (captured && viewTable.ptr) {
    retired.push_back(viewTable.ptr);
    viewTable.ptr = nullptr;
    viewTable.bytes = 0;
  }
  std::swap(viewTable.ptr, table.ptr);
  std::swap(viewTable.bytes, table.bytes);
}

Status NcclCommunicator::registerWindow(void *buff, uint64_t bytes, ncclWindow_t window) {
  NcclCommunicatorState &w = *s;
  DeviceScope scope(w.device);
  // Every rank's window: where it lies in its owner's address space.
  struct Record {
    uint64_t base = 0, bytes = 0;
  } mine{reinterpret_cast<uintptr_t>(buff), bytes};
  RelaxedCapture relaxed; // Another thread may be capturing in the global mode.
  Status ok = w.failure ? *w.failure : w.quiesce();
  if (ok && (!buff || !bytes || !window))
    ok = Status::error("the window to read in place is null or empty");
  if (ok && mine.base > ~uint64_t(0) - bytes)
    ok = Status::error("the window to read in place wraps around the address space");
  std::vector<uint8_t> gathered;
  if (Status x = w.allGather(&mine, sizeof mine, gathered); !x)
    return ok ? x : ok;
  std::vector<Record> all(w.nranks);
  std::memcpy(all.data(), gathered.data(), gathered.size());
  // Where this rank's receivers read each peer's part: NCCL's mapping for
  // the LSA peers, the buffer itself for this rank.
  std::vector<DirectView> added;
  if (ok) {
    std::vector<uint32_t> peers;
    std::vector<int32_t> lsaPeers;
    for (uint32_t p = 0; p < w.nranks; ++p)
      if (p != w.rank && p < w.lsaRanks.size() && w.lsaRanks[p] >= 0) {
        peers.push_back(p);
        lsaPeers.push_back(w.lsaRanks[p]);
      }
    Result<std::vector<char *>> bases = lsaWindowBases(window, lsaPeers, w.setupStream);
    if (!bases) {
      ok = bases.getStatus();
    } else {
      for (size_t i = 0; i < peers.size() && ok; ++i) {
        if (!all[peers[i]].bytes)
          continue;
        if (!(*bases)[i])
          ok = Status::error(cat("NCCL maps no part of rank ", peers[i], "'s window here"));
        added.push_back({all[peers[i]].base, all[peers[i]].bytes, (*bases)[i], peers[i], 0});
      }
      added.push_back({mine.base, mine.bytes, static_cast<char *>(buff), w.rank, 0});
    }
  }
  // The new table, uploaded before the ranks agree: a rank that cannot
  // upload it fails the registration everywhere, and nothing changes.
  std::vector<DirectView> views = w.views;
  std::vector<ncclWindow_t> viewWindow = w.viewWindow;
  for (const DirectView &v : added) {
    views.push_back(v);
    viewWindow.push_back(window);
  }
  DeviceBuffer table;
  if (ok)
    if (cudaError_t err = upload(table, views))
      ok = cudaFail("cannot upload the registered windows' views", err);
  if (Status x = w.agree(ok, "read a registered window in place"); !x)
    return x;
  w.windows.push_back({window, mine.base, mine.bytes});
  w.views = std::move(views);
  w.viewWindow = std::move(viewWindow);
  w.swapViews(table);
  return Status::success();
}

Status NcclCommunicator::deregisterWindow(ncclWindow_t window) {
  NcclCommunicatorState &w = *s;
  DeviceScope scope(w.device);
  auto it =
      std::find_if(w.windows.begin(), w.windows.end(),
                   [&](const NcclCommunicatorState::Window &x) { return x.window == window; });
  if (it == w.windows.end())
    return Status::success();
  // Launches that may read it (and its peers': NCCL's deregistration is
  // collective, so they stop too) finish first.
  RelaxedCapture relaxed;
  Status done = w.quiesce();
  w.windows.erase(it);
  for (size_t i = w.views.size(); i-- > 0;)
    if (w.viewWindow[i] == window) {
      w.views.erase(w.views.begin() + i);
      w.viewWindow.erase(w.viewWindow.begin() + i);
    }
  // The new table, whole, replaces the old one.
  DeviceBuffer table;
  if (cudaError_t err = upload(table, w.views)) {
    // The old table holds views that are gone, and the ranks must agree
    // on whether their launches read marks: this rank runs no more (its
    // peers' next launches time out, naming it).
    w.failure = cudaFail("cannot upload the registered windows' views", err);
    return *w.failure;
  }
  w.swapViews(table);
  return done;
}

uint32_t NcclCommunicator::windows() const {
  return uint32_t(s->windows.size());
}

uint64_t NcclCommunicator::directMessages() const {
  DeviceScope scope(s->device);
  return readDeviceCounter(s->directCount);
}

uint32_t NcclCommunicator::rank() const {
  return s->rank;
}
uint32_t NcclCommunicator::size() const {
  return s->nranks;
}
int NcclCommunicator::device() const {
  return s->device;
}
uint32_t NcclCommunicator::numBlocks() const {
  return s->numBlocks;
}
const Plan &NcclCommunicator::plan() const {
  return s->plan;
}
uint64_t NcclCommunicator::planChecksum() const {
  return s->validated ? s->validated->checksum() : 0;
}
uint32_t NcclCommunicator::ipcPeers() const {
  return s->ipcPeers;
}
NcclTransport NcclCommunicator::transport() const {
  return s->transport;
}
uint32_t NcclCommunicator::networkPeers() const {
  return s->networkPeers;
}

Status NcclCommunicator::launch(const void *sendbuf, void *recvbuf, uint64_t count, DataType type,
                                RedOp op, cudaStream_t stream) {
  NcclCommunicatorState &w = *s;
  if (w.failure)
    return Status::error("an earlier run failed (" + w.failure->message() +
                         "); the communicator cannot run again");
  // This rank's call, prepared as every executor's is.
  CallOptions callOptions = launchCallOptions(w.options.sliceBytes, type);
  callOptions.worldRanks = w.nranks;
  callOptions.worldName = "communicator";
  // Its connections run Simple: their slots live in memory registered
  // with NCCL when the communicator is made, laid out for Simple.
  callOptions.protocol.force = true;
  callOptions.protocol.forced = ProtocolKind::Simple;
  callOptions.ownSectionSuffices = true;
  const PreparedCall call =
      prepareCall(*w.validated, w.rank, {sendbuf, recvbuf, count, type, op}, callOptions);
  if (call.error)
    return call.error.status();
  if (count == 0)
    return Status::success();
  // The GIN kernel where this rank has peers over the network (its
  // occupancy was checked in prepare()).
  const void *network = w.symmetric && w.networkPeers ? w.symmetric->networkParams() : nullptr;
  const KernelFn fn = network ? selectGinKernel(type, op) : selectKernel(type, op);
  assert(fn && "prepareCall() accepts only the types and operators of a kernel");
  DeviceScope scope(w.device);
  const size_t es = call.elementSize;
  const SliceShape shape =
      sliceShape(count, w.validated->chunksPerUnit(), w.options.sliceBytes, es);
  const ChunkLayout &layout = shape.layout;
  assert(layout.sliceElements == call.layout.sliceElements &&
         layout.numSlices == call.layout.numSlices && "one slice shape");
  assert(shape.pieceStride <= w.slotStride && "slots are sized for the largest slice");

  // A launch captured into a CUDA graph (the stream is being captured)
  // runs at each replay with the memory of its capture: its own buffer
  // table, and scratch that is never freed while the communicator lives.
  cudaStreamCaptureStatus captureStatus = cudaStreamCaptureStatusNone;
  cudaError_t err;
  if ((err = cudaStreamIsCapturing(stream, &captureStatus)))
    return cudaFail("cannot tell whether the stream is being captured", err);
  if (captureStatus == cudaStreamCaptureStatusInvalidated)
    return Status::error("the stream's CUDA graph capture has been invalidated");
  const bool capturing = captureStatus == cudaStreamCaptureStatusActive;
  // Allocations and uploads below are outside the capture (the relaxed
  // mode allows them while it goes on).
  RelaxedCapture relaxed(capturing);

  // Scratch and a private input copy for this count; growing frees memory
  // that earlier launches may still use: wait for them first.
  MemoryCap cap;
  cap.limitBytes = w.options.memoryLimitBytes;
  cap.option = "NcclOptions::memoryLimitBytes";
  cap.bufferBytes = call.inputBytes + call.outputBytes; // Below 2^63: prepareCall().
  cap.heldBytes = w.connections.bytes;
  cap.heldWhat = cat("rank ", w.rank, "'s connection memory");
  Result<LaunchMemory> memory = layoutLaunchMemory(w.tables, w.sections, layout, shape.pieceStride,
                                                   es, /*slots=*/false, {call.copyBytes}, cap);
  if (!memory)
    return memory.getStatus();
  const uint64_t scratchBytes = memory->scratchBytes, copyBytes = memory->copyBytes;
  if (scratchBytes > w.scratchMemory.bytes || copyBytes > w.inputCopies.bytes) {
    if (w.launched && (err = cudaEventSynchronize(w.lastLaunch)))
      return cudaFail("a previous launch failed", err);
    // A graph may replay with the memory it was captured with: keep it.
    auto keep = [&](DeviceBuffer &grown, uint64_t want) {
      if (w.captured && grown.ptr && want > grown.bytes) {
        w.retired.push_back(grown.ptr);
        grown.ptr = nullptr;
        grown.bytes = 0;
      }
    };
    keep(w.scratchMemory, scratchBytes);
    keep(w.inputCopies, copyBytes);
    if ((err = w.scratchMemory.reserve(scratchBytes)) || (err = w.inputCopies.reserve(copyBytes)))
      return cudaFail(
          cat("cannot allocate ", scratchBytes + copyBytes, " bytes of scratch and staging memory"),
          err);
  }

  // The plan's Input and Output as the prepared call places them, copies
  // on the stream.
  const DeviceBinding b = bindCall(call, w.inputCopies.ptr);
  for (const kernels::StagingCopy &c : b.before)
    if ((err = cudaMemcpyAsync(c.to, c.from, c.bytes, cudaMemcpyDeviceToDevice, stream)))
      return cudaFail(cat("cannot stage rank ", w.rank, "'s input"), err);
  std::vector<char *> table(numBufferKinds());
  table[unsigned(BufferKind::Input)] = b.input;
  table[unsigned(BufferKind::Output)] = b.output;
  table[unsigned(BufferKind::Scratch)] = w.scratchMemory.ptr;
  char **bufferTable = nullptr;
  if (capturing) {
    // Its own table, written now, outside the graph.
    auto [it, fresh] = w.capturedTables.try_emplace(table);
    if (fresh) {
      const size_t bytes = table.size() * sizeof(char *);
      if ((err = it->second.reserve(bytes)) ||
          (err = cudaMemcpyAsync(it->second.ptr, table.data(), bytes, cudaMemcpyHostToDevice,
                                 w.setupStream)) ||
          (err = cudaStreamSynchronize(w.setupStream))) {
        w.capturedTables.erase(it);
        return cudaFail("cannot upload the buffer table of a captured launch", err);
      }
    }
    bufferTable = it->second.as<char *>();
  } else if (table != w.rankBuffers) {
    // From pageable memory: staged before the call returns, ordered on the
    // stream before the kernel.
    if ((err = cudaMemcpyAsync(w.rankBufferTable.ptr, table.data(), table.size() * sizeof(char *),
                               cudaMemcpyHostToDevice, stream)))
      return cudaFail("cannot upload the buffer table", err);
    w.rankBuffers = table;
  }

  // Direct sends from the Input and Output that lie in this rank's
  // registered windows. Every rank has the same windows (registration is
  // collective), so every rank's launch reads the slots' marks, or none.
  DirectLaunch direct;
  if (!w.windows.empty()) {
    auto inWindow = [&](const char *p, uint64_t bytes) {
      const uint64_t at = reinterpret_cast<uintptr_t>(p);
      for (const NcclCommunicatorState::Window &win : w.windows)
        if (at >= win.base && at - win.base <= win.bytes && bytes <= win.bytes - (at - win.base))
          return true;
      return false;
    };
    direct.steps = w.directTable.as<uint8_t>();
    direct.received = w.directCount.as<unsigned long long>();
    direct.views = w.viewTable.as<DirectView>();
    direct.numViews = uint32_t(w.views.size());
    if (inWindow(b.input, call.inputBytes))
      direct.buffers |= 1u << unsigned(BufferKind::Input);
    if (inWindow(b.output, call.outputBytes))
      direct.buffers |= 1u << unsigned(BufferKind::Output);
  }

  // Peers on other GPUs: .sys-scope fences and counters (DeviceSync.cuh).
  // The slice base lives in device memory: every rank advances by the same
  // slices, given the same count and type, replays included.
  if ((err = launchInterpreter(w, fn, layout, shape.pieceStride, /*systemScope=*/true, stream,
                               network, /*trace=*/nullptr, /*traceSteps=*/0, ProtocolKind::Simple,
                               /*stages=*/nullptr, /*stageBytes=*/0, w.launchState.as<uint64_t>(),
                               bufferTable, direct)))
    return cudaFail(capturing ? "cannot capture the interpreter kernel"
                              : "cannot launch the interpreter kernel",
                    err);

  // Finish: results computed away from the user's output, then Avg.
  for (const kernels::StagingCopy &c : b.after)
    if ((err = cudaMemcpyAsync(c.to, c.from, c.bytes, cudaMemcpyDeviceToDevice, stream)))
      return cudaFail("cannot copy a result out", err);
  if (call.divideByRanks && (err = launchDivide(type, recvbuf, count, w.nranks, stream)))
    return cudaFail("cannot launch the division of avg", err);
  if (capturing) {
    w.captured = true;
    return Status::success();
  }
  if ((err = cudaEventRecord(w.lastLaunch, stream)))
    return cudaFail("cannot record the launch", err);
  w.launched = true;
  return Status::success();
}

Status NcclCommunicatorState::collect(bool block) {
  if (failure)
    return *failure;
  if (!launched && !captured)
    return Status::success();
  DeviceScope scope(device);
  if (launched) {
    cudaError_t err = block ? cudaEventSynchronize(lastLaunch) : cudaEventQuery(lastLaunch);
    // Replays of captured launches are not waited for: their failures are
    // read from the record as they happen.
    if (err == cudaErrorNotReady && !captured)
      return Status::success();
    if (err && err != cudaErrorNotReady)
      return cudaFail("the interpreter kernel failed", err);
  }
  // Another thread may be capturing in the global mode (PyTorch's watchdog
  // polls while the main thread captures): this thread's reads are outside
  // any capture.
  RelaxedCapture relaxed;
  cudaError_t err;
  DeviceError e;
  auto read = [&] {
    return (err = cudaMemcpyAsync(&e, error.ptr, sizeof e, cudaMemcpyDeviceToHost, setupStream)) ||
           (err = cudaStreamSynchronize(setupStream));
  };
  if (read())
    return cudaFail("cannot read the device's error record", err);
  if (captured) {
    // A replay may still run: CTAs that stop because another failed count
    // themselves before the failing one has claimed the record, and the
    // claimer fills it after claiming it. Nothing claimed yet: nothing to
    // say yet; claimed: read it again once it is whole.
    if (!e.claimed)
      return Status::success();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (read())
      return cudaFail("cannot read the device's error record", err);
  }
  if (!e.claimed && !e.abortedCtas)
    return Status::success();
  failure = e.claimed ? describeDeviceFailure(e, tables, sections, plan.info.connectionDepth,
                                              options.timeoutSeconds)
                      : Status::error("the run stopped without a recorded failure");
  return *failure;
}

Status NcclCommunicator::wait(cudaStream_t stream) {
  DeviceScope scope(s->device);
  if (cudaError_t err = cudaStreamSynchronize(stream))
    return cudaFail("the interpreter kernel failed", err);
  return s->collect(true);
}

Status NcclCommunicator::check() {
  return s->collect(false);
}

Status NcclCommunicator::run(const void *sendbuf, void *recvbuf, uint64_t count, DataType type,
                             RedOp op, cudaStream_t stream) {
  if (Status st = launch(sendbuf, recvbuf, count, type, op, stream); !st)
    return st;
  return wait(stream);
}

} // namespace coll
