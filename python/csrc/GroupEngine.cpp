//===- GroupEngine.cpp - One process group's ordered stream of work -------===//

#include "GroupEngine.h"

#include "coll/Runtime/Collective.h"
#include "coll/Runtime/Executor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace coll::torchext {

PlanLibrary &planLibrary() {
  static PlanLibrary *library = [] {
    // The environment's, the installed package's own, the build tree's,
    // PATH's.
    const std::string own = objectDirectory(reinterpret_cast<const void *>(&planLibrary));
    std::vector<std::string> collc = {own + "/bin/collc"}, stdlib = {own + "/stdlib"};
#ifdef COLLC_TORCH_BUILD_COLLC
    collc.push_back(COLLC_TORCH_BUILD_COLLC);
#endif
#ifdef COLLC_TORCH_SOURCE_STDLIB
    stdlib.push_back(COLLC_TORCH_SOURCE_STDLIB);
#endif
    PlanLibraryPaths paths = PlanLibraryPaths::fromEnvironment(collc, stdlib);
#ifdef COLLC_TORCH_SOURCE_STDLIB
    if (paths.stdlib.empty())
      paths.stdlib = COLLC_TORCH_SOURCE_STDLIB;
#endif
    return PlanLibrary::fromEnvironment(std::move(paths)).release();
  }();
  return *library;
}

bool Task::done() const {
  std::lock_guard<std::mutex> lock(mu);
  return finished;
}

bool Task::settled() const {
  std::lock_guard<std::mutex> lock(mu);
  return claimed;
}

bool GroupEngine::runsTasksOnThisThread() {
  std::lock_guard<std::mutex> lock(mu);
  return runsTasksHere();
}

Status Task::outcome() const {
  std::lock_guard<std::mutex> lock(mu);
  return result;
}

bool Task::wait(double timeoutSeconds) const {
  std::unique_lock<std::mutex> lock(mu);
  if (timeoutSeconds < 0) {
    cv.wait(lock, [&] { return finished; });
    return true;
  }
  return cv.wait_for(lock, std::chrono::duration<double>(timeoutSeconds), [&] { return finished; });
}

void Task::run() {
  Status s = Status::error("collc: an operation failed with an exception");
  try {
    s = body();
  } catch (const std::exception &e) {
    s = Status::error(std::string("collc: ") + e.what());
  } catch (...) {
  }
  finish(std::move(s));
}

void Task::finish(Status outcomeOfTask, GroupEngine *callbacksOn) {
  std::function<void(const Status &)> f;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (claimed)
      return;
    claimed = true;
    result = outcomeOfTask;
    body = nullptr; // Drop what the body holds (buffers) now.
    f = std::move(onDone);
    onDone = nullptr;
  }
  auto markFinished = [this] {
    {
      std::lock_guard<std::mutex> lock(mu);
      finished = true;
    }
    cv.notify_all();
  };
  if (callbacksOn && f) {
    // The callback thread runs the future's callbacks, which may wait for
    // other operations whose futures it completes later: the task is done
    // now (CollcWork::wait() waits for the future apart).
    markFinished();
    callbacksOn->runCallback([f = std::move(f), outcomeOfTask] { f(outcomeOfTask); });
    return;
  }
  // Here the future first (its callbacks may launch operations and wait for
  // them, which this thread, the one that runs tasks, handles), then the
  // waiters.
  if (f) {
    try {
      f(outcomeOfTask);
    } catch (...) {
      // A callback's error is the future's (torch records it there).
    }
  }
  markFinished();
}

void GroupEngine::runCallback(std::function<void()> f) {
  std::unique_lock<std::mutex> lock(callbackMu);
  if (callbacksStopping) {
    // The group is going: its callback thread may be gone already.
    lock.unlock();
    f();
    return;
  }
  if (!callbackThread.joinable())
    callbackThread = std::thread([this] {
      callbackThreadId = std::this_thread::get_id();
      std::unique_lock<std::mutex> lock(callbackMu);
      for (;;) {
        callbackCv.wait(lock, [&] { return callbacksStopping || !callbacks.empty(); });
        if (callbacks.empty())
          return;
        std::function<void()> next = std::move(callbacks.front());
        callbacks.pop_front();
        lock.unlock();
        next();
        next = nullptr;
        lock.lock();
      }
    });
  callbacks.push_back(std::move(f));
  callbackCv.notify_one();
}

Result<std::unique_ptr<GroupEngine>> GroupEngine::create(const std::string &job, int rank, int size,
                                                         double timeoutSeconds,
                                                         KeyValueStore *store) {
  ProcessGroupOptions options;
  options.setupTimeoutSeconds = timeoutSeconds;
  options.timeoutSeconds = timeoutSeconds;
  // COLLC_PROTOCOL: the protocol of the group's connections on this host
  // (docs/runtime.md, "Protocols"); every rank must set it alike.
  if (const char *protocol = std::getenv("COLLC_PROTOCOL"); protocol && *protocol)
    if (Status s = parseProtocolChoice(protocol, options.protocol); !s)
      return Status::error("COLLC_PROTOCOL: " + s.message());
  Result<std::unique_ptr<ProcessGroup>> group =
      store ? ProcessGroup::create(job, rank, size, *store, options)
            : ProcessGroup::create(job, rank, size, options);
  if (!group)
    return group.getStatus();
  return std::unique_ptr<GroupEngine>(new GroupEngine(std::move(*group), rank, size));
}

GroupEngine::GroupEngine(std::unique_ptr<ProcessGroup> group, int rank, int size)
    : group(std::move(group)), myRank(rank), mySize(size) {
  for (int q = 0; q < size; ++q)
    acrossHosts = acrossHosts || this->group->isRemote(q);
  worker = std::thread([this] { workerLoop(); });
}

GroupEngine::~GroupEngine() {
  std::deque<std::shared_ptr<Task>> left;
  {
    std::unique_lock<std::mutex> lock(mu);
    stopping = true;
    left.swap(queue);
    workerCv.notify_all();
    idleCv.wait(lock, [&] { return !running(); });
  }
  for (const std::shared_ptr<Task> &t : left)
    t->finish(Status::error("collc: the process group was destroyed before this operation ran"));
  worker.join();
  // The callbacks posted so far run first.
  {
    std::lock_guard<std::mutex> lock(callbackMu);
    callbacksStopping = true;
    callbackCv.notify_all();
  }
  if (callbackThread.joinable())
    callbackThread.join();
}

namespace {
/// How long a task waits for the thread that submitted it to run it (the
/// caller of a blocking operation waits for it at once) before the worker
/// takes it.
constexpr auto helpGrace = std::chrono::microseconds(30);
/// How often a worker that is not woken for each task looks for one: every
/// millisecond at first, then less often while it finds none (its callers
/// run their own tasks), down to 20 times a second.
constexpr auto minPoll = std::chrono::milliseconds(1);
constexpr auto maxPoll = std::chrono::milliseconds(50);
} // namespace

std::shared_ptr<Task> GroupEngine::submit(std::function<Status()> body,
                                          std::function<void(const Status &)> onDone) {
  auto task = std::make_shared<Task>(std::move(body), std::move(onDone));
  task->submitted = std::chrono::steady_clock::now();
  bool nested = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!stopping) {
      // A task submitted behind one nobody ran yet: the caller does not
      // wait for each, so the worker is woken for each from now on.
      if (!queue.empty() && !running())
        wakeWorker = true;
      queue.push_back(task);
      // Submitted from a task's onDone, the worker is this thread, busy in
      // the callback, which may wait for what it submits: run it below.
      nested = runsTasksHere();
      if (!nested) {
        if (wakeWorker)
          workerCv.notify_one();
        return task;
      }
    }
  }
  if (nested) {
    runNested(task);
    return task;
  }
  task->finish(Status::error("collc: the process group is being destroyed"));
  return task;
}

void GroupEngine::runNested(const std::shared_ptr<Task> &task) {
  while (!task->done()) {
    std::shared_ptr<Task> next;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (queue.empty())
        return;
      next = std::move(queue.front());
      queue.pop_front();
    }
    next->run();
  }
}

void GroupEngine::help(const std::shared_ptr<Task> &task) {
  {
    std::unique_lock<std::mutex> lock(mu);
    if (runsTasksHere()) {
      lock.unlock();
      runNested(task);
      return;
    }
    if (running() || queue.empty() || queue.front() != task)
      return;
    queue.pop_front();
    runner = std::this_thread::get_id();
    // The caller waits for its operations: no need to wake the worker.
    wakeWorker = false;
  }
  task->run();
  std::lock_guard<std::mutex> lock(mu);
  runner = std::thread::id();
  if (!queue.empty())
    workerCv.notify_one();
  if (stopping)
    idleCv.notify_all();
}

void GroupEngine::handToWorker(const std::shared_ptr<Task> &task) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!runsTasksHere()) {
      // From now on the worker is woken for each task (as for
      // async_op=True), and for this one now.
      wakeWorker = true;
      workerCv.notify_one();
      return;
    }
  }
  help(task);
}

void GroupEngine::workerLoop() {
  std::unique_lock<std::mutex> lock(mu);
  auto poll = std::chrono::steady_clock::duration(minPoll);
  for (;;) {
    if (stopping)
      return;
    if (running() || queue.empty()) {
      // Woken for each task, or looking now and then when the callers run
      // their tasks themselves.
      if (wakeWorker) {
        workerCv.wait(lock);
        poll = minPoll;
      } else {
        workerCv.wait_for(lock, poll);
        if (queue.empty())
          poll = std::min<std::chrono::steady_clock::duration>(2 * poll, maxPoll);
      }
      continue;
    }
    poll = minPoll;
    // A task just submitted is left to its caller a little while.
    const auto due = queue.front()->submitted + helpGrace;
    if (std::chrono::steady_clock::now() < due) {
      workerCv.wait_until(lock, due);
      continue;
    }
    std::shared_ptr<Task> task = std::move(queue.front());
    queue.pop_front();
    runner = std::this_thread::get_id();
    // Nobody ran it: its caller goes on meanwhile (async_op=True).
    wakeWorker = true;
    lock.unlock();
    task->run();
    task.reset();
    lock.lock();
    runner = std::thread::id();
    if (stopping)
      idleCv.notify_all();
  }
}

void *GroupEngine::allocate(size_t bytes, std::string *error) {
  std::lock_guard<std::mutex> lock(allocMu);
  return group->allocate(bytes, error);
}

void GroupEngine::deallocate(void *ptr) {
  std::lock_guard<std::mutex> lock(allocMu);
  group->deallocate(ptr);
}

Result<std::shared_ptr<const ValidatedPlan>> GroupEngine::planFor(const std::string &collective,
                                                                  uint32_t root, uint64_t bytes) {
  // The plan of the previous call of this group serves a call of the same
  // collective, root and size without a look in the tables.
  PlanLibrary &library = planLibrary();
  const uint64_t generation = library.generation();
  if (!lastPlan || lastCollective != collective || lastRoot != root || lastBytes != bytes ||
      lastGeneration != generation) {
    Result<std::shared_ptr<const ValidatedPlan>> plan =
        library.plan(collective, uint32_t(mySize), root, bytes, acrossHosts);
    if (!plan)
      return Status::error("collc: " + plan.message());
    lastPlan = *plan;
    lastCollective = collective;
    lastRoot = root;
    lastBytes = bytes;
    lastGeneration = generation;
  }
  return lastPlan;
}

Status GroupEngine::failed(const Status &s, ErrorKind kind) {
  // A timeout or a peer's failure breaks the runtime's group for later
  // calls; point-to-point messages learn it here.
  if (kind == ErrorKind::Timeout || kind == ErrorKind::Remote)
    markBroken(s.message());
  return Status::error("collc: " + s.message());
}

void GroupEngine::markBroken(const std::string &why) {
  std::lock_guard<std::mutex> lock(brokenMu);
  if (brokenWhy.empty())
    brokenWhy = why;
}

Status GroupEngine::broken() const {
  std::lock_guard<std::mutex> lock(brokenMu);
  if (brokenWhy.empty())
    return Status::success();
  return Status::error("collc: the group is broken by an earlier failure: " + brokenWhy);
}

Status GroupEngine::agree(const std::string &what, DataType type, uint64_t count) {
  if (mySize == 1)
    return Status::success();
  auto it = agreementPlans.find(what);
  if (it == agreementPlans.end()) {
    Plan p;
    p.info.name = what;
    p.info.collective = CollectiveKind::Custom;
    p.info.nranks = uint32_t(mySize);
    p.info.inputChunks = p.info.outputChunks = 1;
    p.info.connectionDepth = 2;
    Threadblock tb;
    tb.steps.push_back(
        makeInstruction(Opcode::Copy, BufferKind::Input, 0, BufferKind::Output, 0, 1));
    p.ranks.assign(size_t(mySize), RankPlan());
    for (RankPlan &rank : p.ranks)
      rank.threadblocks.push_back(tb);
    Result<ValidatedPlan> plan = ValidatedPlan::make(std::move(p));
    if (!plan)
      return Status::error("collc: " + plan.message());
    it =
        agreementPlans.emplace(what, std::make_shared<const ValidatedPlan>(std::move(*plan))).first;
  }
  // Room for one unit of the widest element there is, times count.
  std::vector<uint8_t> in(size_t(count * dataTypeSize(type)), 0), out(in.size());
  ErrorKind kind = ErrorKind::None;
  Status s =
      group->execute(*it->second, CallArgs{in.data(), out.data(), count, type, RedOp::Sum}, &kind);
  if (!s)
    return failed(s, kind);
  return s;
}

Status GroupEngine::barrier() {
  if (mySize == 1)
    return Status::success();
  // The allreduce of one byte, under a name of its own.
  Result<std::shared_ptr<const ValidatedPlan>> base = planFor("allreduce", 0, 1);
  if (!base)
    return base.getStatus();
  if (!barrierPlan || barrierBase != *base) {
    Plan p = (*base)->plan();
    p.info.name = "torch barrier";
    Result<ValidatedPlan> plan = ValidatedPlan::make(std::move(p));
    if (!plan)
      return Status::error("collc: " + plan.message());
    barrierPlan = std::make_shared<const ValidatedPlan>(std::move(*plan));
    barrierBase = *base;
  }
  uint8_t token = 1;
  ErrorKind kind = ErrorKind::None;
  Status s =
      group->execute(*barrierPlan, CallArgs{&token, &token, 1, DataType::Uint8, RedOp::Max}, &kind);
  if (!s)
    return failed(s, kind);
  return s;
}

Status GroupEngine::run(const std::string &collective, uint32_t root, const void *sendbuf,
                        void *recvbuf, uint64_t count, DataType type, RedOp op) {
  return execute(collective, root, CallArgs{sendbuf, recvbuf, count, type, op});
}

Status GroupEngine::runBlocks(const std::string &collective, uint32_t root, const void *sendbuf,
                              const std::vector<const void *> &sendBlocks, void *recvbuf,
                              const std::vector<void *> &recvBlocks, uint64_t count, DataType type,
                              RedOp op) {
  if (!findCollective(collective))
    return Status::error("collc: " + collective + " is not a built-in collective");
  CallArgs args{sendbuf, recvbuf, count, type, op};
  if (!sendBlocks.empty()) {
    args.sendBlocks = sendBlocks.data();
    args.numSendBlocks = sendBlocks.size();
  }
  if (!recvBlocks.empty()) {
    args.recvBlocks = recvBlocks.data();
    args.numRecvBlocks = recvBlocks.size();
  }
  return execute(collective, root, args);
}

Status GroupEngine::execute(const std::string &collective, uint32_t root, const CallArgs &args) {
  const CollectiveInfo *builtin = findCollective(collective);
  const uint64_t es = dataTypeSize(args.type), unit = args.count * es;
  uint64_t elements = args.count;
  if (builtin) {
    BufferElements b = collectiveBufferElements(builtin->kind, uint32_t(mySize), args.count);
    elements = std::max(b.input, b.output);
  }
  if (mySize == 1 && builtin) {
    // A group of one: every collective copies the input to the output, one
    // unit (an average of one value is the value).
    char *to = recvAddress(args, unit, 0);
    const char *from = sendAddress(args, unit, 0);
    if (unit && to != from)
      std::memmove(to, from, unit);
    return Status::success();
  }
  Result<std::shared_ptr<const ValidatedPlan>> plan = planFor(collective, root, elements * es);
  if (!plan)
    return plan.getStatus();
  ErrorKind kind = ErrorKind::None;
  Status s = group->execute(**plan, args, &kind);
  if (!s)
    return failed(s, kind);
  return s;
}

} // namespace coll::torchext
