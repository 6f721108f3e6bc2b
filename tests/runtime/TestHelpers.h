//===- TestHelpers.h - Running plans against the reference ------*- C++ -*-===//
/// \file
/// Helpers of the executor tests: build buffers for a plan (in place or out
/// of place), fill them with test data distinct per (rank, element), run the
/// plan on LocalWorld or the shared-memory ProcessGroup and compare every
/// defined output with the reference.
//===----------------------------------------------------------------------===//
#ifndef COLL_TESTS_RUNTIME_TESTHELPERS_H
#define COLL_TESTS_RUNTIME_TESTHELPERS_H

#include "coll/Runtime/Executor.h"
#include "coll/Runtime/ProcessGroup.h"
#include "coll/Runtime/Reference.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace coll::test {

/// One run of a plan.
struct RunCase {
  DataType type = DataType::Float32;
  RedOp op = RedOp::Sum;
  uint64_t count = 0;
  bool inplace = false; ///< Call with the collective's in-place alias.
  ExecMode mode = ExecMode::Threads;
  uint64_t slice = 16384;
  uint32_t workersPerRank = 1; ///< Threads mode; 0: a thread per threadblock.
  double timeout = 20;
  /// Run on the shared-memory ProcessGroup (its ranks as threads of this
  /// process) instead of LocalWorld; `mode` is then ignored.
  bool processGroup = false;
  /// The protocol choice of the run (the plan's by default).
  ProtocolChoice protocol;
  /// ExecOptions::streamingStoresFrom, ProcessGroupOptions::streamingStoresFrom.
  uint64_t streamingStoresFrom = 0;
};

inline std::string describe(const RunCase &c) {
  std::ostringstream os;
  os << dataTypeName(c.type) << " " << redOpName(c.op) << " count " << c.count
     << (c.inplace ? " in-place" : " out-of-place")
     << (c.processGroup               ? " processes"
         : c.mode == ExecMode::Single ? " single"
                                      : " threads")
     << " slice " << c.slice;
  if (c.mode == ExecMode::Threads || c.processGroup)
    os << " workers " << c.workersPerRank;
  if (c.protocol != ProtocolChoice())
    os << " protocol " << formatProtocolChoice(c.protocol);
  if (c.streamingStoresFrom)
    os << " streaming stores from " << c.streamingStoresFrom << " bytes";
  return os.str();
}

/// The buffers of every rank for one run.
struct WorldBuffers {
  std::vector<std::vector<char>> original; ///< Each rank's test input.
  std::vector<std::vector<char>> in, out;  ///< Out of place.
  std::vector<std::vector<char>> both;     ///< In place.
  std::vector<const void *> send;
  std::vector<void *> recv;
};

/// Sets up the buffers of a run of \p plan for \p c from the inputs in
/// b.original, which must be filled: in place, each rank's input is copied
/// to its alias position in one buffer; out of place, into b.in, or with
/// \p copyInputs false the run reads b.original itself (and must not
/// modify it). Outputs start as 0xa5 bytes so that an element nobody wrote
/// shows.
inline void placeBuffers(const Plan &plan, const RunCase &c, WorldBuffers &b,
                         bool copyInputs = true) {
  const PlanInfo &info = plan.info;
  const uint32_t n = info.nranks;
  const size_t es = dataTypeSize(c.type);
  BufferElements e = planBufferElements(info, c.count);
  const uint64_t unit = c.count * es;
  b.in.assign(n, {});
  b.out.assign(n, {});
  b.both.assign(n, {});
  b.send.assign(n, nullptr);
  b.recv.assign(n, nullptr);
  for (uint32_t r = 0; r < n; ++r) {
    if (c.inplace) {
      b.both[r].assign(std::max(e.input, e.output) * es + 1, char(0xa5));
      char *p = b.both[r].data();
      // The collective's alias: one buffer holds the other at block
      // inPlaceBlock() (allgather's input, reducescatter's output).
      const InPlaceAlias alias = collectiveInfo(info.collective).inPlace;
      char *inner = p + inPlaceBlock(info.collective, r) * unit;
      char *send = alias == InPlaceAlias::InputInOutput ? inner : p;
      char *recv = alias == InPlaceAlias::OutputInInput ? inner : p;
      std::memcpy(send, b.original[r].data(), e.input * es);
      b.send[r] = send;
      b.recv[r] = recv;
    } else {
      if (copyInputs)
        b.in[r] = b.original[r];
      b.out[r].assign(e.output * es + 1, char(0xa5));
      b.send[r] = copyInputs ? b.in[r].data() : b.original[r].data();
      b.recv[r] = b.out[r].data();
    }
  }
}

/// Fills b.original with every rank's input for a run of \p plan for \p c;
/// \p fill writes rank r's n input elements (default: fillTestInput).
inline void
fillInputs(const Plan &plan, const RunCase &c, WorldBuffers &b,
           const std::function<void(uint32_t rank, uint64_t n, void *buf)> &fill = nullptr) {
  const uint32_t n = plan.info.nranks;
  const size_t es = dataTypeSize(c.type);
  BufferElements e = planBufferElements(plan.info, c.count);
  b.original.assign(n, {});
  for (uint32_t r = 0; r < n; ++r) {
    // One spare byte: data() of an empty vector may be null.
    b.original[r].resize(e.input * es + 1);
    if (fill)
      fill(r, e.input, b.original[r].data());
    else
      fillTestInput(c.type, c.op, n, r, e.input, b.original[r].data());
  }
}

/// Input element e of rank \p r in call \p call of a run of calls (\p n
/// elements of int32, or of f64 for Float64, into \p buf): distinct per
/// (call, rank, element), so that a call that read what an earlier one left
/// gets caught; exact in every sum of a few ranks.
inline void fillCallInput(DataType type, uint64_t call, uint32_t r, uint64_t n, void *buf) {
  for (uint64_t e = 0; e < n; ++e) {
    const uint64_t v = call * 1000003 + r * 7919 + e * 31;
    if (type == DataType::Float64)
      static_cast<double *>(buf)[e] = double(v % 65536);
    else
      static_cast<int32_t *>(buf)[e] = int32_t(uint32_t(v));
  }
}

/// Sets up \p b for \p plan and \p c: fillInputs, then placeBuffers.
inline void
makeBuffers(const Plan &plan, const RunCase &c, WorldBuffers &b,
            const std::function<void(uint32_t rank, uint64_t n, void *buf)> &fill = nullptr) {
  fillInputs(plan, c, b, fill);
  placeBuffers(plan, c, b);
}

/// The reference's outputs of \p plan for \p c on the unmodified inputs
/// \p original (one buffer per rank), into \p want, sized as the run's
/// outputs (plus a spare byte). "" or what went wrong.
inline std::string referenceOutputs(const Plan &plan, const RunCase &c,
                                    const std::vector<std::vector<char>> &original,
                                    std::vector<std::vector<char>> &want) {
  const uint32_t n = plan.info.nranks;
  BufferElements e = planBufferElements(plan.info, c.count);
  want.assign(n, {});
  std::vector<const void *> inputs(n);
  std::vector<void *> wantPtrs(n);
  for (uint32_t r = 0; r < n; ++r) {
    want[r].resize(e.output * dataTypeSize(c.type) + 1);
    wantPtrs[r] = want[r].data();
    inputs[r] = original[r].data();
  }
  if (Status s = referencePlan(plan, c.count, c.type, c.op, inputs, wantPtrs); !s)
    return describe(c) + ": reference: " + s.message();
  return "";
}

/// Compares every output element the plan defines (recv[r], rank r's
/// output after a run of \p c) with the reference's \p want. "" or the
/// first wrong element and how many are wrong.
inline std::string compareOutputs(const Plan &plan, const RunCase &c,
                                  const std::vector<void *> &recv,
                                  const std::vector<std::vector<char>> &want) {
  for (uint32_t r = 0; r < plan.info.nranks; ++r) {
    ElementRanges defined = definedOutputElements(plan, r, c.count);
    uint64_t first = 0;
    uint64_t wrong = countMismatchesIn(c.type, recv[r], want[r].data(), defined, &first);
    if (wrong) {
      uint64_t total = 0;
      for (auto [begin, end] : defined)
        total += end - begin;
      std::ostringstream os;
      os << describe(c) << ": rank " << r << " output element " << first << " is "
         << formatElement(c.type, recv[r], first) << ", expected "
         << formatElement(c.type, want[r].data(), first) << " (" << wrong << " of " << total
         << " checked elements wrong)";
      return os.str();
    }
  }
  return "";
}

/// Runs every rank of \p plan for \p c on the shared-memory executor: each
/// rank joins a ProcessGroup of a job unique to the run and calls execute()
/// with its buffers. The ranks are threads of this process (the process
/// tests run them as processes): the executor's code is the same either
/// way, since peers reach each other only through the job's shared-memory
/// segments. Fails too when the job leaves a segment behind.
inline Status runOnProcessGroup(const Plan &plan, const RunCase &c,
                                const std::vector<const void *> &sendbufs,
                                const std::vector<void *> &recvbufs) {
  static std::atomic<uint64_t> runs{0};
  const std::string job = "t" + std::to_string(getpid()) + "_" + std::to_string(runs.fetch_add(1));
  const uint32_t n = plan.info.nranks;
  std::vector<Status> results(n, Status::success());
  std::vector<std::thread> ranks;
  for (uint32_t r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      ProcessGroupOptions o;
      o.sliceElements = c.slice;
      o.workers = c.workersPerRank;
      o.timeoutSeconds = c.timeout;
      o.protocol = c.protocol;
      o.streamingStoresFrom = c.streamingStoresFrom;
      auto group = ProcessGroup::create(job, int(r), int(n), o);
      results[r] = group ? (*group)->execute(plan, sendbufs[r], recvbufs[r], c.count, c.type, c.op)
                         : group.getStatus();
    });
  for (std::thread &t : ranks)
    t.join();
  for (uint32_t r = 0; r < n; ++r)
    if (!results[r])
      return Status::error("rank " + std::to_string(r) + ": " + results[r].message());
  if (!ProcessGroup::listJobSegments(job).empty())
    return Status::error("shared-memory segments of job " + job + " were left behind");
  return Status::success();
}

/// Runs \p plan for \p c and compares with the reference. Returns "" on
/// success, else what went wrong. \p world: the LocalWorld to run on (a
/// fresh one when null); \p fill: the inputs (fillInputs()).
inline std::string
runAndCheck(const Plan &plan, const RunCase &c, const ExecOptions *extra = nullptr,
            const LocalWorld *world = nullptr,
            const std::function<void(uint32_t rank, uint64_t n, void *buf)> &fill = nullptr) {
  const PlanInfo &info = plan.info;
  const uint32_t n = info.nranks;
  const size_t es = dataTypeSize(c.type);
  BufferElements e = planBufferElements(info, c.count);
  WorldBuffers b;
  makeBuffers(plan, c, b, fill);
  ExecOptions o = extra ? *extra : ExecOptions();
  o.mode = c.mode;
  o.sliceElements = c.slice;
  o.workersPerRank = c.workersPerRank;
  o.timeoutSeconds = c.timeout;
  o.protocol = c.protocol;
  o.streamingStoresFrom = c.streamingStoresFrom;
  Status s = c.processGroup ? runOnProcessGroup(plan, c, b.send, b.recv)
             : world        ? world->run(plan, b.send, b.recv, c.count, c.type, c.op, o)
                            : LocalWorld().run(plan, b.send, b.recv, c.count, c.type, c.op, o);
  if (!s)
    return describe(c) + ": " + s.message();

  std::vector<std::vector<char>> want;
  if (std::string err = referenceOutputs(plan, c, b.original, want); !err.empty())
    return err;
  for (uint32_t r = 0; r < n; ++r)
    if (!c.inplace && std::memcmp(b.in[r].data(), b.original[r].data(), e.input * es) != 0)
      return describe(c) + ": rank " + std::to_string(r) + "'s input was modified";
  return compareOutputs(plan, c, b.recv, want);
}

/// Every data type.
inline std::vector<DataType> allDataTypes() {
  std::vector<DataType> v;
  for (unsigned i = 0; i < numDataTypes(); ++i)
    v.push_back(DataType(i));
  return v;
}

/// Every operator for a reducing collective; just Sum for the others (the
/// operator does not matter to them).
inline std::vector<RedOp> opsFor(CollectiveKind kind) {
  if (!collectiveReduces(kind))
    return {RedOp::Sum};
  std::vector<RedOp> v;
  for (unsigned i = 0; i < numRedOps(); ++i)
    v.push_back(RedOp(i));
  return v;
}

/// The names of a comma-separated list (empty names dropped): the plan
/// lists that CMake passes to the tests.
inline std::vector<std::string> splitNames(const std::string &all) {
  std::vector<std::string> names;
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t comma = all.find(',', pos);
    if (comma == std::string::npos)
      comma = all.size();
    if (comma > pos)
      names.push_back(all.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return names;
}

/// Whether \p s contains \p part.
inline bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

/// The compiled test plan \p name (COLL_TEST_PLAN_DIR); empty when collc
/// is not built.
inline std::string planFile(const std::string &name) {
#ifdef COLL_TEST_PLAN_DIR
  return std::string(COLL_TEST_PLAN_DIR) + "/" + name + ".bin";
#else
  (void)name;
  return "";
#endif
}

} // namespace coll::test

#endif // COLL_TESTS_RUNTIME_TESTHELPERS_H
