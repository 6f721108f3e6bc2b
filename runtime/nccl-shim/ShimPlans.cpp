//===- ShimPlans.cpp - The calls libcollc_nccl.so may run on Collc --------===//
//
// Built with COLLC_SHIM_RUNS_PLANS (the CUDA kernels and NcclCommunicator
// linked in), the hooks run the selected calls on Collc; built without, they
// forward every call, as every other function of the library does.
//
//===----------------------------------------------------------------------===//

#include "ShimPlans.h"

#include "GroupPattern.h"
#include "RealNccl.h"

#include <cstdio>
#include <optional>
#include <string>

#if COLLC_SHIM_RUNS_PLANS
#include "coll/Kernels/CaptureMode.h"
#include "coll/Kernels/NcclCommunicator.h"
#include "coll/Runtime/Collective.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PlanLibrary.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cuda_runtime_api.h>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>
#endif

namespace collcshim {

namespace {

/// Calls the real \p fn, or its profiling twin \p twinFn when \p twin.
template <class F, class... A>
ncclResult_t forward(F RealNccl::*fn, F RealNccl::*twinFn, bool twin, const char *name, A... a) {
  RealNccl &r = real();
  F f = twin ? r.*twinFn : r.*fn;
  if (f)
    return f(a...);
  return unavailable(twin ? (std::string("p") + name).c_str() : name);
}

#define FORWARD(Name, ...) forward(&RealNccl::Name, &RealNccl::p##Name, twin, #Name, ##__VA_ARGS__)

/// ncclGroupStart()s of this thread not yet ended.
thread_local int groupDepth = 0;

/// The sends and receives of this thread's open group, held back while
/// group patterns are recognised (COLLC_NCCL_GROUPS): at the group's end
/// they run on Collc as the collective they are, or go to NCCL.
thread_local std::vector<P2pOp> heldP2p;

/// A window registered inside the caller's group: NCCL fills its handle
/// only at the group's end.
struct PendingWindow {
  ncclComm_t comm;
  void *buff;
  size_t bytes;
  const ncclWindow_t *made;
};
thread_local std::vector<PendingWindow> pendingWindows;

/// Hands a held send or receive to NCCL as it came in.
ncclResult_t forwardP2p(const P2pOp &op) {
  const bool twin = op.twin;
  return op.send ? FORWARD(ncclSend, op.buffer, op.count, op.type, op.peer, op.comm, op.stream)
                 : FORWARD(ncclRecv, op.buffer, op.count, op.type, op.peer, op.comm, op.stream);
}

} // namespace

#if COLLC_SHIM_RUNS_PLANS

namespace {

using namespace coll;

/// Set while Collc's own set-up calls NCCL (its ncclAllGather and queries
/// reach this library again): those calls go straight to NCCL.
thread_local int insideCollc = 0;

struct InsideCollc {
  InsideCollc() { ++insideCollc; }
  ~InsideCollc() { --insideCollc; }
};

std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? v : "";
}

/// One plan's communicator over an NCCL communicator, or why it could not
/// be made.
struct Runner {
  std::shared_ptr<const ValidatedPlan> plan;
  std::unique_ptr<NcclCommunicator> comm;
  std::string error;
  /// Its last launch, and the stream it was on: a launch on another
  /// stream waits for it (a communicator serves one stream at a time).
  cudaEvent_t last = nullptr;
  cudaStream_t lastStream = nullptr;
  /// Within one CUDA graph capture, its last captured launch: a captured
  /// call on another stream of the same capture waits for it (an edge in
  /// the graph), since the launches share the communicator's counters.
  cudaEvent_t captured = nullptr;
  unsigned long long captureId = 0;
  cudaStream_t capturedStream = nullptr;
  /// The contiguous buffers its send/recv groups' pieces are copied into
  /// and out of (GroupPattern.h): its launches are ordered, so they may
  /// share them.
  void *staging = nullptr;
  size_t stagingBytes = 0;
};

/// The Collc side of one NCCL communicator.
struct CommSide {
  std::mutex mu;
  uint32_t nranks = 0, rank = 0;
  int device = 0;
  /// In the order they were made, which is every rank's order: the
  /// destructors, which are collective, run in it.
  std::vector<Runner> runners;
  /// Device memory standing in for a buffer NCCL lets a rank leave null
  /// (the output of a reduce or gather off the root, the input of a
  /// scatter off the root).
  void *scratch = nullptr;
  size_t scratchBytes = 0;
  /// A call was captured into a CUDA graph: memory it may use is kept
  /// until the side is freed.
  bool captured = false;
  std::vector<void *> retired;
  std::set<std::string> said; ///< Messages printed once.
  /// The windows the job registered (ncclCommWindowRegister), in order: a
  /// communicator made later reads them in place too.
  struct Window {
    void *buff = nullptr;
    size_t bytes = 0;
    ncclWindow_t window = nullptr;
  };
  std::vector<Window> windows;
  /// Aborted while a set-up held the lock: whoever drops the side last
  /// leaves its communicators as they are (their destructors would wait
  /// for peers on an aborted communicator).
  std::atomic<bool> abandoned{false};

  ~CommSide() {
    if (abandoned)
      for (Runner &r : runners)
        (void)r.comm.release();
  }

  /// Prints "collc-nccl: rank R of N: MESSAGE" once.
  void sayOnce(const std::string &message) {
    if (!said.insert(message).second)
      return;
    std::fprintf(stderr, "collc-nccl: rank %u of %u: %s\n", rank, nranks, message.c_str());
  }
};

/// What the library was told to run, and the communicators' Collc sides.
struct Shim {
  std::unique_ptr<PlanLibrary> library; ///< Null: every call goes to NCCL.
  std::string table;                    ///< The selection table's path.
  std::set<std::string> collectives;    ///< Those the table names.
  bool strict = false;
  bool debug = false;
  /// COLLC_NCCL_GROUPS: the send/recv group patterns run as collectives.
  GroupPatterns groups;
  NcclOptions options; ///< timeoutSeconds: COLLC_NCCL_TIMEOUT, else 600 (PyTorch's).
  std::mutex mu;       ///< Guards comms (never held while a side is set up).
  std::map<ncclComm_t, std::shared_ptr<CommSide>> comms;
};

Shim &shim() {
  static Shim *s = [] {
    auto *s = new Shim;
    s->strict = envFlag("COLLC_NCCL_STRICT");
    s->debug = envFlag("COLLC_NCCL_DEBUG");
    s->options.timeoutSeconds = 600; // As PyTorch's process groups wait.
    if (std::string t = env("COLLC_NCCL_TIMEOUT"); !t.empty()) {
      char *end = nullptr;
      double seconds = std::strtod(t.c_str(), &end);
      if (end && !*end && seconds > 0)
        s->options.timeoutSeconds = seconds;
      else
        std::fprintf(stderr,
                     "collc-nccl: COLLC_NCCL_TIMEOUT=%s is not a number of seconds; "
                     "using %g\n",
                     t.c_str(), s->options.timeoutSeconds);
    }
    s->table = env("COLLC_NCCL_SELECT");
    if (s->table.empty() && !env("COLLC_PLANS").empty())
      s->table = env("COLLC_PLANS") + "/collc.select";
    if (s->table.empty())
      return s;
    const std::string own = objectDirectory(reinterpret_cast<const void *>(&shim));
    // Installed beside the library, or in the build tree.
    std::vector<std::string> collc = {own + "/bin/collc", own + "/../../tools/collc/collc"};
    std::vector<std::string> stdlib = {own + "/stdlib"};
#ifdef COLLC_SHIM_SOURCE_STDLIB
    stdlib.push_back(COLLC_SHIM_SOURCE_STDLIB);
#endif
    Result<SelectionTable> table = SelectionTable::load(s->table);
    auto library = std::make_unique<PlanLibrary>(PlanLibraryPaths::fromEnvironment(collc, stdlib),
                                                 /*standardTables=*/false);
    Status loaded = table ? library->setUserTable(s->table) : table.getStatus();
    if (!loaded) {
      std::fprintf(stderr, "collc-nccl: %s; every call goes to NCCL\n", loaded.message().c_str());
      return s;
    }
    for (const std::string &c : table->collectives())
      s->collectives.insert(c);
    s->library = std::move(library);
    if (std::string g = env("COLLC_NCCL_GROUPS"); !g.empty()) {
      std::string error;
      GroupPatterns groups = GroupPatterns::parse(g, error);
      if (!error.empty())
        std::fprintf(stderr, "collc-nccl: COLLC_NCCL_GROUPS=%s: %s; send/recv groups go to NCCL\n",
                     g.c_str(), error.c_str());
      else {
        // Only what a row can run: the others would be held for nothing,
        // and with two ranks which of gather and scatter is asked for
        // decides what a lone send is.
        groups.allToAll = groups.allToAll && s->collectives.count("alltoall");
        groups.gather = groups.gather && s->collectives.count("gather");
        groups.scatter = groups.scatter && s->collectives.count("scatter");
        s->groups = groups;
      }
    }
    return s;
  }();
  return *s;
}

std::optional<DataType> dataTypeOf(ncclDataType_t t) {
  switch (t) {
  case ncclInt8:
    return DataType::Int8;
  case ncclUint8:
    return DataType::Uint8;
  case ncclInt32:
    return DataType::Int32;
  case ncclUint32:
    return DataType::Uint32;
  case ncclInt64:
    return DataType::Int64;
  case ncclUint64:
    return DataType::Uint64;
  case ncclFloat16:
    return DataType::Float16;
  case ncclFloat32:
    return DataType::Float32;
  case ncclFloat64:
    return DataType::Float64;
  case ncclBfloat16:
    return DataType::BFloat16;
  default:
    return std::nullopt; // fp8, or not a type.
  }
}

std::optional<RedOp> redOpOf(ncclRedOp_t op) {
  switch (op) {
  case ncclSum:
    return RedOp::Sum;
  case ncclProd:
    return RedOp::Prod;
  case ncclMax:
    return RedOp::Max;
  case ncclMin:
    return RedOp::Min;
  case ncclAvg:
    return RedOp::Avg;
  default:
    return std::nullopt; // ncclRedOpCreatePreMulSum's.
  }
}

/// The line that says which calls Collc runs on a communicator of
/// \p nranks ranks.
std::string selectionLine(Shim &s, uint32_t nranks) {
  std::vector<SelectionRow> rows = s.library->rowsFor(nranks);
  if (rows.empty())
    return "no row of " + s.table + " names " + std::to_string(nranks) +
           " ranks; every call goes to NCCL";
  std::string line = "Collc runs";
  uint64_t lower = 0;
  std::string previous;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SelectionRow &r = rows[i];
    if (r.collective != previous)
      lower = 0;
    previous = r.collective;
    std::string program = r.program.substr(r.program.rfind('/') + 1);
    line += std::string(i ? "," : "") + " " + r.collective + " " +
            (r.maxBytes == SelectionRow::anyBytes
                 ? (lower ? "above " + formatByteSize(lower) : std::string("of any size"))
                 : "up to " + formatByteSize(r.maxBytes)) +
            " (" + program + ")";
    if (r.maxBytes != SelectionRow::anyBytes)
      lower = std::max(lower, r.maxBytes);
  }
  return line + " (" + s.table + "); every other call goes to NCCL";
}

/// The Collc side of \p comm, made at its first selected call; null when
/// NCCL cannot say its size and rank (the call then goes to NCCL).
std::shared_ptr<CommSide> sideOf(Shim &s, ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(s.mu);
  if (auto it = s.comms.find(comm); it != s.comms.end())
    return it->second;
  int count = 0, rank = 0, device = 0;
  {
    InsideCollc inside;
    const bool twin = false;
    if (FORWARD(ncclCommCount, comm, &count) != ncclSuccess ||
        FORWARD(ncclCommUserRank, comm, &rank) != ncclSuccess ||
        FORWARD(ncclCommCuDevice, comm, &device) != ncclSuccess || count < 1 || rank < 0 ||
        rank >= count)
      return nullptr;
  }
  auto side = std::make_shared<CommSide>();
  side->nranks = uint32_t(count);
  side->rank = uint32_t(rank);
  side->device = device;
  if (rank == 0 || s.debug)
    std::fprintf(stderr, "collc-nccl: communicator of %d ranks (rank %d, device %d): %s\n", count,
                 rank, device, selectionLine(s, side->nranks).c_str());
  s.comms.emplace(comm, side);
  return side;
}

/// The Collc side \p comm has already (null if none).
std::shared_ptr<CommSide> existingSide(Shim &s, ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.comms.find(comm);
  return it == s.comms.end() ? nullptr : it->second;
}

/// Makes \p comm (one of \p side's communicators) read \p win in place,
/// or says once why it cannot. Collective, as NCCL's registration is.
void readInPlace(CommSide &side, NcclCommunicator &comm, const CommSide::Window &win) {
  if (Status x = comm.registerWindow(win.buff, win.bytes, win.window); !x)
    side.sayOnce("a registered window is not read in place: " + x.message());
}

/// Removes \p comm's side from the table and returns it (null if none).
std::shared_ptr<CommSide> takeSide(ncclComm_t comm) {
  Shim &s = shim();
  if (!s.library)
    return nullptr;
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.comms.find(comm);
  if (it == s.comms.end())
    return nullptr;
  std::shared_ptr<CommSide> side = it->second;
  s.comms.erase(it);
  return side;
}

/// Whether \p stream is being captured into a CUDA graph (false when CUDA
/// cannot say).
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

/// Device memory of at least \p bytes on the side's device.
/// Makes \p device current for a scope, and the previous one again after,
/// only where they differ (a thread that is on the communicator's device,
/// as the caller's is, gets no other device's context).
class OnDevice {
public:
  explicit OnDevice(int device) {
    if (cudaGetDevice(&previous) == cudaSuccess && previous != device)
      changed = cudaSetDevice(device) == cudaSuccess;
    cudaGetLastError();
  }
  ~OnDevice() {
    if (changed)
      cudaSetDevice(previous);
  }
  OnDevice(const OnDevice &) = delete;
  OnDevice &operator=(const OnDevice &) = delete;

private:
  int previous = 0;
  bool changed = false;
};

/// \p memory (of \p held bytes) grown to at least \p bytes on the side's
/// device; null with \p error set when it cannot be.
void *grow(CommSide &side, void *&memory, size_t &held, size_t bytes, const char *what,
           std::string &error) {
  if (held >= bytes && memory)
    return memory;
  OnDevice on(side.device);
  if (memory && side.captured)
    side.retired.push_back(memory); // A graph may replay with it.
  else if (memory)
    cudaFree(memory);
  memory = nullptr;
  held = 0;
  cudaError_t e = cudaMalloc(&memory, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    cudaGetLastError();
    memory = nullptr;
    error = "cannot allocate " + std::to_string(bytes) + " bytes for " + what + ": " +
            cudaGetErrorString(e);
    return nullptr;
  }
  held = bytes;
  return memory;
}

void *scratchOf(CommSide &side, size_t bytes, std::string &error) {
  return grow(side, side.scratch, side.scratchBytes, bytes, "a buffer left null", error);
}

/// A call that Collc may run.
struct Call {
  CollectiveKind kind;
  const void *send;
  void *recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  ncclComm_t comm;
  cudaStream_t stream;
  /// A send/recv group run as this collective: its pieces are copied into
  /// and out of contiguous buffers where they do not lie as the
  /// collective's buffers would.
  const GroupCall *group = nullptr;
};

/// Records \p event (made on \p side's device at its first use) on
/// \p stream; false when CUDA refuses.
bool recordOn(CommSide &side, cudaEvent_t &event, cudaStream_t stream) {
  if (!event) {
    OnDevice on(side.device);
    cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  }
  if (event && cudaEventRecord(event, stream) == cudaSuccess)
    return true;
  cudaGetLastError();
  return false;
}

/// A device-to-device copy on the call's stream.
struct PieceCopy {
  void *to;
  const void *from;
  size_t bytes;
};

/// Where a group's collective reads and writes (\p send, \p recv), and
/// the copies before and after its launch: pieces that lie apart go
/// through \p side's staging memory.
std::string placeGroup(CommSide &side, Runner &runner, const GroupCall &g, size_t elementSize,
                       const void *&send, void *&recv, std::vector<PieceCopy> &before,
                       std::vector<PieceCopy> &after) {
  const uint32_t n = side.nranks, me = side.rank;
  const size_t piece = g.count * elementSize;
  // Rank r's piece at base + r * piece for every r.
  auto strided = [&](const auto &at) -> char * {
    char *base = nullptr;
    for (uint32_t r = 0; r < n; ++r) {
      if (!at[r])
        return nullptr;
      char *p = static_cast<char *>(const_cast<void *>(static_cast<const void *>(at[r])));
      if (!base)
        base = p - uint64_t(r) * piece;
      else if (p != base + uint64_t(r) * piece)
        return nullptr;
    }
    return base;
  };
  size_t inBytes = 0, outBytes = 0;
  char *in = nullptr, *out = nullptr;
  const bool root = g.kind != GroupKind::AllToAll && uint32_t(g.root) == me;
  // The plan moves this rank's own piece where it reads its whole input
  // and writes its whole output (an all-to-all, a gather's or a scatter's
  // root); elsewhere the group's copy to itself is a copy of its own.
  const bool selfByPlan = g.kind == GroupKind::AllToAll || root;
  switch (g.kind) {
  case GroupKind::AllToAll:
    if (!(in = strided(g.sendFrom)))
      inBytes = n * piece;
    if (!(out = strided(g.recvInto)))
      outBytes = n * piece;
    break;
  case GroupKind::Gather:
    // At the root the output is staged, so that the root's own slot, which
    // PyTorch fills itself when the group has no copy to itself, is left
    // alone; its input is its own piece, or any memory.
    if (root) {
      in = static_cast<char *>(const_cast<void *>(g.sendFrom[me]));
      inBytes = in ? 0 : piece;
      outBytes = n * piece;
    } else {
      in = static_cast<char *>(const_cast<void *>(g.sendFrom[uint32_t(g.root)]));
    }
    break;
  case GroupKind::Scatter:
    // At the root the input is staged (its own piece from the group's copy
    // to itself, if any), and the output is its own piece, or any memory.
    if (root) {
      inBytes = n * piece;
      out = static_cast<char *>(g.recvInto[me]);
      outBytes = out ? 0 : piece;
    } else {
      out = static_cast<char *>(g.recvInto[uint32_t(g.root)]);
    }
    break;
  case GroupKind::None:
    return "not a collective";
  }
  if (g.selfCopy && !selfByPlan)
    before.push_back({g.recvInto[me], g.sendFrom[me], piece});
  if (inBytes + outBytes) {
    std::string error;
    char *staging = static_cast<char *>(grow(side, runner.staging, runner.stagingBytes,
                                             inBytes + outBytes, "a group's pieces", error));
    if (!staging)
      return error;
    if (!in) {
      in = staging;
      if (inBytes == n * piece)
        for (uint32_t r = 0; r < n; ++r)
          if (g.sendFrom[r])
            before.push_back({in + uint64_t(r) * piece, g.sendFrom[r], piece});
    }
    if (!out) {
      out = staging + inBytes;
      if (outBytes == n * piece)
        for (uint32_t r = 0; r < n; ++r)
          if (g.recvInto[r])
            after.push_back({g.recvInto[r], out + uint64_t(r) * piece, piece});
    }
  }
  send = in;
  recv = out;
  return "";
}

/// What a selected call that Collc cannot run does: fails with \p code
/// under COLLC_NCCL_STRICT, else goes to NCCL (said once).
std::optional<ncclResult_t> cannotRun(Shim &s, CommSide &side, const std::string &what,
                                      ncclResult_t code) {
  if (s.strict) {
    setError(what);
    return code;
  }
  side.sayOnce(what + "; the call goes to NCCL");
  return std::nullopt;
}

/// Runs \p c on Collc when the selection names it: its result then; none
/// when the call goes to NCCL.
std::optional<ncclResult_t> runOnCollc(const Call &c) {
  Shim &s = shim();
  const CollectiveInfo &info = collectiveInfo(c.kind);
  if (insideCollc || !s.library || !s.collectives.count(info.name) || !c.comm)
    return std::nullopt;
  std::shared_ptr<CommSide> sidePtr = sideOf(s, c.comm);
  if (!sidePtr)
    return std::nullopt;
  CommSide &side = *sidePtr;
  const std::optional<DataType> type = dataTypeOf(c.type);
  const std::optional<RedOp> op = info.reduces ? redOpOf(c.op) : std::optional<RedOp>(RedOp::Sum);
  if (info.rooted && (c.root < 0 || uint32_t(c.root) >= side.nranks))
    return std::nullopt; // NCCL says what is wrong.
  if (!type || !op) {
    if (s.debug) {
      std::lock_guard<std::mutex> lock(side.mu);
      side.sayOnce(std::string(info.name) + " of " +
                   (!type ? "NCCL data type " + std::to_string(int(c.type))
                          : "NCCL operator " + std::to_string(int(c.op))) +
                   ", which Collc does not have, goes to NCCL");
    }
    return std::nullopt;
  }
  const BufferElements elements = collectiveBufferElements(c.kind, side.nranks, c.count);
  const uint64_t bytes = std::max(elements.input, elements.output) * dataTypeSize(*type);
  if (!s.library->selects(info.name, side.nranks, bytes))
    return std::nullopt;

  std::lock_guard<std::mutex> lock(side.mu);
  const uint32_t root = info.rooted ? uint32_t(c.root) : 0;
  Result<std::shared_ptr<const ValidatedPlan>> plan =
      s.library->plan(info.name, side.nranks, root, bytes);
  if (!plan)
    return cannotRun(s, side,
                     "cannot run " + std::string(info.name) + " on Collc: " + plan.message(),
                     ncclInvalidUsage);
  // A call in a CUDA graph capture runs on Collc as any other (the
  // communicator keeps the slice base in device memory, and each captured
  // launch its own buffer table), once its communicator is set up.
  const bool inCapture = capturing(c.stream);
  auto runner = std::find_if(side.runners.begin(), side.runners.end(),
                             [&](const Runner &r) { return r.plan == *plan; });
  if (runner == side.runners.end()) {
    // The set-up is collective and blocks: not inside a group, where one
    // thread may drive several communicators.
    if (groupDepth > 0) {
      if (s.debug)
        side.sayOnce(std::string(info.name) +
                     ": Collc's set-up waits for a call outside a group; until then such "
                     "calls go to NCCL");
      return std::nullopt;
    }
    // Nor inside a capture, which would take in its NCCL calls and
    // allocations (every rank captures alike, so the ranks agree).
    if (inCapture) {
      if (s.debug)
        side.sayOnce(std::string(info.name) +
                     ": Collc's set-up waits for a call outside a CUDA graph capture; until "
                     "then such calls go to NCCL");
      return std::nullopt;
    }
    Runner r;
    r.plan = *plan;
    {
      InsideCollc inside;
      Result<std::unique_ptr<NcclCommunicator>> made =
          NcclCommunicator::create(**plan, c.comm, s.options);
      if (made)
        r.comm = std::move(*made);
      else
        r.error = made.message();
    }
    // The job's windows, registered on every rank before this call (and
    // so in the same order everywhere): collective, as the set-up is.
    if (r.comm) {
      InsideCollc inside;
      for (const CommSide::Window &win : side.windows)
        readInPlace(side, *r.comm, win);
    }
    side.runners.push_back(std::move(r));
    runner = side.runners.end() - 1;
    if (s.debug && runner->comm)
      side.sayOnce("set up " + std::string(info.name) + " (plan " + (*plan)->info().name +
                   ") on Collc");
  }
  if (!runner->comm)
    return cannotRun(s, side,
                     "cannot set up " + std::string(info.name) + " (plan " + (*plan)->info().name +
                         ") on Collc: " + runner->error,
                     ncclSystemError);

  // Memory made from here on may be used by the graph: it is kept until
  // the side is freed (CommSide::retired), and made in the relaxed capture
  // mode, which allows it during a capture.
  side.captured = side.captured || inCapture;
  RelaxedCapture relaxed(inCapture);
  unsigned long long captureId = 0;
  if (inCapture) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamGetCaptureInfo(c.stream, &status, &captureId) != cudaSuccess) {
      cudaGetLastError();
      captureId = 0;
    }
  }
  const void *send = c.send;
  void *recv = c.recv;
  std::vector<PieceCopy> before, after;
  if (c.group) {
    std::string error =
        placeGroup(side, *runner, *c.group, dataTypeSize(*type), send, recv, before, after);
    if (!error.empty()) {
      setError(error);
      return ncclSystemError;
    }
  }
  // NCCL lets a rank off the root leave a buffer it does not use null.
  if (c.count && (!send || !recv) && info.rooted && uint32_t(c.root) != side.rank) {
    std::string error;
    if (!recv && (c.kind == CollectiveKind::Reduce || c.kind == CollectiveKind::Gather))
      recv = scratchOf(side, elements.output * dataTypeSize(*type), error);
    else if (!send && c.kind == CollectiveKind::Scatter)
      send = scratchOf(side, elements.input * dataTypeSize(*type), error);
    else if (!send && c.kind == CollectiveKind::Broadcast)
      send = recv; // Off the root the input is not read: in place.
    if (!error.empty()) {
      setError(error);
      return ncclSystemError;
    }
  }
  Status launched = Status::success();
  {
    InsideCollc inside;
    // A call waits for the communicator's last launch when that was on
    // another stream. In a capture, for its last launch in the same capture
    // (an edge of the graph); the graph's replays are ordered against the
    // calls outside it by the streams it is launched on, as NCCL's are.
    if (!inCapture && runner->last && runner->lastStream != c.stream &&
        cudaStreamWaitEvent(c.stream, runner->last, 0) != cudaSuccess) {
      cudaGetLastError();
      launched = Status::error("cannot order the call after the communicator's last launch");
    }
    if (inCapture && captureId && runner->captured && runner->captureId == captureId &&
        runner->capturedStream != c.stream &&
        cudaStreamWaitEvent(c.stream, runner->captured, 0) != cudaSuccess) {
      cudaGetLastError();
      launched = Status::error("cannot order the captured call after the communicator's last "
                               "captured launch");
    }
    auto copy = [&](const std::vector<PieceCopy> &pieces, const char *what) {
      for (const PieceCopy &p : pieces)
        if (launched &&
            cudaMemcpyAsync(p.to, p.from, p.bytes, cudaMemcpyDefault, c.stream) != cudaSuccess) {
          cudaGetLastError();
          launched = Status::error(std::string("cannot copy a piece of the group ") + what);
        }
    };
    copy(before, "into place");
    if (launched)
      launched = runner->comm->launch(send, recv, c.count, *type, *op, c.stream);
    copy(after, "out");
    if (launched && inCapture) {
      if (recordOn(side, runner->captured, c.stream)) {
        runner->captureId = captureId;
        runner->capturedStream = c.stream;
      }
      if (s.debug)
        side.sayOnce("captured " + std::string(info.name) + " (plan " + (*plan)->info().name +
                     ") into a CUDA graph on Collc");
    } else if (launched && recordOn(side, runner->last, c.stream)) {
      runner->lastStream = c.stream;
    }
  }
  if (!launched) {
    setError(launched.message());
    return ncclInvalidArgument;
  }
  clearError();
  return ncclSuccess;
}

/// Frees \p side's Collc communicators, in the order they were made
/// (collective: every rank does the same).
void destroySide(CommSide &side) {
  std::lock_guard<std::mutex> lock(side.mu);
  InsideCollc inside;
  for (Runner &r : side.runners) {
    r.comm.reset();
    if (r.last)
      cudaEventDestroy(r.last);
    if (r.captured)
      cudaEventDestroy(r.captured);
    if (r.staging)
      cudaFree(r.staging);
  }
  side.runners.clear();
  OnDevice on(side.device);
  if (side.scratch)
    cudaFree(side.scratch);
  side.scratch = nullptr;
  for (void *p : side.retired)
    cudaFree(p);
  side.retired.clear();
}

/// Leaves \p side's memory as it is (its kernels may still run) and
/// forgets it: an aborted communicator waits for nobody.
void abandonSide(CommSide &side) {
  // A set-up in progress holds the lock, waiting in NCCL for peers that
  // may never come: the abort is what ends it, so it does not wait; the
  // side is already out of the table, and what it holds is left as it is.
  side.abandoned = true;
  std::unique_lock<std::mutex> lock(side.mu, std::try_to_lock);
  if (!lock.owns_lock())
    return;
  for (Runner &r : side.runners)
    (void)r.comm.release();
  side.runners.clear();
}

std::optional<ncclResult_t> run(CollectiveKind kind, const void *send, void *recv, size_t count,
                                ncclDataType_t type, ncclRedOp_t op, int root, ncclComm_t comm,
                                cudaStream_t stream) {
  return runOnCollc(Call{kind, send, recv, count, type, op, root, comm, stream});
}

/// Forwards \p ops to NCCL as they came, in a group of their own.
ncclResult_t forwardP2p(const std::vector<P2pOp> &ops) {
  const bool twin = false;
  ncclResult_t result = FORWARD(ncclGroupStart);
  for (const P2pOp &op : ops) {
    ncclResult_t r = forwardP2p(op);
    if (result == ncclSuccess)
      result = r;
  }
  ncclResult_t ended = FORWARD(ncclGroupEnd);
  return result == ncclSuccess ? ended : result;
}

CollectiveKind collectiveOf(GroupKind kind) {
  switch (kind) {
  case GroupKind::Gather:
    return CollectiveKind::Gather;
  case GroupKind::Scatter:
    return CollectiveKind::Scatter;
  default:
    return CollectiveKind::AllToAll;
  }
}

/// Holds \p op back when it is part of a group whose patterns are
/// recognised (COLLC_NCCL_GROUPS).
bool holdP2p(const P2pOp &op) {
  if (insideCollc || groupDepth == 0)
    return false;
  Shim &s = shim();
  if (!s.library || !s.groups.any())
    return false;
  heldP2p.push_back(op);
  return true;
}

/// The held sends and receives of a group that has ended (in NCCL too):
/// on Collc when they are the collective of a pattern asked for and the
/// selection names it, else to NCCL in a group of their own.
ncclResult_t endHeldGroup(const std::vector<P2pOp> &ops) {
  Shim &s = shim();
  const P2pOp &first = ops.front();
  std::shared_ptr<CommSide> side;
  if (std::all_of(ops.begin(), ops.end(), [&](const P2pOp &op) {
        return op.comm == first.comm && op.stream == first.stream;
      }))
    side = sideOf(s, first.comm);
  if (!side)
    return forwardP2p(ops);
  GroupCall g = classifyGroup(ops, side->nranks, side->rank, s.groups);
  if (g.kind == GroupKind::None) {
    if (s.debug) {
      std::lock_guard<std::mutex> lock(side->mu);
      side->sayOnce("a send/recv group goes to NCCL: " + g.why);
    }
    return forwardP2p(ops);
  }
  std::optional<ncclResult_t> r =
      runOnCollc(Call{collectiveOf(g.kind), nullptr, nullptr, g.count, g.type, ncclSum, g.root,
                      first.comm, first.stream, &g});
  if (!r)
    return forwardP2p(ops);
  if (*r == ncclSuccess && s.debug) {
    std::lock_guard<std::mutex> lock(side->mu);
    side->sayOnce(std::string("ran a send/recv group as ") + groupKindName(g.kind) + " on Collc");
  }
  return *r;
}

/// Drops \p comm's Collc side: frees it (collective), or with \p abandon
/// leaves its memory as it is (its kernels may still run) for an aborted
/// communicator, which waits for nobody.
void closeSide(ncclComm_t comm, bool abandon) {
  std::shared_ptr<CommSide> side = takeSide(comm);
  if (!side)
    return;
  if (abandon)
    abandonSide(*side);
  else
    destroySide(*side);
}

/// After NCCL registered \p *made (\p buff, \p bytes) on \p comm: every
/// communicator of its Collc side reads it in place from now on
/// (collective, as the registration is), and those made later too.
void windowRegistered(ncclComm_t comm, void *buff, size_t bytes, const ncclWindow_t *made) {
  Shim &s = shim();
  if (!s.library || insideCollc)
    return; // Collc's own windows (its connection memory) are not the job's.
  // Inside a group NCCL registers the window at the group's end (and
  // Collc's own collective would wait for it): both wait for that end.
  if (groupDepth > 0) {
    pendingWindows.push_back({comm, buff, bytes, made});
    return;
  }
  if (!*made)
    return;
  const ncclWindow_t window = *made;
  RelaxedCapture relaxed; // Another thread may be capturing in the global mode.
  std::shared_ptr<CommSide> side = sideOf(s, comm);
  if (!side)
    return;
  std::lock_guard<std::mutex> lock(side->mu);
  side->windows.push_back({buff, bytes, window});
  InsideCollc inside;
  for (Runner &runner : side->runners)
    if (runner.comm)
      readInPlace(*side, *runner.comm, side->windows.back());
}

/// Before NCCL deregisters \p window on \p comm: no communicator reads it
/// any more (each waits for its launches).
void windowDeregistering(ncclComm_t comm, ncclWindow_t window) {
  Shim &s = shim();
  if (!s.library || insideCollc)
    return;
  RelaxedCapture relaxed; // Another thread may be capturing in the global mode.
  std::shared_ptr<CommSide> side = existingSide(s, comm);
  if (!side)
    return;
  std::lock_guard<std::mutex> lock(side->mu);
  auto &w = side->windows;
  w.erase(std::remove_if(w.begin(), w.end(),
                         [&](const CommSide::Window &x) { return x.window == window; }),
          w.end());
  InsideCollc inside;
  for (Runner &runner : side->runners)
    if (runner.comm)
      if (Status x = runner.comm->deregisterWindow(window); !x)
        side->sayOnce("deregistering a window: " + x.message());
}

/// A failure of \p comm's Collc side, as ncclCommGetAsyncError() gives it:
/// where NCCL's own \p asyncError is ncclSuccess, it becomes ncclRemoteError
/// for a timeout, ncclSystemError for the rest. Nothing is read when the
/// communicator has no Collc side.
void checkSides(ncclComm_t comm, ncclResult_t *asyncError) {
  Shim &s = shim();
  if (!s.library || insideCollc)
    return;
  std::shared_ptr<CommSide> side = existingSide(s, comm);
  // A side being set up (a collective that may wait for a dead peer) is
  // not waited for: the next poll looks again.
  if (!side || *asyncError != ncclSuccess || !side->mu.try_lock())
    return;
  std::lock_guard<std::mutex> lock(side->mu, std::adopt_lock);
  for (Runner &runner : side->runners) {
    if (!runner.comm)
      continue;
    Status checked = runner.comm->check();
    if (!checked) {
      setError(checked.message());
      *asyncError = checked.message().find("timed out") != std::string::npos ? ncclRemoteError
                                                                             : ncclSystemError;
      return;
    }
  }
}

} // namespace

#else // !COLLC_SHIM_RUNS_PLANS

namespace {

/// Without the kernels every call goes to NCCL.
std::optional<ncclResult_t> run(int, const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int,
                                ncclComm_t, cudaStream_t) {
  return std::nullopt;
}
void closeSide(ncclComm_t, bool) {}
void checkSides(ncclComm_t, ncclResult_t *) {}
void windowRegistered(ncclComm_t, void *, size_t, const ncclWindow_t *) {}
void windowDeregistering(ncclComm_t, ncclWindow_t) {}
bool holdP2p(const P2pOp &) {
  return false;
}
ncclResult_t endHeldGroup(const std::vector<P2pOp> &) {
  return ncclSuccess;
}

namespace CollectiveKind {
enum { Reduce, Broadcast, AllReduce, ReduceScatter, AllGather, AllToAll, Gather, Scatter };
} // namespace CollectiveKind

} // namespace

#endif // COLLC_SHIM_RUNS_PLANS

namespace hook {

ncclResult_t ncclCommFinalize(bool twin, ncclComm_t comm) {
  closeSide(comm, false);
  return FORWARD(ncclCommFinalize, comm);
}

ncclResult_t ncclCommDestroy(bool twin, ncclComm_t comm) {
  closeSide(comm, false);
  return FORWARD(ncclCommDestroy, comm);
}

ncclResult_t ncclCommAbort(bool twin, ncclComm_t comm) {
  closeSide(comm, true);
  return FORWARD(ncclCommAbort, comm);
}

ncclResult_t ncclCommRevoke(bool twin, ncclComm_t comm, int revokeFlags) {
  closeSide(comm, true);
  return FORWARD(ncclCommRevoke, comm, revokeFlags);
}

ncclResult_t ncclCommWindowRegister(bool twin, ncclComm_t comm, void *buff, size_t size,
                                    ncclWindow_t *win, int winFlags) {
  ncclResult_t r = FORWARD(ncclCommWindowRegister, comm, buff, size, win, winFlags);
  if (r == ncclSuccess && win)
    windowRegistered(comm, buff, size, win);
  return r;
}

ncclResult_t ncclCommWindowDeregister(bool twin, ncclComm_t comm, ncclWindow_t win) {
  windowDeregistering(comm, win);
  return FORWARD(ncclCommWindowDeregister, comm, win);
}

ncclResult_t ncclCommGetAsyncError(bool twin, ncclComm_t comm, ncclResult_t *asyncError) {
  ncclResult_t r = FORWARD(ncclCommGetAsyncError, comm, asyncError);
  if (r == ncclSuccess && asyncError)
    checkSides(comm, asyncError);
  return r;
}

ncclResult_t ncclReduce(bool twin, const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  if (auto r =
          run(CollectiveKind::Reduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream))
    return *r;
  return FORWARD(ncclReduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

ncclResult_t ncclBcast(bool twin, void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
  if (auto r =
          run(CollectiveKind::Broadcast, buff, buff, count, datatype, ncclSum, root, comm, stream))
    return *r;
  return FORWARD(ncclBcast, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclBroadcast(bool twin, const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  if (auto r = run(CollectiveKind::Broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root,
                   comm, stream))
    return *r;
  return FORWARD(ncclBroadcast, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

ncclResult_t ncclAllReduce(bool twin, const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  if (auto r =
          run(CollectiveKind::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream))
    return *r;
  return FORWARD(ncclAllReduce, sendbuff, recvbuff, count, datatype, op, comm, stream);
}

ncclResult_t ncclReduceScatter(bool twin, const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  if (auto r = run(CollectiveKind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0,
                   comm, stream))
    return *r;
  return FORWARD(ncclReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}

ncclResult_t ncclAllGather(bool twin, const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  if (auto r = run(CollectiveKind::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0,
                   comm, stream))
    return *r;
  return FORWARD(ncclAllGather, sendbuff, recvbuff, sendcount, datatype, comm, stream);
}

ncclResult_t ncclAlltoAll(bool twin, const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  if (auto r = run(CollectiveKind::AllToAll, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm,
                   stream))
    return *r;
  return FORWARD(ncclAlltoAll, sendbuff, recvbuff, count, datatype, comm, stream);
}

ncclResult_t ncclGather(bool twin, const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  if (auto r = run(CollectiveKind::Gather, sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                   stream))
    return *r;
  return FORWARD(ncclGather, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

ncclResult_t ncclScatter(bool twin, const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  if (auto r = run(CollectiveKind::Scatter, sendbuff, recvbuff, count, datatype, ncclSum, root,
                   comm, stream))
    return *r;
  return FORWARD(ncclScatter, sendbuff, recvbuff, count, datatype, root, comm, stream);
}

ncclResult_t ncclGroupStart(bool twin) {
  ++groupDepth;
  ncclResult_t r = FORWARD(ncclGroupStart);
  if (r != ncclSuccess)
    --groupDepth;
  return r;
}

ncclResult_t ncclGroupEnd(bool twin) {
  if (groupDepth > 0)
    --groupDepth;
  ncclResult_t r = FORWARD(ncclGroupEnd);
  if (groupDepth == 0 && !heldP2p.empty()) {
    std::vector<P2pOp> ops;
    ops.swap(heldP2p);
    ncclResult_t held = endHeldGroup(ops);
    if (r == ncclSuccess)
      r = held;
  }
  // Windows registered in the group: NCCL has filled their handles (null
  // where the registration failed).
  if (groupDepth == 0 && !pendingWindows.empty()) {
    std::vector<PendingWindow> windows;
    windows.swap(pendingWindows);
    if (r == ncclSuccess)
      for (const PendingWindow &w : windows)
        windowRegistered(w.comm, w.buff, w.bytes, w.made);
  }
  return r;
}

// NCCL ends the group here too, without running it: the held sends and
// receives are simulated with it.
ncclResult_t ncclGroupSimulateEnd(bool twin, ncclSimInfo_t *simInfo) {
  if (groupDepth > 0)
    --groupDepth;
  if (groupDepth == 0)
    pendingWindows.clear();
  if (groupDepth == 0 && !heldP2p.empty()) {
    std::vector<P2pOp> ops;
    ops.swap(heldP2p);
    for (const P2pOp &op : ops)
      (void)forwardP2p(op);
  }
  return FORWARD(ncclGroupSimulateEnd, simInfo);
}

ncclResult_t ncclSend(bool twin, const void *sendbuff, size_t count, ncclDataType_t datatype,
                      int peer, ncclComm_t comm, cudaStream_t stream) {
  if (holdP2p(P2pOp{true, const_cast<void *>(sendbuff), count, datatype, peer, comm, stream, twin}))
    return ncclSuccess;
  return FORWARD(ncclSend, sendbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(bool twin, void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  if (holdP2p(P2pOp{false, recvbuff, count, datatype, peer, comm, stream, twin}))
    return ncclSuccess;
  return FORWARD(ncclRecv, recvbuff, count, datatype, peer, comm, stream);
}

} // namespace hook

} // namespace collcshim
