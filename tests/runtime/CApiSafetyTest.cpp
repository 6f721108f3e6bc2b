//===- CApiSafetyTest.cpp - The C API's handles and buffers ---------------===//
//
// Handles are validated: a destroyed (or never created) plan, world or
// communicator is an invalid argument with a message, never a crash, and
// so is destroying one twice. Buffers from collMemAlloc() are checked
// against the call: a count larger than the buffer is refused with the
// bytes needed and available.
//
//===----------------------------------------------------------------------===//

#include "HandPlans.h"
#include "TestHelpers.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/coll.h"

#include <gtest/gtest.h>
#include <string>
#include <unistd.h>
#include <vector>

using namespace coll;
using namespace coll::test;

namespace {

/// A one-rank allreduce of one chunk: a copy from input to output.
collPlan_t loadCopyPlan() {
  Plan p = makePlan("copy", CollectiveKind::AllReduce, 1, 1, 1, 2);
  Threadblock tb;
  add(tb, step(Opcode::Copy, I, 0, O, 0, 1));
  p.ranks[0].threadblocks.push_back(tb);
  std::vector<uint8_t> bytes = serializePlan(p);
  collPlan_t plan = nullptr;
  EXPECT_EQ(collPlanLoadMemory(bytes.data(), bytes.size(), &plan), collSuccess)
      << collGetLastError(nullptr);
  return plan;
}

std::string jobName(const char *what) {
  return std::string("capi-safety-") + what + "-" + std::to_string(getpid());
}

TEST(CApiSafety, CallsOnADestroyedCommunicatorAreErrors) {
  collWorld_t world = nullptr;
  ASSERT_EQ(collWorldCreate(1, &world), collSuccess);
  collComm_t comm = nullptr;
  ASSERT_EQ(collCommInitRank(world, 0, &comm), collSuccess);
  collPlan_t plan = loadCopyPlan();
  ASSERT_TRUE(plan);
  float x[4] = {1, 2, 3, 4};
  ASSERT_EQ(collExecute(x, x, 4, collFloat32, collSum, plan, comm), collSuccess)
      << collGetLastError(comm);
  ASSERT_EQ(collCommDestroy(comm), collSuccess);

  int value = -1;
  EXPECT_EQ(collCommCount(comm, &value), collInvalidArgument);
  EXPECT_TRUE(contains(collGetLastError(nullptr), "collCommCount: comm is not a live communicator"))
      << collGetLastError(nullptr);
  EXPECT_EQ(collCommUserRank(comm, &value), collInvalidArgument);
  EXPECT_EQ(collExecute(x, x, 4, collFloat32, collSum, plan, comm), collInvalidArgument);
  EXPECT_TRUE(contains(collGetLastError(nullptr), "collExecute: comm is not a live communicator"))
      << collGetLastError(nullptr);
  EXPECT_TRUE(contains(collGetLastError(comm), "not a live communicator"));
  EXPECT_EQ(collCommDestroy(comm), collInvalidArgument);
  EXPECT_EQ(value, -1);

  // The rank is free again, and the world still works.
  ASSERT_EQ(collCommInitRank(world, 0, &comm), collSuccess);
  EXPECT_EQ(collExecute(x, x, 4, collFloat32, collSum, plan, comm), collSuccess);
  EXPECT_EQ(collCommDestroy(comm), collSuccess);
  EXPECT_EQ(collPlanFree(plan), collSuccess);
  EXPECT_EQ(collWorldDestroy(world), collSuccess);
}

TEST(CApiSafety, PlanInfoGivesTheBufferSizes) {
  // Units of count: 1 and N for an allgather of 2 chunks per rank; for a
  // user-declared collective of 4 input and 6 output chunks, 2 and 3.
  struct Case {
    CollectiveKind kind;
    uint32_t in, out;
    size_t inUnits, outUnits;
  };
  for (Case c : {Case{CollectiveKind::AllGather, 2, 8, 1, 4},
                 Case{CollectiveKind::ReduceScatter, 8, 2, 4, 1},
                 Case{CollectiveKind::Custom, 4, 6, 2, 3}}) {
    std::vector<uint8_t> bytes = serializePlan(makePlan("units", c.kind, 4, c.in, c.out, 2));
    collPlan_t plan = nullptr;
    ASSERT_EQ(collPlanLoadMemory(bytes.data(), bytes.size(), &plan), collSuccess)
        << collGetLastError(nullptr);
    collPlanInfo_t info;
    ASSERT_EQ(collPlanGetInfo(plan, &info), collSuccess);
    EXPECT_EQ(info.collective, collCollective_t(c.kind));
    EXPECT_EQ(info.inputUnits, c.inUnits) << collectiveName(c.kind);
    EXPECT_EQ(info.outputUnits, c.outUnits) << collectiveName(c.kind);
    EXPECT_EQ(collPlanFree(plan), collSuccess);
  }
}

TEST(CApiSafety, CallsOnADestroyedPlanOrWorldAreErrors) {
  collPlan_t plan = loadCopyPlan();
  ASSERT_TRUE(plan);
  ASSERT_EQ(collPlanFree(plan), collSuccess);
  collPlanInfo_t info;
  EXPECT_EQ(collPlanGetInfo(plan, &info), collInvalidArgument);
  EXPECT_TRUE(contains(collGetLastError(nullptr), "collPlanGetInfo: plan is not a live plan"))
      << collGetLastError(nullptr);
  EXPECT_EQ(collPlanFree(plan), collInvalidArgument);

  collWorld_t world = nullptr;
  ASSERT_EQ(collWorldCreate(2, &world), collSuccess);
  collComm_t comm = nullptr;
  ASSERT_EQ(collCommInitRank(world, 1, &comm), collSuccess);
  float x[1] = {1};
  EXPECT_EQ(collExecute(x, x, 1, collFloat32, collSum, plan, comm), collInvalidArgument);
  EXPECT_TRUE(contains(collGetLastError(nullptr), "collExecute: plan is not a live plan"))
      << collGetLastError(nullptr);
  ASSERT_EQ(collWorldDestroy(world), collSuccess);
  EXPECT_EQ(collWorldDestroy(world), collInvalidArgument);
  collComm_t other = nullptr;
  EXPECT_EQ(collCommInitRank(world, 0, &other), collInvalidArgument);
  EXPECT_TRUE(contains(collGetLastError(nullptr), "collCommInitRank: world is not a live world"))
      << collGetLastError(nullptr);
  // The communicator keeps its world alive.
  int n = 0;
  EXPECT_EQ(collCommCount(comm, &n), collSuccess);
  EXPECT_EQ(n, 2);
  EXPECT_EQ(collCommDestroy(comm), collSuccess);
  // A pointer that was never a handle.
  int junk = 0;
  EXPECT_EQ(collCommDestroy(reinterpret_cast<collComm_t>(&junk)), collInvalidArgument);
  EXPECT_EQ(collPlanFree(reinterpret_cast<collPlan_t>(&junk)), collInvalidArgument);
}

TEST(CApiSafety, SharedMemoryBuffersAreCheckedAgainstTheCount) {
  collPlan_t plan = loadCopyPlan();
  ASSERT_TRUE(plan);
  collShmConfig_t config;
  ASSERT_EQ(collShmConfigInit(&config), collSuccess);
  config.timeoutSeconds = 10;
  collComm_t comm = nullptr;
  ASSERT_EQ(collCommInitRankShm(jobName("buffers").c_str(), 1, 0, &config, &comm), collSuccess)
      << collGetLastError(nullptr);
  void *send = nullptr, *recv = nullptr;
  ASSERT_EQ(collMemAlloc(comm, 4000, &send), collSuccess) << collGetLastError(nullptr);
  ASSERT_EQ(collMemAlloc(comm, 4000, &recv), collSuccess) << collGetLastError(nullptr);
  // 1000 floats fit, 1001 do not.
  EXPECT_EQ(collExecute(send, recv, 1000, collFloat32, collSum, plan, comm), collSuccess)
      << collGetLastError(comm);
  EXPECT_EQ(collExecute(send, recv, 1001, collFloat32, collSum, plan, comm), collInvalidArgument);
  EXPECT_TRUE(contains(collGetLastError(comm), "send buffer")) << collGetLastError(comm);
  EXPECT_TRUE(contains(collGetLastError(comm), "needs 4004 bytes")) << collGetLastError(comm);
  EXPECT_TRUE(contains(collGetLastError(comm), "4000 bytes")) << collGetLastError(comm);
  // A buffer that starts inside an allocation has what is left of it.
  char *mid = static_cast<char *>(recv) + 2000;
  EXPECT_EQ(collExecute(send, mid, 500, collFloat32, collSum, plan, comm), collSuccess)
      << collGetLastError(comm);
  EXPECT_EQ(collExecute(send, mid, 501, collFloat32, collSum, plan, comm), collInvalidArgument);
  EXPECT_TRUE(contains(collGetLastError(comm), "receive buffer")) << collGetLastError(comm);
  EXPECT_TRUE(contains(collGetLastError(comm), "2000 bytes")) << collGetLastError(comm);
  // Wider types need more bytes per element.
  EXPECT_EQ(collExecute(send, recv, 500, collFloat64, collSum, plan, comm), collSuccess)
      << collGetLastError(comm);
  EXPECT_EQ(collExecute(send, recv, 501, collFloat64, collSum, plan, comm), collInvalidArgument);
  // Freed memory is no longer known: a later call cannot check it, but the
  // record does not outlive the buffer either.
  EXPECT_EQ(collMemFree(comm, send), collSuccess);
  EXPECT_EQ(collMemFree(comm, recv), collSuccess);
  EXPECT_EQ(collCommDestroy(comm), collSuccess);
  EXPECT_EQ(collPlanFree(plan), collSuccess);
}

} // namespace

TEST(CApiSafety, ProtocolChoiceIsChecked) {
  collWorldConfig_t config;
  ASSERT_EQ(collWorldConfigInit(&config), collSuccess);
  EXPECT_EQ(config.protocol, nullptr);
  config.protocol = "LL:4K,LL128:fast";
  collWorld_t world = nullptr;
  EXPECT_EQ(collWorldCreateConfig(2, &config, &world), collInvalidArgument);
  EXPECT_EQ(world, nullptr);
  EXPECT_TRUE(contains(collGetLastError(nullptr), "bad protocol choice 'LL:4K,LL128:fast'"))
      << collGetLastError(nullptr);
  config.protocol = "LL:4K,LL128:256K";
  ASSERT_EQ(collWorldCreateConfig(2, &config, &world), collSuccess) << collGetLastError(nullptr);
  EXPECT_EQ(collWorldDestroy(world), collSuccess);

  collShmConfig_t shm;
  ASSERT_EQ(collShmConfigInit(&shm), collSuccess);
  EXPECT_EQ(shm.protocol, nullptr);
  shm.protocol = "LL64";
  collComm_t comm = nullptr;
  EXPECT_EQ(collCommInitRankShm(jobName("protocol").c_str(), 1, 0, &shm, &comm),
            collInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_TRUE(contains(collGetLastError(nullptr), "bad protocol choice 'LL64'"))
      << collGetLastError(nullptr);
  // A one-rank job in LL: its plan has no connections, and runs.
  shm.protocol = "LL";
  ASSERT_EQ(collCommInitRankShm(jobName("protocol").c_str(), 1, 0, &shm, &comm), collSuccess)
      << collGetLastError(nullptr);
  collPlan_t plan = loadCopyPlan();
  ASSERT_TRUE(plan);
  std::vector<float> in(100), out(100);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(i * 3 + 1);
  EXPECT_EQ(collExecute(in.data(), out.data(), 100, collFloat32, collSum, plan, comm), collSuccess)
      << collGetLastError(comm);
  EXPECT_EQ(out, in);
  EXPECT_EQ(collCommDestroy(comm), collSuccess);
  EXPECT_EQ(collPlanFree(plan), collSuccess);
}
