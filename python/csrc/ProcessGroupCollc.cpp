//===- ProcessGroupCollc.cpp - torch.distributed's face of Collc ----------===//

#include "ProcessGroupCollc.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <c10/util/Exception.h>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <pybind11/pybind11.h>
#include <random>
#include <regex>
#include <stdexcept>
#include <unistd.h>

namespace coll::torchext {

namespace {

[[noreturn]] void fail(const std::string &message) {
  throw std::runtime_error("collc: " + message);
}

//===----------------------------------------------------------------------===//
// Tensors onto buffers
//===----------------------------------------------------------------------===//

/// A tensor element as the runtime sees it: \p perElement elements of
/// \p type (complex numbers are two floats; a type Collc lacks moves as
/// bytes).
struct Elements {
  DataType type = DataType::Uint8;
  uint64_t perElement = 1;
};

bool nativeType(at::ScalarType s, DataType &out) {
  switch (s) {
  case at::kByte:
    out = DataType::Uint8;
    return true;
  case at::kChar:
    out = DataType::Int8;
    return true;
  case at::kInt:
    out = DataType::Int32;
    return true;
  case at::kLong:
    out = DataType::Int64;
    return true;
  case at::kHalf:
    out = DataType::Float16;
    return true;
  case at::kBFloat16:
    out = DataType::BFloat16;
    return true;
  case at::kFloat:
    out = DataType::Float32;
    return true;
  case at::kDouble:
    out = DataType::Float64;
    return true;
  default:
    return false;
  }
}

/// How an operation that only moves data sees \p t's elements.
Elements movedAs(const at::Tensor &t) {
  Elements e;
  if (nativeType(t.scalar_type(), e.type))
    return e;
  if (t.scalar_type() == at::kComplexFloat)
    return {DataType::Float32, 2};
  if (t.scalar_type() == at::kComplexDouble)
    return {DataType::Float64, 2};
  return {DataType::Uint8, uint64_t(t.element_size())};
}

const char *reduceOpName(const c10d::ReduceOp &op) {
  switch (c10d::ReduceOp::RedOpType(op)) {
  case c10d::ReduceOp::SUM:
    return "SUM";
  case c10d::ReduceOp::AVG:
    return "AVG";
  case c10d::ReduceOp::PRODUCT:
    return "PRODUCT";
  case c10d::ReduceOp::MIN:
    return "MIN";
  case c10d::ReduceOp::MAX:
    return "MAX";
  case c10d::ReduceOp::BAND:
    return "BAND";
  case c10d::ReduceOp::BOR:
    return "BOR";
  case c10d::ReduceOp::BXOR:
    return "BXOR";
  case c10d::ReduceOp::PREMUL_SUM:
    return "PREMUL_SUM";
  default:
    return "UNUSED";
  }
}

/// How a reduction with \p op sees \p t's elements, and the runtime's
/// operator; an error for what Collc cannot reduce.
std::pair<Elements, RedOp> reducedAs(const at::Tensor &t, const c10d::ReduceOp &op) {
  const auto kind = c10d::ReduceOp::RedOpType(op);
  const std::string type = c10::toString(t.scalar_type());
  if (t.scalar_type() == at::kBool) {
    // Booleans are bytes of 0 and 1: or and and are max and min.
    if (kind == c10d::ReduceOp::SUM || kind == c10d::ReduceOp::MAX || kind == c10d::ReduceOp::BOR)
      return {{DataType::Uint8, 1}, RedOp::Max};
    if (kind == c10d::ReduceOp::PRODUCT || kind == c10d::ReduceOp::MIN ||
        kind == c10d::ReduceOp::BAND)
      return {{DataType::Uint8, 1}, RedOp::Min};
    fail(std::string("ReduceOp.") + reduceOpName(op) + " of Bool tensors is not supported " +
         "(SUM, MAX and BOR are or; PRODUCT, MIN and BAND are and)");
  }
  RedOp red = RedOp::Sum;
  switch (kind) {
  case c10d::ReduceOp::SUM:
    red = RedOp::Sum;
    break;
  case c10d::ReduceOp::AVG:
    red = RedOp::Avg;
    break;
  case c10d::ReduceOp::PRODUCT:
    red = RedOp::Prod;
    break;
  case c10d::ReduceOp::MIN:
    red = RedOp::Min;
    break;
  case c10d::ReduceOp::MAX:
    red = RedOp::Max;
    break;
  default:
    fail(std::string("ReduceOp.") + reduceOpName(op) + " of " + type +
         " tensors is not supported (Collc reduces with SUM, AVG, PRODUCT, MIN and MAX, and "
         "Bool tensors with BAND and BOR too)");
  }
  Elements e;
  if (nativeType(t.scalar_type(), e.type))
    return {e, red};
  if (t.scalar_type() == at::kComplexFloat || t.scalar_type() == at::kComplexDouble) {
    if (red != RedOp::Sum && red != RedOp::Avg)
      fail(std::string("ReduceOp.") + reduceOpName(op) + " of " + type +
           " tensors is not supported (complex numbers reduce with SUM and AVG)");
    return {{t.scalar_type() == at::kComplexFloat ? DataType::Float32 : DataType::Float64, 2}, red};
  }
  fail((t.scalar_type() == at::kShort ? std::string("int16 (Short)") : type) +
       " tensors cannot be reduced: Collc reduces uint8, int8, int32, int64, float16, "
       "bfloat16, float32, float64 (and bool, complex64, complex128 as such)");
}

/// Refuses a tensor the runtime cannot address.
void checkTensor(const at::Tensor &t, const char *what) {
  if (!t.defined())
    fail(std::string(what) + " is an undefined tensor");
  if (!t.device().is_cpu())
    fail(std::string(what) + " is on " + t.device().str() + ": the collc backend runs CPU tensors");
  if (t.layout() != at::kStrided)
    fail(std::string(what) + " is not a dense (strided) tensor");
}

/// Exactly one tensor, as the CPU backends take.
const at::Tensor &single(const std::vector<at::Tensor> &tensors, const char *op) {
  if (tensors.size() != 1)
    fail(std::string(op) + " takes one tensor per rank, not " + std::to_string(tensors.size()));
  checkTensor(tensors[0], "the tensor");
  return tensors[0];
}

/// The same type and number of elements as \p like.
void checkLike(const at::Tensor &t, const at::Tensor &like, const char *what) {
  checkTensor(t, what);
  if (t.scalar_type() != like.scalar_type())
    fail(std::string(what) + " is " + c10::toString(t.scalar_type()) + ", not " +
         c10::toString(like.scalar_type()));
  if (t.numel() != like.numel())
    fail(std::string(what) + " has " + std::to_string(t.numel()) + " elements, not " +
         std::to_string(like.numel()));
}

/// \p root as a rank of a group of \p size, for \p op.
uint32_t rootOf(int64_t root, int size, const char *op) {
  if (root < 0 || root >= size)
    fail(std::string(op) + "'s root " + std::to_string(root) + " is not a rank of the group");
  return uint32_t(root);
}

/// The root's list of \p size tensors like \p like (\p what: "output"),
/// checked; empty on the other ranks, which must give none.
std::vector<at::Tensor> rootList(const std::vector<std::vector<at::Tensor>> &lists,
                                 const at::Tensor &like, bool isRoot, int size, const char *op,
                                 const char *what) {
  if (!isRoot) {
    if (!lists.empty() && !lists[0].empty())
      fail(std::string(op) + " takes " + what + " tensors on its root only");
    return {};
  }
  if (lists.size() != 1 || lists[0].size() != size_t(size))
    fail(std::string(op) + "'s root takes a list of " + std::to_string(size) + " " + what +
         " tensors");
  const std::string each = std::string("an ") + what + " tensor of " + op;
  for (const at::Tensor &t : lists[0])
    checkLike(t, like, each.c_str());
  return lists[0];
}

/// A contiguous tensor for the runtime to work in; \p finish copies it
/// back when the user's tensor is not contiguous itself.
struct Staged {
  at::Tensor user, buffer;
  explicit Staged(const at::Tensor &t) : user(t), buffer(t.is_contiguous() ? t : t.contiguous()) {}
  void finish() {
    if (!buffer.is_same(user))
      user.copy_(buffer);
  }
  void *data() { return buffer.data_ptr(); }
};

/// \p tensors end to end in \p whole (contiguous, of their type, large
/// enough); returns \p whole. Contiguous tensors are copied with memcpy:
/// no dispatch per tensor.
at::Tensor packed(const std::vector<at::Tensor> &tensors, at::Tensor whole) {
  char *to = static_cast<char *>(whole.data_ptr());
  int64_t offset = 0;
  for (const at::Tensor &t : tensors) {
    const size_t bytes = size_t(t.numel()) * t.element_size();
    if (t.is_contiguous()) {
      if (bytes)
        std::memcpy(to + offset * whole.element_size(), t.data_ptr(), bytes);
    } else {
      whole.narrow(0, offset, t.numel()).copy_(t.reshape({-1}));
    }
    offset += t.numel();
  }
  return whole;
}

/// Copies the pieces of \p whole (contiguous) into \p tensors, in order.
/// Whether \p tensors are contiguous and none overlaps another (empty ones
/// aside).
bool contiguousApart(const std::vector<at::Tensor> &tensors) {
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;
  for (const at::Tensor &t : tensors) {
    if (t.numel() == 0)
      continue;
    if (!t.is_contiguous())
      return false;
    const uintptr_t at = reinterpret_cast<uintptr_t>(t.data_ptr());
    spans.emplace_back(at, at + uintptr_t(t.numel()) * t.element_size());
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second)
      return false;
  return true;
}

/// The data of \p tensors as receive blocks (CallArgs::recvBlocks), or none
/// when a tensor is empty or not contiguous, or two overlap (a plan may
/// forward what it received from its output: each block must be its own).
std::vector<void *> receiveBlocks(const std::vector<at::Tensor> &tensors) {
  std::vector<void *> blocks;
  for (const at::Tensor &t : tensors) {
    if (t.numel() == 0)
      return {};
    blocks.push_back(t.data_ptr());
  }
  return contiguousApart(tensors) ? blocks : std::vector<void *>();
}

/// The data of \p tensors as send blocks (CallArgs::sendBlocks), or none
/// when one is not contiguous (they may overlap: the plan reads them only).
std::vector<const void *> sendBlocksOf(const std::vector<at::Tensor> &tensors) {
  std::vector<const void *> blocks;
  for (const at::Tensor &t : tensors) {
    if (!t.is_contiguous() || t.numel() == 0)
      return {};
    blocks.push_back(t.data_ptr());
  }
  return blocks;
}

void unpack(const at::Tensor &whole, std::vector<at::Tensor> &tensors) {
  const char *from = static_cast<const char *>(whole.data_ptr());
  int64_t offset = 0;
  for (at::Tensor &t : tensors) {
    const size_t bytes = size_t(t.numel()) * t.element_size();
    if (t.is_contiguous()) {
      if (bytes)
        std::memcpy(t.data_ptr(), from + offset * whole.element_size(), bytes);
    } else {
      t.copy_(whole.narrow(0, offset, t.numel()).view(t.sizes()));
    }
    offset += t.numel();
  }
}

//===----------------------------------------------------------------------===//
// Work
//===----------------------------------------------------------------------===//

/// One operation: its place in the group's stream (a task of the engine),
/// what completes it (the same task, or one finished when a message
/// arrives), and a future that holds its output tensors.
/// \p message with each "rank N" of a subgroup also named by its rank in
/// the default group (\p globalRanks[N]), as the user knows it: the runtime
/// and the messages number a group's own ranks.
std::string withGlobalRanks(const std::vector<int64_t> *globalRanks, const std::string &message) {
  if (!globalRanks || globalRanks->empty())
    return message;
  static const std::regex rank(R"(\brank (\d+))");
  std::string out;
  std::smatch m;
  std::string rest = message;
  while (std::regex_search(rest, m, rank)) {
    out += m.prefix().str() + m.str();
    const std::string digits = m[1].str();
    if (digits.size() < 10) {
      const uint64_t r = std::stoull(digits);
      if (r < globalRanks->size() && uint64_t((*globalRanks)[r]) != r)
        out += " (global rank " + std::to_string((*globalRanks)[r]) + ")";
    }
    rest = m.suffix().str();
  }
  return out + rest;
}

class CollcWork : public c10d::Work {
public:
  CollcWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
            std::weak_ptr<GroupEngine> engine,
            std::shared_ptr<const std::vector<int64_t>> globalRanks)
      : c10d::Work(rank, type), outputs(std::move(outputs)), engine(std::move(engine)),
        future(c10::make_intrusive<c10::ivalue::Future>(tensorListType())),
        globalRanks(std::move(globalRanks)) {}

  static const c10::TypePtr &tensorListType() {
    static const c10::TypePtr type = c10::ListType::create(c10::TensorType::get());
    return type;
  }

  bool isCompleted() override { return completion->done(); }
  bool isSuccess() const override { return completion->done() && completion->outcome().ok(); }
  std::exception_ptr exception() const override {
    if (!completion->done() || completion->outcome().ok())
      return nullptr;
    return std::make_exception_ptr(std::runtime_error(completion->outcome().message()));
  }
  int sourceRank() const override {
    if (!source)
      throw std::runtime_error("collc: only a receive from any source has a source rank");
    return source->load();
  }
  std::vector<at::Tensor> result() override { return outputs; }
  void synchronize() override {}
  bool wait(std::chrono::milliseconds timeout) override {
    // Without a limit of its own, the caller runs the operation (no
    // hand-over); with one, the worker does, and the wait ends at the limit
    // whether or not the operation has (it goes on, as torch's works do).
    std::shared_ptr<GroupEngine> e = engine.lock();
    if (e)
      timeout == kNoTimeout ? e->help(task) : e->handToWorker(task);
    // A callback of this operation's own future, on the thread that runs
    // the group's tasks, runs inside its completion: the outcome is
    // settled, and waiting for the rest would wait for this callback.
    const bool inOwnCompletion = completion->settled() && e && e->runsTasksOnThisThread();
    if (!inOwnCompletion &&
        !completion->wait(timeout == kNoTimeout ? -1.0 : timeout.count() / 1000.0))
      throw std::runtime_error("collc: the operation did not complete within " +
                               std::to_string(timeout.count()) + " ms");
    Status s = completion->outcome();
    if (!s)
      throw std::runtime_error(withGlobalRanks(globalRanks.get(), s.message()));
    // A message's future completes on the group's callback thread: wait
    // for it (torch reads the future's value right after wait()), unless
    // this is that thread, which completes it after this callback.
    if (!inOwnCompletion && !future->completed() && !(e && e->onCallbackThread()))
      future->wait();
    return true;
  }
  void abort() override {}
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future; }

  std::vector<at::Tensor> outputs;
  std::weak_ptr<GroupEngine> engine;
  c10::intrusive_ptr<c10::ivalue::Future> future;
  std::shared_ptr<Task> task;               ///< Its place in the stream.
  std::shared_ptr<Task> completion;         ///< Done when the operation is.
  std::shared_ptr<std::atomic<int>> source; ///< A receive from any source's.
  /// A subgroup's ranks in the default group, for messages (empty: none).
  std::shared_ptr<const std::vector<int64_t>> globalRanks;
};

/// The future's completion for \p outputs, as a task's onDone.
std::function<void(const Status &)>
completeFuture(c10::intrusive_ptr<c10::ivalue::Future> future, std::vector<at::Tensor> outputs,
               std::shared_ptr<const std::vector<int64_t>> globalRanks) {
  return [future, outputs, globalRanks](const Status &s) {
    if (s)
      future->markCompleted(c10::IValue(outputs));
    else
      future->setError(std::make_exception_ptr(
          std::runtime_error(withGlobalRanks(globalRanks.get(), s.message()))));
  };
}

//===----------------------------------------------------------------------===//
// Meeting through the store
//===----------------------------------------------------------------------===//

std::vector<uint8_t> bytesOf(const std::string &s) {
  return {s.begin(), s.end()};
}
std::string stringOf(const std::vector<uint8_t> &b) {
  return {b.begin(), b.end()};
}

/// The c10d store as the runtime's: keys under the group's prefix; a get
/// waits with the store's own timeout.
class C10dStore final : public KeyValueStore {
public:
  C10dStore(c10::intrusive_ptr<c10d::Store> store, std::string prefix)
      : store(std::move(store)), prefix(std::move(prefix)) {}
  Status set(const std::string &key, const std::string &value) override {
    try {
      store->set(prefix + key, bytesOf(value));
      return Status::success();
    } catch (const std::exception &e) {
      return Status::error(std::string("the c10d store: ") + e.what());
    }
  }
  Result<std::string> get(const std::string &key) override {
    try {
      return stringOf(store->get(prefix + key));
    } catch (const std::exception &e) {
      return Status::error(std::string("the c10d store: ") + e.what());
    }
  }

private:
  c10::intrusive_ptr<c10d::Store> store;
  std::string prefix;
};

} // namespace

ProcessGroupCollc::ProcessGroupCollc(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                                     int size, std::chrono::milliseconds timeout,
                                     std::vector<int64_t> globalRanksOfGroup)
    : TorchBackendBase(rank, size), timeout(timeout) {
  if (globalRanksOfGroup.size() == size_t(size))
    globalRanks = std::make_shared<const std::vector<int64_t>>(std::move(globalRanksOfGroup));
  // Each group made on this store gets a generation: the n-th group to be
  // made by these ranks has the n-th block of `size` joins.
  const int64_t joins = store->add("collc/joins", 1);
  const std::string gen = std::to_string((joins - 1) / size);
  // Ranks of one host meet through shared memory; when some are on other
  // hosts, through the store (ProcessGroup.h), and talk over the network.
  const std::string host = coll::ProcessGroup::hostIdentity();
  store->set("collc/" + gen + "/host/" + std::to_string(rank), bytesOf(host));
  std::string otherHost;
  for (int q = 0; q < size && otherHost.empty(); ++q)
    if (q != rank) {
      std::string h = stringOf(store->get("collc/" + gen + "/host/" + std::to_string(q)));
      if (h != host)
        otherHost = h;
    }
  const bool acrossHosts = !otherHost.empty();
  std::string job;
  if (rank == 0) {
    std::random_device random;
    char buf[64];
    std::snprintf(buf, sizeof buf, "torch-%d-%08x%08x", int(::getpid()), random(), random());
    job = buf;
    store->set("collc/" + gen + "/job", bytesOf(job));
  } else {
    job = stringOf(store->get("collc/" + gen + "/job"));
  }
  const double seconds = timeout.count() > 0 ? timeout.count() / 1000.0 : 1800.0;
  C10dStore meet(store, "collc/" + gen + "/");
  Result<std::unique_ptr<GroupEngine>> e =
      GroupEngine::create(job, rank, size, seconds, acrossHosts ? &meet : nullptr);
  if (!e)
    fail(e.message());
  engine = std::shared_ptr<GroupEngine>(std::move(*e));
  if (size > 1 && acrossHosts) {
    PeerMessagesOptions options;
    options.setupTimeoutSeconds = seconds;
    options.timeoutSeconds = seconds;
    Result<std::unique_ptr<PeerMessages>> p = PeerMessages::create(job, rank, size, meet, options);
    if (!p)
      fail(p.message());
    peers = std::shared_ptr<PeerMessages>(std::move(*p));
  } else if (size > 1) {
    PeerMessagesOptions options;
    options.setupTimeoutSeconds = seconds;
    options.timeoutSeconds = seconds;
    Result<std::unique_ptr<PeerMessages>> p = PeerMessages::create(job, rank, size, options);
    if (!p)
      fail(p.message());
    peers = std::shared_ptr<PeerMessages>(std::move(*p));
  }
}

ProcessGroupCollc::~ProcessGroupCollc() {
  // The engine waits for its running operation, whose completion may run
  // Python callbacks of a future: never hold the GIL while waiting.
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release release;
    engine.reset();
    peers.reset();
  } else {
    engine.reset();
    peers.reset();
  }
}

at::Tensor ProcessGroupCollc::registeredBytes(int64_t bytes) {
  if (bytes <= 0)
    throw std::runtime_error("collc: a registered tensor needs at least 1 byte");
  std::string why;
  void *p = engine->allocate(size_t(bytes), &why);
  if (!p)
    throw std::runtime_error("collc: cannot allocate " + std::to_string(bytes) +
                             " bytes of registered memory: " + why);
  std::shared_ptr<GroupEngine> keep = engine;
  return at::from_blob(
      p, {bytes}, [keep](void *q) { keep->deallocate(q); }, at::TensorOptions(at::kByte));
}

at::Tensor ProcessGroupCollc::scratch(int64_t numel, const at::Tensor &like) {
  const int64_t bytes = numel * int64_t(like.element_size());
  if (!scratchBytes.defined() || scratchBytes.numel() < bytes) {
    const int64_t want = std::max<int64_t>(bytes, 64);
    scratchBytes = at::Tensor();
    try {
      scratchBytes = registeredBytes(want);
    } catch (const std::runtime_error &) {
      scratchBytes = at::empty({want}, at::TensorOptions(at::kByte));
    }
  }
  return scratchBytes.narrow(0, 0, bytes).view(like.scalar_type());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollc::enqueue(c10d::OpType type,
                                                          std::vector<at::Tensor> outputs,
                                                          std::function<Status()> body) {
  ++issued;
  auto work = c10::make_intrusive<CollcWork>(rank_, type, outputs, engine, globalRanks);
  auto guarded = [body = std::move(body), eng = engine.get()]() -> Status {
    if (Status b = eng->broken(); !b)
      return b;
    at::NoGradGuard noGrad;
    return body();
  };
  work->task =
      engine->submit(std::move(guarded), completeFuture(work->future, outputs, globalRanks));
  work->completion = work->task;
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollc::enqueueStarted(
    c10d::OpType type, std::vector<at::Tensor> outputs,
    std::function<Status(std::shared_ptr<Task>, std::shared_ptr<std::atomic<int>>)> body) {
  ++issued;
  auto work = c10::make_intrusive<CollcWork>(rank_, type, outputs, engine, globalRanks);
  auto completion =
      std::make_shared<Task>(nullptr, completeFuture(work->future, outputs, globalRanks));
  auto source = std::make_shared<std::atomic<int>>(-1);
  auto started = [body = std::move(body), completion, source, eng = engine.get()]() -> Status {
    if (Status b = eng->broken(); !b) {
      completion->finish(b);
      return b;
    }
    at::NoGradGuard noGrad;
    Status s = body(completion, source);
    if (!s)
      completion->finish(s);
    return s;
  };
  work->completion = completion;
  work->source = type == c10d::OpType::RECVANYSOURCE ? source : nullptr;
  work->task = engine->submit(std::move(started));
  return work;
}

//===----------------------------------------------------------------------===//
// Operations
//===----------------------------------------------------------------------===//

c10::intrusive_ptr<c10d::Work> ProcessGroupCollc::broadcast(std::vector<at::Tensor> &tensors,
                                                            const c10d::BroadcastOptions &opts) {
  const at::Tensor &t = single(tensors, "broadcast");
  const uint32_t root = rootOf(opts.rootRank, size_, "broadcast");
  const Elements e = movedAs(t);
  auto *eng = engine.get();
  return enqueue(c10d::OpType::BROADCAST, tensors, [=]() -> Status {
    Staged s(t);
    Status st = eng->run("broadcast", root, s.data(), s.data(), t.numel() * e.perElement, e.type,
                         RedOp::Sum);
    if (st)
      s.finish();
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollc::allreduce(std::vector<at::Tensor> &tensors,
                                                            const c10d::AllreduceOptions &opts) {
  const at::Tensor &t = single(tensors, "allreduce");
  const auto [e, op] = reducedAs(t, opts.reduceOp);
  auto *eng = engine.get();
  return enqueue(c10d::OpType::ALLREDUCE, tensors, [=, e = e, op = op]() -> Status {
    Staged s(t);
    Status st = eng->run("allreduce", 0, s.data(), s.data(), t.numel() * e.perElement, e.type, op);
    if (st)
      s.finish();
    return st;
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCollc::allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                       const c10d::AllreduceCoalescedOptions &opts) {
  if (tensors.empty())
    fail("allreduce_coalesced needs at least one tensor");
  for (const at::Tensor &t : tensors) {
    checkTensor(t, "a tensor of allreduce_coalesced");
    if (t.scalar_type() != tensors[0].scalar_type())
      fail("allreduce_coalesced's tensors must have one type");
  }
  const auto [e, op] = reducedAs(tensors[0], opts.reduceOp);
  auto *eng = engine.get();
  ProcessGroupCollc *self = this;
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, tensors,
                 [=, e = e, op = op]() mutable -> Status {
                   int64_t total = 0;
                   for (const at::Tensor &t : tensors)
                     total += t.numel();
                   at::Tensor whole = packed(tensors, self->scratch(total, tensors[0]));
                   Status st = eng->run("allreduce", 0, whole.data_ptr(), whole.data_ptr(),
                                        whole.numel() * e.perElement, e.type, op);
                   if (st)
                     unpack(whole, tensors);
                   return st;
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollc::reduce(std::vector<at::Tensor> &tensors,
                                                         const c10d::ReduceOptions &opts) {
  const at::Tensor &t = single(tensors, "reduce");
  const uint32_t root = rootOf(opts.rootRank, size_, "reduce");
  const auto [e, op] = reducedAs(t, opts.reduceOp);
  auto *eng = engine.get();
  ProcessGroupCollc *self = this;
  const bool isRoot = uint32_t(rank_) == root;
  return enqueue(c10d::OpType::REDUCE, tensors, [=, e = e, op = op]() -> Status {
    Staged s(t);
    // Other ranks keep their tensors: their part of the result goes to a
    // scratch tensor.
    at::Tensor out = isRoot ? s.buffer : self->scratch(t.numel(), t);
    Status st =
        eng->run("reduce", root, s.data(), out.data_ptr(), t.numel() * e.perElement, e.type, op);
    if (st && isRoot)
      s.finish();
    return st;
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCollc::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                             std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &) {
  const at::Tensor &in = single(inputs, "all_gather");
  if (outputs.size() != 1 || outputs[0].size() != size_t(size_))
    fail("all_gather takes a list of " + std::to_string(size_) + " output tensors");
  for (const at::Tensor &o : outputs[0])
    checkLike(o, in, "an output tensor of all_gather");
  ProcessGroupCollc *self = this;
  std::vector<at::Tensor> outs = outputs[0];
  return enqueue(c10d::OpType::ALLGATHER, outs,
                 [=]() mutable -> Status { return self->gatherList(in, outs); });
}

Status ProcessGroupCollc::gatherList(const at::Tensor &in, std::vector<at::Tensor> &outs) {
  const Elements e = movedAs(in);
  at::Tensor src = in.contiguous();
  // Contiguous outputs that do not overlap receive where they lie (the
  // runtime's receive blocks); others through one gathered buffer.
  if (std::vector<void *> blocks = receiveBlocks(outs); !blocks.empty())
    return engine->runBlocks("allgather", 0, src.data_ptr(), {}, nullptr, blocks,
                             in.numel() * e.perElement, e.type, RedOp::Sum);
  at::Tensor whole = scratch(int64_t(size_) * in.numel(), in);
  Status st = engine->run("allgather", 0, src.data_ptr(), whole.data_ptr(),
                          in.numel() * e.perElement, e.type, RedOp::Sum);
  if (st)
    unpack(whole, outs);
  return st;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCollc::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputLists,
                                       std::vector<at::Tensor> &inputs,
                                       const c10d::AllgatherOptions &) {
  // As torch and Gloo lay it out: outputLists[r][i] receives rank r's
  // inputs[i].
  if (outputLists.size() != size_t(size_))
    fail("all_gather_coalesced takes one list of outputs per rank (" + std::to_string(size_) +
         "), not " + std::to_string(outputLists.size()));
  std::vector<at::Tensor> flat;
  std::vector<std::vector<at::Tensor>> perInput(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    checkTensor(inputs[i], "an input tensor of all_gather_coalesced");
  for (size_t r = 0; r < outputLists.size(); ++r) {
    if (outputLists[r].size() != inputs.size())
      fail("all_gather_coalesced's output list of rank " + std::to_string(r) + " has " +
           std::to_string(outputLists[r].size()) + " tensors, not one per input (" +
           std::to_string(inputs.size()) + ")");
    for (size_t i = 0; i < inputs.size(); ++i) {
      checkLike(outputLists[r][i], inputs[i], "an output tensor of all_gather_coalesced");
      perInput[i].push_back(outputLists[r][i]);
      flat.push_back(outputLists[r][i]);
    }
  }
  ProcessGroupCollc *self = this;
  return enqueue(c10d::OpType::ALLGATHER_COALESCED, flat, [=]() mutable -> Status {
    // One allgather per input, in order, within this one operation.
    for (size_t i = 0; i < inputs.size(); ++i)
      if (Status st = self->gatherList(inputs[i], perInput[i]); !st)
        return st;
    return Status::success();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollc::_allgather_base(at::Tensor &output,
                                                                  at::Tensor &input,
                                                                  const c10d::AllgatherOptions &) {
  checkTensor(input, "the input tensor");
  checkTensor(output, "the output tensor");
  if (output.scalar_type() != input.scalar_type() || output.numel() != input.numel() * size_)
    fail("all_gather_into_tensor's output must hold " + std::to_string(size_) +
         " times the input's elements of its type");
  const Elements e = movedAs(input);
  auto *eng = engine.get();
  return enqueue(c10d::OpType::_ALLGATHER_BASE, {output}, [=]() -> Status {
    at::Tensor src = input.contiguous();
    Staged out(output);
    Status st = eng->run("allgather", 0, src.data_ptr(), out.data(), input.numel() * e.perElement,
                         e.type, RedOp::Sum);
    if (st)
      out.finish();
    return st;
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCollc::gather(std::vector<std::vector<at::Tensor>> &outputs,
                          std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts) {
  const at::Tensor &in = single(inputs, "gather");
  const uint32_t root = rootOf(opts.rootRank, size_, "gather");
  const bool isRoot = uint32_t(rank_) == root;
  std::vector<at::Tensor> outs = rootList(outputs, in, isRoot, size_, "gather", "output");
  const Elements e = movedAs(in);
  auto *eng = engine.get();
  ProcessGroupCollc *self = this;
  const int n = size_;
  return enqueue(c10d::OpType::GATHER, outs, [=]() mutable -> Status {
    at::Tensor src = in.contiguous();
    if (isRoot)
      if (std::vector<void *> blocks = receiveBlocks(outs); !blocks.empty())
        return eng->runBlocks("gather", root, src.data_ptr(), {}, nullptr, blocks,
                              in.numel() * e.perElement, e.type, RedOp::Sum);
    at::Tensor whole = self->scratch(int64_t(n) * in.numel(), in);
    Status st = eng->run("gather", root, src.data_ptr(), whole.data_ptr(),
                         in.numel() * e.perElement, e.type, RedOp::Sum);
    if (st && isRoot)
      unpack(whole, outs);
    return st;
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCollc::scatter(std::vector<at::Tensor> &outputs,
                           std::vector<std::vector<at::Tensor>> &inputs,
                           const c10d::ScatterOptions &opts) {
  const at::Tensor &out = single(outputs, "scatter");
  const uint32_t root = rootOf(opts.rootRank, size_, "scatter");
  const bool isRoot = uint32_t(rank_) == root;
  std::vector<at::Tensor> ins = rootList(inputs, out, isRoot, size_, "scatter", "input");
  const Elements e = movedAs(out);
  auto *eng = engine.get();
  ProcessGroupCollc *self = this;
  const int n = size_;
  return enqueue(c10d::OpType::SCATTER, outputs, [=]() mutable -> Status {
    Staged s(out);
    // The root sends its tensors where they lie (send blocks), when it can.
    std::vector<const void *> blocks = isRoot ? sendBlocksOf(ins) : std::vector<const void *>();
    Status st = Status::success();
    if (!blocks.empty()) {
      st = eng->runBlocks("scatter", root, nullptr, blocks, s.data(), {},
                          out.numel() * e.perElement, e.type, RedOp::Sum);
    } else {
      at::Tensor whole = isRoot ? packed(ins, self->scratch(int64_t(n) * out.numel(), out))
                                : self->scratch(int64_t(n) * out.numel(), out);
      st = eng->run("scatter", root, whole.data_ptr(), s.data(), out.numel() * e.perElement, e.type,
                    RedOp::Sum);
    }
    if (st)
      s.finish();
    return st;
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCollc::reduce_scatter(std::vector<at::Tensor> &outputs,
                                  std::vector<std::vector<at::Tensor>> &inputs,
                                  const c10d::ReduceScatterOptions &opts) {
  const at::Tensor &out = single(outputs, "reduce_scatter");
  if (inputs.size() != 1 || inputs[0].size() != size_t(size_))
    fail("reduce_scatter takes a list of " + std::to_string(size_) + " input tensors");
  for (const at::Tensor &i : inputs[0])
    checkLike(i, out, "an input tensor of reduce_scatter");
  const auto [e, op] = reducedAs(out, opts.reduceOp);
  auto *eng = engine.get();
  ProcessGroupCollc *self = this;
  std::vector<at::Tensor> ins = inputs[0];
  return enqueue(c10d::OpType::REDUCE_SCATTER, outputs, [=, e = e, op = op]() -> Status {
    Staged s(out);
    Status st = Status::success();
    if (std::vector<const void *> blocks = sendBlocksOf(ins); !blocks.empty()) {
      // Read where they lie (send blocks).
      st = eng->runBlocks("reducescatter", 0, nullptr, blocks, s.data(), {},
                          out.numel() * e.perElement, e.type, op);
    } else {
      at::Tensor whole = packed(ins, self->scratch(int64_t(size_) * out.numel(), out));
      st = eng->run("reducescatter", 0, whole.data_ptr(), s.data(), out.numel() * e.perElement,
                    e.type, op);
    }
    if (st)
      s.finish();
    return st;
  });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupCollc::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                        const c10d::ReduceScatterOptions &opts) {
  checkTensor(input, "the input tensor");
  checkTensor(output, "the output tensor");
  if (output.scalar_type() != input.scalar_type() || input.numel() != output.numel() * size_)
    fail("reduce_scatter_tensor's input must hold " + std::to_string(size_) +
         " times the output's elements of its type");
  const auto [e, op] = reducedAs(output, opts.reduceOp);
  auto *eng = engine.get();
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, [=, e = e, op = op]() -> Status {
    at::Tensor src = input.contiguous();
    Staged out(output);
    Status st = eng->run("reducescatter", 0, src.data_ptr(), out.data(),
                         output.numel() * e.perElement, e.type, op);
    if (st)
      out.finish();
    return st;
  });
}

namespace {

/// The tag of all-to-all blocks exchanged as messages: above every tag a
/// user can give (an int), so that they never match a user's receive.
constexpr int64_t allToAllTag = int64_t(1) << 40;

/// A failed message \p s, as the group sees it: a message whose length is
/// not the receive's (both transports say "sent N bytes with tag", or that
/// a message "is longer than" the receive) is the caller's error and leaves
/// the group usable; anything else (no message within the timeout, a peer
/// that died, a message lost) breaks it, as it does a plan's call, so that
/// later operations fail at once instead of waiting for the timeout again.
/// Internal tags are named for what they carry.
Status messageFailure(GroupEngine *eng, const Status &s) {
  const std::string &m = s.message();
  if (eng && m.find(" bytes with tag ") == std::string::npos &&
      m.find("is longer than the") == std::string::npos)
    eng->markBroken(m);
  std::string text = m;
  const std::string internal = "tag " + std::to_string(allToAllTag);
  for (size_t at; (at = text.find(internal)) != std::string::npos;)
    text.replace(at, internal.size(), "the tag of all_to_all blocks");
  return Status::error("collc: " + text);
}

/// An all-to-all of blocks of any sizes, as NCCL and Gloo do it for uneven
/// splits: every block a message straight to its rank. \p sendBlocks[j]
/// goes to rank j and \p recvBlocks[j] receives from rank j (flat,
/// contiguous). A block whose size the two ranks disagree on is an error
/// naming both sizes.
Status pairwiseAllToAll(GroupEngine *eng, PeerMessages *peers,
                        const std::vector<at::Tensor> &sendBlocks,
                        std::vector<at::Tensor> &recvBlocks) {
  // A group of one has no peers.
  const int n = peers ? peers->size() : 1, me = peers ? peers->rank() : 0;
  struct Pending {
    std::mutex mu;
    std::condition_variable cv;
    int left = 0;
    Status status = Status::success();
  };
  auto pending = std::make_shared<Pending>();
  Status posted = Status::success();
  for (int k = 1; k < n && posted; ++k) {
    const int src = (me - k + n) % n;
    {
      std::lock_guard<std::mutex> lock(pending->mu);
      ++pending->left;
    }
    posted = peers->postRecv(src, allToAllTag, recvBlocks[size_t(src)].data_ptr(),
                             uint64_t(recvBlocks[size_t(src)].numel()) *
                                 recvBlocks[size_t(src)].element_size(),
                             [pending](const Status &s, int) {
                               std::lock_guard<std::mutex> lock(pending->mu);
                               if (!s && pending->status)
                                 pending->status = s;
                               --pending->left;
                               pending->cv.notify_all();
                             });
    if (!posted) {
      std::lock_guard<std::mutex> lock(pending->mu);
      --pending->left;
    }
  }
  Status sent = posted;
  for (int k = 1; k < n && sent; ++k) {
    const int dst = (me + k) % n;
    const at::Tensor &b = sendBlocks[size_t(dst)];
    sent = peers->send(dst, allToAllTag, b.data_ptr(), uint64_t(b.numel()) * b.element_size());
  }
  Status own = Status::success();
  if (recvBlocks[size_t(me)].numel() != sendBlocks[size_t(me)].numel())
    own = Status::error("collc: all_to_all: rank " + std::to_string(me) + " sends itself " +
                        std::to_string(sendBlocks[size_t(me)].numel()) + " elements and receives " +
                        std::to_string(recvBlocks[size_t(me)].numel()));
  else if (sent && recvBlocks[size_t(me)].numel())
    recvBlocks[size_t(me)].copy_(sendBlocks[size_t(me)]);
  // The receives posted are waited for in every case: their buffers are ours.
  std::unique_lock<std::mutex> lock(pending->mu);
  pending->cv.wait(lock, [&] { return pending->left == 0; });
  if (!sent)
    return messageFailure(eng, sent);
  if (!pending->status)
    return messageFailure(eng, pending->status);
  return own;
}

/// Before a direct exchange, whose messages no plan call would take: a call
/// that moves nothing (GroupEngine::agree()), named after the exchange and
/// of the tensors' element type, so that every rank of the group is known
/// to make the same exchange. A rank that runs a plan instead (an
/// all_to_all_single without split lists, any other collective), or an
/// exchange of another kind or type, fails every rank with both calls
/// named; without it the exchange and the plan would each wait for the
/// other until the group's timeout.
Status directExchangeGuard(GroupEngine *eng, const char *what, const at::Tensor &like) {
  if (!eng)
    return Status::success();
  const Elements e = movedAs(like);
  return eng->agree(std::string("torch ") + what + " of " + c10::toString(like.scalar_type()) +
                        " (a direct exchange)",
                    e.type, e.perElement);
}

/// Rows of dim 0 per peer: \p splits, or equal when empty.
std::vector<int64_t> rowSplits(const std::vector<int64_t> &splits, const at::Tensor &t, int n,
                               const char *what) {
  const int64_t rows = t.dim() ? t.size(0) : t.numel();
  if (splits.empty()) {
    if (rows % n)
      fail(std::string("all_to_all_single's ") + what + " has " + std::to_string(rows) +
           " rows, which " + std::to_string(n) + " ranks cannot split equally");
    return std::vector<int64_t>(size_t(n), rows / n);
  }
  if (splits.size() != size_t(n))
    fail(std::string("all_to_all_single's ") + what + " splits have " +
         std::to_string(splits.size()) + " entries, not " + std::to_string(n));
  int64_t total = 0;
  for (int64_t s : splits) {
    if (s < 0)
      fail(std::string("all_to_all_single's ") + what + " splits must not be negative");
    total += s;
  }
  if (total != rows)
    fail(std::string("all_to_all_single's ") + what + " splits add up to " + std::to_string(total) +
         " rows, not its " + std::to_string(rows));
  return splits;
}

} // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupCollc::alltoall_base(at::Tensor &output,
                                                                at::Tensor &input,
                                                                std::vector<int64_t> &outputSplits,
                                                                std::vector<int64_t> &inputSplits,
                                                                const c10d::AllToAllOptions &) {
  checkTensor(input, "the input tensor");
  checkTensor(output, "the output tensor");
  if (output.scalar_type() != input.scalar_type())
    fail("all_to_all_single's output is " + std::string(c10::toString(output.scalar_type())) +
         ", its input " + c10::toString(input.scalar_type()));
  const int n = size_;
  const std::vector<int64_t> inRows = rowSplits(inputSplits, input, n, "input");
  const std::vector<int64_t> outRows = rowSplits(outputSplits, output, n, "output");
  const int64_t inRow = input.dim() && input.size(0) ? input.numel() / input.size(0) : 1;
  const int64_t outRow = output.dim() && output.size(0) ? output.numel() / output.size(0) : 1;
  const bool equal = inputSplits.empty() && outputSplits.empty();
  if (equal && input.numel() != output.numel())
    fail("all_to_all_single with equal splits needs input and output of one size");
  const Elements e = movedAs(input);
  auto *eng = engine.get();
  std::shared_ptr<PeerMessages> p = peers;
  return enqueue(c10d::OpType::ALLTOALL_BASE, {output}, [=]() -> Status {
    at::Tensor src = input.contiguous().reshape({-1});
    Staged out(output);
    if (equal) {
      Status st = eng->run("alltoall", 0, src.data_ptr(), out.data(),
                           uint64_t(input.numel() / n) * e.perElement, e.type, RedOp::Sum);
      if (st)
        out.finish();
      return st;
    }
    std::vector<at::Tensor> sendBlocks, recvBlocks;
    at::Tensor dst = out.buffer.reshape({-1});
    int64_t inAt = 0, outAt = 0;
    for (int j = 0; j < n; ++j) {
      sendBlocks.push_back(src.narrow(0, inAt, inRows[j] * inRow));
      recvBlocks.push_back(dst.narrow(0, outAt, outRows[j] * outRow));
      inAt += inRows[j] * inRow;
      outAt += outRows[j] * outRow;
    }
    Status st = directExchangeGuard(eng, "all_to_all_single with split lists", input);
    if (st)
      st = pairwiseAllToAll(eng, p.get(), sendBlocks, recvBlocks);
    if (st)
      out.finish();
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollc::alltoall(std::vector<at::Tensor> &outputs,
                                                           std::vector<at::Tensor> &inputs,
                                                           const c10d::AllToAllOptions &) {
  if (outputs.size() != size_t(size_) || inputs.size() != size_t(size_))
    fail("all_to_all takes lists of " + std::to_string(size_) + " input and output tensors");
  // Blocks may differ in size from peer to peer, not in type.
  for (const std::vector<at::Tensor> *list : {&inputs, &outputs})
    for (const at::Tensor &t : *list) {
      checkTensor(t, "a tensor of all_to_all");
      if (t.scalar_type() != inputs[0].scalar_type())
        fail("all_to_all's tensors must have one type");
    }
  std::shared_ptr<PeerMessages> p = peers;
  auto *eng = engine.get();
  const at::Tensor like = inputs[0];
  return enqueue(c10d::OpType::ALLTOALL, outputs, [=]() mutable -> Status {
    if (Status st = directExchangeGuard(eng, "all_to_all of tensor lists", like); !st)
      return st;
    std::vector<at::Tensor> sendBlocks, recvBlocks;
    for (const at::Tensor &t : inputs)
      sendBlocks.push_back(t.contiguous().reshape({-1}));
    // Received where they lie when the outputs are contiguous and apart
    // from each other and from the inputs (one may be sent from while
    // another receives); otherwise into tensors of their own, then copied.
    std::vector<at::Tensor> both = outputs;
    both.insert(both.end(), inputs.begin(), inputs.end());
    const bool inPlace = contiguousApart(both);
    for (const at::Tensor &t : outputs)
      recvBlocks.push_back(inPlace ? t.view({-1}) : at::empty({t.numel()}, t.options()));
    Status st = pairwiseAllToAll(eng, p.get(), sendBlocks, recvBlocks);
    if (st && !inPlace)
      for (size_t j = 0; j < outputs.size(); ++j)
        outputs[j].copy_(recvBlocks[j].view(outputs[j].sizes()));
    return st;
  });
}

//===----------------------------------------------------------------------===//
// Point to point
//===----------------------------------------------------------------------===//

c10::intrusive_ptr<c10d::Work> ProcessGroupCollc::send(std::vector<at::Tensor> &tensors,
                                                       int dstRank, int tag) {
  const at::Tensor &t = single(tensors, "send");
  if (tag < 0)
    fail("send with tag " + std::to_string(tag) + ": tags must not be negative");
  if (dstRank < 0 || dstRank >= size_ || dstRank == rank_)
    fail("send to rank " + std::to_string(dstRank) + ": not another rank of the group of " +
         std::to_string(size_));
  std::shared_ptr<PeerMessages> p = peers;
  auto *eng = engine.get();
  return enqueue(c10d::OpType::SEND, tensors, [=]() -> Status {
    at::Tensor src = t.contiguous();
    Status s = p->send(dstRank, tag, src.data_ptr(), uint64_t(src.numel()) * src.element_size());
    return s ? s : messageFailure(eng, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollc::recv(std::vector<at::Tensor> &tensors,
                                                       int srcRank, int tag) {
  if (srcRank < 0 || srcRank >= size_ || srcRank == rank_)
    fail("receive from rank " + std::to_string(srcRank) + ": not another rank of the group of " +
         std::to_string(size_));
  return receive(tensors, srcRank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollc::recvAnysource(std::vector<at::Tensor> &tensors,
                                                                int tag) {
  if (size_ < 2)
    fail("a receive from any source in a group of one rank");
  return receive(tensors, PeerMessages::anySource, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollc::receive(std::vector<at::Tensor> &tensors, int src,
                                                          int tag) {
  const at::Tensor &t = single(tensors, "recv");
  if (tag < 0)
    fail("receive with tag " + std::to_string(tag) + ": tags must not be negative");
  std::shared_ptr<PeerMessages> p = peers;
  const c10d::OpType type =
      src == PeerMessages::anySource ? c10d::OpType::RECVANYSOURCE : c10d::OpType::RECV;
  // The receive is posted in the stream's order and completes when its
  // message is in: the stream goes on meanwhile (a receive posted before a
  // send of this rank does not hold the send back).
  // The message thread completes it: the future's callbacks, which may
  // wait for another message, run on the group's callback thread instead.
  std::weak_ptr<GroupEngine> weak = engine;
  return enqueueStarted(
      type, tensors,
      [=](std::shared_ptr<Task> completion, std::shared_ptr<std::atomic<int>> source) -> Status {
        auto staged = std::make_shared<Staged>(t);
        return p->postRecv(src, tag, staged->data(), uint64_t(t.numel()) * t.element_size(),
                           [staged, completion, source, weak](const Status &s, int from) {
                             source->store(from);
                             std::shared_ptr<GroupEngine> eng = weak.lock();
                             if (s) {
                               at::NoGradGuard noGrad;
                               staged->finish();
                               completion->finish(s, eng.get());
                             } else {
                               completion->finish(messageFailure(eng.get(), s), eng.get());
                             }
                           });
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollc::barrier(const c10d::BarrierOptions &) {
  auto *eng = engine.get();
  return enqueue(c10d::OpType::BARRIER, {}, [=]() -> Status { return eng->barrier(); });
}

void ProcessGroupCollc::monitoredBarrier(const c10d::BarrierOptions &opts, bool) {
  // The runtime names a rank that died, failed or did not call: a failed
  // barrier says which.
  c10::intrusive_ptr<c10d::Work> work = barrier(opts);
  work->wait(opts.timeout.count() > 0 ? opts.timeout : kNoTimeout);
}

} // namespace coll::torchext
