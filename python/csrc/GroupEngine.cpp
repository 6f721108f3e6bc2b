//===- GroupEngine.cpp - One process group's ordered stream of work -------===//

#include "GroupEngine.h"

#include "PlanLibrary.h"

#include "coll/Runtime/Collective.h"
#include "coll/Runtime/Executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace coll::torchext {

bool Task::done() const {
  std::lock_guard<std::mutex> lock(mu);
  return finished;
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

void Task::finish(Status outcomeOfTask) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (finished)
      return;
    result = outcomeOfTask;
    finished = true;
    body = nullptr; // Drop what the body holds (buffers) now.
  }
  cv.notify_all();
  if (onDone) {
    std::function<void(const Status &)> f = std::move(onDone);
    onDone = nullptr;
    f(outcomeOfTask);
  }
}

Result<std::unique_ptr<GroupEngine>> GroupEngine::create(const std::string &job, int rank,
                                                         int size, double timeoutSeconds) {
  ProcessGroupOptions options;
  options.setupTimeoutSeconds = timeoutSeconds;
  options.timeoutSeconds = timeoutSeconds;
  Result<std::unique_ptr<ProcessGroup>> group = ProcessGroup::create(job, rank, size, options);
  if (!group)
    return group.getStatus();
  return std::unique_ptr<GroupEngine>(new GroupEngine(std::move(*group), rank, size));
}

GroupEngine::GroupEngine(std::unique_ptr<ProcessGroup> group, int rank, int size)
    : group(std::move(group)), myRank(rank), mySize(size) {
  worker = std::thread([this] { workerLoop(); });
}

GroupEngine::~GroupEngine() {
  std::deque<std::shared_ptr<Task>> left;
  {
    std::unique_lock<std::mutex> lock(mu);
    stopping = true;
    left.swap(queue);
    cv.notify_all();
    cv.wait(lock, [&] { return !running; });
  }
  for (const std::shared_ptr<Task> &t : left)
    t->finish(Status::error("collc: the process group was destroyed before this operation ran"));
  worker.join();
}

std::shared_ptr<Task> GroupEngine::submit(std::function<Status()> body,
                                          std::function<void(const Status &)> onDone) {
  auto task = std::make_shared<Task>(std::move(body), std::move(onDone));
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!stopping) {
      queue.push_back(task);
      cv.notify_all();
      return task;
    }
  }
  task->finish(Status::error("collc: the process group is being destroyed"));
  return task;
}

void GroupEngine::help(const std::shared_ptr<Task> &task) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (running || queue.empty() || queue.front() != task)
      return;
    queue.pop_front();
    running = true;
  }
  task->run();
  std::lock_guard<std::mutex> lock(mu);
  running = false;
  cv.notify_all();
}

void GroupEngine::workerLoop() {
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    cv.wait(lock, [&] { return stopping || (!running && !queue.empty()); });
    if (stopping)
      return;
    std::shared_ptr<Task> task = std::move(queue.front());
    queue.pop_front();
    running = true;
    lock.unlock();
    task->run();
    task.reset();
    lock.lock();
    running = false;
    cv.notify_all();
  }
}

Status GroupEngine::run(const std::string &collective, uint32_t root, const void *sendbuf,
                        void *recvbuf, uint64_t count, DataType type, RedOp op) {
  const CollectiveInfo *builtin = findCollective(collective);
  uint64_t elements = count;
  if (builtin) {
    BufferElements b = collectiveBufferElements(builtin->kind, uint32_t(mySize), count);
    elements = std::max(b.input, b.output);
  }
  const uint64_t bytes = elements * dataTypeSize(type);
  if (mySize == 1 && builtin) {
    // A group of one: every collective copies the input to the output
    // (an average of one value is the value).
    if (bytes && sendbuf != recvbuf)
      std::memmove(recvbuf, sendbuf, bytes);
    return Status::success();
  }
  Result<std::shared_ptr<const ValidatedPlan>> plan =
      PlanLibrary::instance().plan(collective, uint32_t(mySize), root, bytes);
  if (!plan)
    return Status::error("collc: " + plan.message());
  Status s = group->execute(**plan, sendbuf, recvbuf, count, type, op);
  if (!s)
    return Status::error("collc: " + s.message());
  return s;
}

} // namespace coll::torchext
