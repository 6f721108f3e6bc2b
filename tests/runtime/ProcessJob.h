//===- ProcessJob.h - The processes of one ProcessGroup test job -*- C++ -*-===//
//
/// \file
/// A test job: one runtime_shm_rank process per rank, started with
/// posix_spawn (so that the test process never forks while it has
/// threads), waited for with a time limit (what is left then is killed),
/// with each rank's exit status, output and end time. Shared by the
/// process executor tests and the fault-injection tests.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TESTS_RUNTIME_PROCESSJOB_H
#define COLL_TESTS_RUNTIME_PROCESSJOB_H

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <random>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace coll::test {

using Clock = std::chrono::steady_clock;

/// How one rank's process ended.
struct RankExit {
  bool exited = false; ///< Exited (rather than killed by a signal).
  int code = -1;       ///< Exit status, or the signal.
  std::string output;  ///< stdout and stderr.
  double seconds = 0;  ///< From the start of the job to this process's end.
};

/// A job name no other test (or test run) uses.
inline std::string uniqueJob(const std::string &what) {
  // The pid alone repeats once pids wrap, and a killed job's names may
  // still be there: a random part keeps runs apart.
  static const unsigned nonce = std::random_device()() & 0xffffff;
  static int counter = 0;
  return "gt-" + what + "-" + std::to_string(getpid()) + "-" + std::to_string(nonce) + "-" +
         std::to_string(++counter);
}

/// One test job: its ranks' processes.
class Job {
public:
  explicit Job(std::string name) : name(std::move(name)) {}
  ~Job() {
    for (pid_t p : pids)
      if (p > 0) {
        kill(p, SIGCONT);
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
      }
  }

  /// Starts rank \p rank of \p nranks with \p extra arguments.
  void start(int rank, int nranks, const std::vector<std::string> &extra) {
    if (pids.empty())
      begin = Clock::now();
    std::vector<std::string> args = {
        COLL_SHM_RANK_HELPER,  "--job", name, "--rank", std::to_string(rank), "--nranks",
        std::to_string(nranks)};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char *> argv;
    for (std::string &s : args)
      argv.push_back(s.data());
    argv.push_back(nullptr);
    std::string out = ::testing::TempDir() + name + "." + std::to_string(rank) + ".out";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ASSERT_EQ(rc, 0) << "cannot start " << args[0];
    pids.push_back(pid);
    started.push_back(pid);
    outputs.push_back(out);
    exits.emplace_back();
  }

  /// The job's name.
  const std::string &jobName() const { return name; }

  /// The process of rank \p i (also after it ended).
  pid_t pid(size_t i) const { return started[i]; }

  /// Waits for every process, at most \p limit seconds from the start of
  /// the job; kills what is left then. False when it had to.
  bool wait(double limit) {
    bool allDone = false;
    while (!allDone) {
      allDone = true;
      for (size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] <= 0)
          continue;
        int st = 0;
        pid_t r = waitpid(pids[i], &st, WNOHANG);
        if (r == pids[i]) {
          reap(i, st);
        } else {
          allDone = false;
        }
      }
      if (allDone)
        break;
      if (std::chrono::duration<double>(Clock::now() - begin).count() > limit) {
        for (size_t i = 0; i < pids.size(); ++i)
          if (pids[i] > 0) {
            kill(pids[i], SIGCONT);
            kill(pids[i], SIGKILL);
            int st = 0;
            waitpid(pids[i], &st, 0);
            reap(i, st);
          }
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  /// Whether every process but rank \p but's has exited (not reaped:
  /// wait() still sees them).
  bool othersExited(size_t but) const {
    for (size_t i = 0; i < started.size(); ++i) {
      siginfo_t info{};
      if (i != but && (waitid(P_PID, id_t(started[i]), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
                       info.si_pid == 0))
        return false;
    }
    return true;
  }
  /// Waits until othersExited(\p but), at most \p seconds.
  void waitForOthers(size_t but, double seconds) const {
    const Clock::time_point start = Clock::now();
    while (!othersExited(but) &&
           std::chrono::duration<double>(Clock::now() - start).count() < seconds)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  const RankExit &exit(size_t i) const { return exits[i]; }
  size_t size() const { return exits.size(); }

  /// Every rank's output, for failure messages.
  std::string outputs_() const {
    std::string all;
    for (size_t i = 0; i < exits.size(); ++i)
      all += "--- rank " + std::to_string(i) + " (" + (exits[i].exited ? "exit " : "signal ") +
             std::to_string(exits[i].code) + ")\n" + exits[i].output;
    return all;
  }

  const std::string name;

private:
  void reap(size_t i, int st) {
    RankExit &e = exits[i];
    e.exited = WIFEXITED(st);
    e.code = e.exited ? WEXITSTATUS(st) : WIFSIGNALED(st) ? WTERMSIG(st) : -1;
    e.seconds = std::chrono::duration<double>(Clock::now() - begin).count();
    std::ifstream f(outputs[i]);
    std::stringstream ss;
    ss << f.rdbuf();
    e.output = ss.str();
    std::remove(outputs[i].c_str());
    pids[i] = -1;
  }

  std::vector<pid_t> pids;    ///< -1 once reaped.
  std::vector<pid_t> started; ///< Every process started.
  std::vector<std::string> outputs;
  std::vector<RankExit> exits;
  Clock::time_point begin;
};

/// The entries of /dev/shm whose names start with \p prefix, sorted.
inline std::vector<std::string> shmEntries(const std::string &prefix) {
  std::vector<std::string> names;
  if (DIR *d = opendir("/dev/shm")) {
    while (dirent *e = readdir(d))
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
        names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace coll::test

#endif // COLL_TESTS_RUNTIME_PROCESSJOB_H
