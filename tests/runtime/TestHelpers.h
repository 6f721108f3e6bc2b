//===- TestHelpers.h - Running plans against the reference ------*- C++ -*-===//
/// \file
/// Helpers of the executor tests: build buffers for a plan (in place or out
/// of place), fill them with test data distinct per (rank, element), run the
/// plan on LocalWorld and compare every defined output with the reference.
//===----------------------------------------------------------------------===//
#ifndef COLL_TESTS_RUNTIME_TESTHELPERS_H
#define COLL_TESTS_RUNTIME_TESTHELPERS_H

#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Reference.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
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
};

inline std::string describe(const RunCase &c) {
  std::ostringstream os;
  os << dataTypeName(c.type) << " " << redOpName(c.op) << " count " << c.count
     << (c.inplace ? " in-place" : " out-of-place")
     << (c.mode == ExecMode::Single ? " single" : " threads") << " slice " << c.slice;
  if (c.mode == ExecMode::Threads)
    os << " workers " << c.workersPerRank;
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

/// Sets up \p b for \p plan and \p c; \p fill writes rank r's n input
/// elements (default: fillTestInput). Outputs start as 0xa5 bytes so that
/// an element nobody wrote shows.
inline void
makeBuffers(const Plan &plan, const RunCase &c, WorldBuffers &b,
            const std::function<void(uint32_t rank, uint64_t n, void *buf)> &fill = nullptr) {
  const PlanInfo &info = plan.info;
  const uint32_t n = info.nranks;
  const size_t es = dataTypeSize(c.type);
  BufferElements e = collectiveBufferElements(info.collective, n, c.count);
  const uint64_t unit = c.count * es;
  b.original.assign(n, {});
  b.in.assign(n, {});
  b.out.assign(n, {});
  b.both.assign(n, {});
  b.send.assign(n, nullptr);
  b.recv.assign(n, nullptr);
  for (uint32_t r = 0; r < n; ++r) {
    // One spare byte: data() of an empty vector may be null.
    b.original[r].resize(e.input * es + 1);
    if (fill)
      fill(r, e.input, b.original[r].data());
    else
      fillTestInput(c.type, c.op, n, r, e.input, b.original[r].data());
    if (c.inplace) {
      b.both[r].assign(std::max(e.input, e.output) * es + 1, char(0xa5));
      char *p = b.both[r].data();
      char *send = info.collective == CollectiveKind::AllGather ? p + r * unit : p;
      char *recv = info.collective == CollectiveKind::ReduceScatter ? p + r * unit : p;
      std::memcpy(send, b.original[r].data(), e.input * es);
      b.send[r] = send;
      b.recv[r] = recv;
    } else {
      b.in[r] = b.original[r];
      b.out[r].assign(e.output * es + 1, char(0xa5));
      b.send[r] = b.in[r].data();
      b.recv[r] = b.out[r].data();
    }
  }
}

/// Runs \p plan for \p c and compares with the reference. Returns "" on
/// success, else what went wrong.
inline std::string runAndCheck(const Plan &plan, const RunCase &c,
                               const ExecOptions *extra = nullptr) {
  const PlanInfo &info = plan.info;
  const uint32_t n = info.nranks;
  const size_t es = dataTypeSize(c.type);
  BufferElements e = collectiveBufferElements(info.collective, n, c.count);
  WorldBuffers b;
  makeBuffers(plan, c, b);
  ExecOptions o = extra ? *extra : ExecOptions();
  o.mode = c.mode;
  o.sliceElements = c.slice;
  o.workersPerRank = c.workersPerRank;
  o.timeoutSeconds = c.timeout;
  if (Status s = LocalWorld().run(plan, b.send, b.recv, c.count, c.type, c.op, o); !s)
    return describe(c) + ": " + s.message();

  std::vector<std::vector<char>> want(n);
  std::vector<const void *> inputs(n);
  std::vector<void *> wantPtrs(n);
  for (uint32_t r = 0; r < n; ++r) {
    want[r].resize(e.output * es + 1);
    wantPtrs[r] = want[r].data();
    inputs[r] = b.original[r].data();
  }
  if (Status s = referenceCollective(info.collective, n, info.root, c.count, c.type, c.op, inputs,
                                     wantPtrs);
      !s)
    return describe(c) + ": reference: " + s.message();
  for (uint32_t r = 0; r < n; ++r) {
    if (!c.inplace && std::memcmp(b.in[r].data(), b.original[r].data(), e.input * es) != 0)
      return describe(c) + ": rank " + std::to_string(r) + "'s input was modified";
    if (!collectiveDefinesOutput(info.collective, info.root, r))
      continue;
    uint64_t first = 0;
    uint64_t wrong = countMismatches(c.type, b.recv[r], want[r].data(), e.output, &first);
    if (wrong) {
      std::ostringstream os;
      os << describe(c) << ": rank " << r << " output element " << first << " is "
         << formatElement(c.type, b.recv[r], first) << ", expected "
         << formatElement(c.type, want[r].data(), first) << " (" << wrong << " of " << e.output
         << " wrong)";
      return os.str();
    }
  }
  return "";
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

} // namespace coll::test

#endif // COLL_TESTS_RUNTIME_TESTHELPERS_H
