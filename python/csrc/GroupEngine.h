//===- GroupEngine.h - One process group's ordered stream of work -*- C++ -*-===//
/// \file
/// What the PyTorch backend does for one group, without PyTorch: this
/// rank's coll::ProcessGroup, and a stream of tasks run one at a time in
/// the order they were submitted, on a background thread of the group (as
/// NCCL's process groups issue work on a stream). A thread that waits for a
/// task that is next in line and not started runs it itself, so a blocking
/// call costs no hand-over between threads.
//===----------------------------------------------------------------------===//
#ifndef COLLC_TORCH_GROUPENGINE_H
#define COLLC_TORCH_GROUPENGINE_H

#include "coll/Runtime/DataType.h"
#include "coll/Runtime/PlanLibrary.h"
#include "coll/Runtime/ProcessGroup.h"
#include "coll/Runtime/Status.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace coll::torchext {

/// The process's plans for the backend: paths from the environment
/// (COLLC, COLLC_STDLIB, COLLC_CACHE_DIR), else beside the extension or
/// from the build tree; the user's table from COLLC_PLANS; the standard
/// library's tables after the user's rows.
PlanLibrary &planLibrary();

class GroupEngine;

/// One submitted piece of work.
class Task {
public:
  Task(std::function<Status()> body, std::function<void(const Status &)> onDone)
      : body(std::move(body)), onDone(std::move(onDone)) {}
  /// Whether it has run (successfully or not).
  bool done() const;
  /// Its outcome; meaningful once done(), or once settled().
  Status outcome() const;
  /// Whether its outcome is known: it finished, or its completion (the
  /// future's callbacks) is running.
  bool settled() const;
  /// Waits until done() or \p timeoutSeconds passed (negative: no limit);
  /// returns done().
  bool wait(double timeoutSeconds) const;
  /// Finishes it without running its body (a task that stands for work
  /// done elsewhere, or one dropped), with \p outcome; only the first call
  /// counts. onDone (the future's completion and its callbacks) runs here
  /// and then the task is done and its waiters wake, as with Gloo's works;
  /// with \p callbacksOn, the task is done at once and onDone runs on that
  /// group's callback thread.
  void finish(Status outcome, GroupEngine *callbacksOn = nullptr);

private:
  friend class GroupEngine;
  /// Runs the body, records the outcome, wakes waiters, calls onDone.
  void run();
  std::function<Status()> body;
  std::function<void(const Status &)> onDone;
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  bool claimed = false; ///< finish() was called (it may not be done yet).
  bool finished = false;
  Status result = Status::success();
  std::chrono::steady_clock::time_point submitted;
};

/// This rank of one group.
class GroupEngine {
public:
  /// Joins job \p job (every rank of the group must give the same name) as
  /// \p rank of \p size; \p timeoutSeconds bounds the wait for peers, and
  /// for a call that stops moving. With \p store, the ranks meet through
  /// it and may span hosts (ProcessGroup::create() with a store).
  static Result<std::unique_ptr<GroupEngine>> create(const std::string &job, int rank, int size,
                                                     double timeoutSeconds,
                                                     KeyValueStore *store = nullptr);
  /// Fails the tasks that have not started and waits for the one running.
  ~GroupEngine();
  GroupEngine(const GroupEngine &) = delete;
  GroupEngine &operator=(const GroupEngine &) = delete;

  /// Queues \p body behind every earlier task; \p onDone is called with its
  /// outcome on the thread that ran it.
  std::shared_ptr<Task> submit(std::function<Status()> body,
                               std::function<void(const Status &)> onDone = nullptr);
  /// Runs \p task on this thread if it is next and nothing runs. Called
  /// from the thread that runs the group's tasks (a future's callback,
  /// which runs where its operation finished), runs every task queued up
  /// to \p task in order, there and then.
  void help(const std::shared_ptr<Task> &task);
  /// For a caller that waits for \p task with a time limit of its own: the
  /// worker runs it (woken now), so that the caller's wait can end first.
  /// Called from the thread that runs the group's tasks, it is help().
  void handToWorker(const std::shared_ptr<Task> &task);

  /// Runs \p collective (a built-in collective's name, or a user-declared
  /// one's) with root \p root on this rank's buffers through the plan the
  /// selection tables give for the call's size. Call it from a task.
  Status run(const std::string &collective, uint32_t root, const void *sendbuf, void *recvbuf,
             uint64_t count, DataType type, RedOp op);
  /// run() of a built-in collective with its send or receive buffer (or
  /// both) in blocks of one unit each (CallArgs::sendBlocks, recvBlocks):
  /// block i is where the buffer's unit i would be; as many as the
  /// collective sends or receives. An empty list: that buffer is \p sendbuf
  /// or \p recvbuf.
  Status runBlocks(const std::string &collective, uint32_t root, const void *sendbuf,
                   const std::vector<const void *> &sendBlocks, void *recvbuf,
                   const std::vector<void *> &recvBlocks, uint64_t count, DataType type, RedOp op);

  /// Meets the group's other ranks in a call that moves nothing: a plan of
  /// its own named \p what, in which every rank copies one unit of \p count
  /// elements of \p type to itself. The runtime compares the ranks' calls as
  /// for any plan, so a rank that calls anything else (another plan, or
  /// agree() with another name, type or count) fails every rank with both
  /// calls named, and the group stays usable. Call it from a task.
  Status agree(const std::string &what, DataType type, uint64_t count);

  /// Waits until every rank of the group called it: the allreduce of a
  /// byte, through a plan named "torch barrier", so that a rank that calls
  /// anything else meanwhile fails every rank with the barrier named. Call
  /// it from a task.
  Status barrier();

  /// After a timeout or a peer's death, in a plan's call or a message
  /// (markBroken()), the group is broken: this is an error saying why, and
  /// operations fail with it at once. Any thread.
  Status broken() const;
  /// Breaks the group with \p why (the first reason stays). Any thread.
  void markBroken(const std::string &why);

  int rank() const { return myRank; }
  int size() const { return mySize; }

  /// \p bytes of the group's registered memory (ProcessGroup::allocate():
  /// the peers read what this rank sends from it where it lies), or null
  /// with the reason in \p error. Any thread.
  void *allocate(size_t bytes, std::string *error);
  /// Frees what allocate() returned. Any thread.
  void deallocate(void *ptr);
  /// ProcessGroup::lastDirectMessages() of the last call.
  uint64_t lastDirectMessages() const { return group->lastDirectMessages(); }

  /// Runs \p f on the group's callback thread (started on first use), after
  /// those posted before: for completions that arrive on a thread that must
  /// not block, as the message thread that delivers receives. A future's
  /// callbacks run there may wait for more messages.
  void runCallback(std::function<void()> f);
  /// Whether this thread runs the group's tasks now (a future's callback
  /// on it runs inside the task that completed the future).
  bool runsTasksOnThisThread();
  /// Whether this thread is the group's callback thread.
  bool onCallbackThread() const { return callbackThreadId == std::this_thread::get_id(); }

private:
  GroupEngine(std::unique_ptr<ProcessGroup> group, int rank, int size);
  void workerLoop();
  /// On the thread that runs tasks now (runner): runs the queued
  /// tasks in order until \p task is done or none is left. A task's
  /// onDone (a future's callbacks, e.g. DDP's PowerSGD hook) may submit an
  /// operation and wait for it; nobody else may run it meanwhile.
  void runNested(const std::shared_ptr<Task> &task);
  /// run() and runBlocks(): the call \p args of \p collective with root
  /// \p root.
  Status execute(const std::string &collective, uint32_t root, const CallArgs &args);
  /// The plan for a call of \p bytes (the larger buffer) of \p collective
  /// with root \p root: the last call's, or the selection tables'.
  Result<std::shared_ptr<const ValidatedPlan>> planFor(const std::string &collective, uint32_t root,
                                                       uint64_t bytes);
  /// Whether a task runs (on the worker or a helper). Call with mu held.
  bool running() const { return runner != std::thread::id(); }
  /// Whether this thread runs the group's tasks now. Call with mu held.
  bool runsTasksHere() const { return runner == std::this_thread::get_id(); }
  std::unique_ptr<ProcessGroup> group;
  int myRank, mySize;
  /// Some rank of the group is on another host: plans from the standard
  /// library's network.select (PlanLibrary::plan()).
  bool acrossHosts = false;
  std::mutex allocMu; ///< allocate() and deallocate() one at a time.
  std::mutex mu;
  std::condition_variable workerCv; ///< The worker waits for tasks.
  std::condition_variable idleCv;   ///< The destructor waits for the running task.
  std::deque<std::shared_ptr<Task>> queue;
  /// The thread that runs a task now (on the worker or a helper); none
  /// while no task runs.
  std::thread::id runner;
  bool stopping = false;
  /// Whether submit() wakes the worker: not while callers run their own
  /// tasks (blocking operations), so that they cost no thread switch; then
  /// the worker looks for tasks now and then (every 1 to 50 ms), and is
  /// woken for each again once it found one nobody ran (async_op=True).
  bool wakeWorker = true;
  std::thread worker;
  /// runCallback()'s thread and what it has to run.
  std::mutex callbackMu;
  std::condition_variable callbackCv;
  std::deque<std::function<void()>> callbacks;
  bool callbacksStopping = false;
  std::thread callbackThread;
  std::atomic<std::thread::id> callbackThreadId{};
  /// The previous call's plan and what it was selected for (tasks run one
  /// at a time: no lock).
  std::shared_ptr<const ValidatedPlan> lastPlan;
  /// A failed call's error, prefixed; breaks the group for \p kind Timeout
  /// and Remote.
  Status failed(const Status &s, ErrorKind kind);
  mutable std::mutex brokenMu;
  std::string brokenWhy; ///< Empty: not broken.
  /// barrier()'s plan, and the allreduce plan it was made from.
  std::shared_ptr<const ValidatedPlan> barrierPlan, barrierBase;
  /// agree()'s plans by name.
  std::map<std::string, std::shared_ptr<const ValidatedPlan>> agreementPlans;
  std::string lastCollective;
  uint32_t lastRoot = 0;
  uint64_t lastBytes = 0;
  uint64_t lastGeneration = 0;
};

} // namespace coll::torchext

#endif // COLLC_TORCH_GROUPENGINE_H
