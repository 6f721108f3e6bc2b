//===- GroupPatternTest.cpp - Send/recv groups that are collectives -------===//

#include "GroupPattern.h"

#include <gtest/gtest.h>

using namespace collcshim;

namespace {

ncclComm_t comm(uintptr_t id = 0xc0) {
  return reinterpret_cast<ncclComm_t>(id);
}
cudaStream_t stream(uintptr_t id = 0x50) {
  return reinterpret_cast<cudaStream_t>(id);
}
void *at(uintptr_t address) {
  return reinterpret_cast<void *>(address);
}
P2pOp send(int peer, size_t count = 16, void *buffer = nullptr) {
  return P2pOp{true,    buffer ? buffer : at(0x1000 + 0x100 * uintptr_t(peer)),
               count,   ncclFloat32,
               peer,    comm(),
               stream()};
}
P2pOp recv(int peer, size_t count = 16, void *buffer = nullptr) {
  return P2pOp{false,   buffer ? buffer : at(0x9000 + 0x100 * uintptr_t(peer)),
               count,   ncclFloat32,
               peer,    comm(),
               stream()};
}
GroupPatterns all() {
  GroupPatterns p;
  p.allToAll = p.gather = p.scatter = true;
  return p;
}

} // namespace

TEST(GroupPattern, AllToAllListForm) {
  // PyTorch's all_to_all of lists: a send and a receive per rank, itself
  // included, in the order it issues them.
  std::vector<P2pOp> ops;
  for (int r = 0; r < 3; ++r) {
    ops.push_back(send(r));
    ops.push_back(recv(r));
  }
  GroupCall g = classifyGroup(ops, 3, 1, all());
  ASSERT_EQ(g.kind, GroupKind::AllToAll) << g.why;
  EXPECT_TRUE(g.selfCopy);
  EXPECT_EQ(g.count, 16u);
  EXPECT_EQ(g.type, ncclFloat32);
  for (uint32_t r = 0; r < 3; ++r) {
    EXPECT_EQ(g.sendFrom[r], at(0x1000 + 0x100 * r));
    EXPECT_EQ(g.recvInto[r], at(0x9000 + 0x100 * r));
  }
  // Not asked for: none, and why.
  GroupPatterns gatherOnly;
  gatherOnly.gather = true;
  g = classifyGroup(ops, 3, 1, gatherOnly);
  EXPECT_EQ(g.kind, GroupKind::None);
  EXPECT_EQ(g.why, "an all-to-all group, which is not asked for");
}

TEST(GroupPattern, NotAnAllToAll) {
  std::vector<P2pOp> ops = {send(0), recv(0), send(1), recv(1), send(2)};
  GroupCall g = classifyGroup(ops, 3, 0, all());
  EXPECT_EQ(g.kind, GroupKind::None);
  EXPECT_EQ(g.why, "the group is not the part of a rank of any pattern asked for (2 sends to and "
                   "1 receives from other ranks, of 3)");
  // Counts that differ (an uneven all-to-all).
  ops = {send(0), recv(0), send(1, 8), recv(1)};
  EXPECT_EQ(classifyGroup(ops, 2, 0, all()).why,
            "the group's sends and receives differ in count or type");
  // Twice to one rank.
  ops = {send(1), send(1), recv(0), recv(1)};
  EXPECT_EQ(classifyGroup(ops, 2, 0, all()).why, "the group sends to a rank twice");
  // Another communicator or stream.
  ops = {send(0), recv(0), send(1), recv(1)};
  ops[3].stream = stream(0x51);
  EXPECT_EQ(classifyGroup(ops, 2, 0, all()).why,
            "the group's sends and receives are on more than one communicator or stream");
  ops[3].stream = stream();
  ops[2].comm = comm(0xc1);
  EXPECT_EQ(classifyGroup(ops, 2, 0, all()).kind, GroupKind::None);
  // A peer outside the communicator, no data, nothing.
  EXPECT_EQ(classifyGroup({send(5)}, 4, 0, all()).why, "a peer is not a rank of the communicator");
  EXPECT_EQ(classifyGroup({send(1, 0)}, 4, 0, all()).why, "the group moves no data");
  EXPECT_EQ(classifyGroup({}, 4, 0, all()).why, "the group has no send or receive");
  // A pipeline stage's exchange with its neighbours.
  EXPECT_EQ(classifyGroup({send(2), recv(0)}, 4, 1, all()).kind, GroupKind::None);
}

TEST(GroupPattern, GatherAndScatterOfFourRanks) {
  // Gather to rank 2: the root receives from the three others; the others
  // each send once, to it.
  GroupCall root = classifyGroup({recv(0), recv(1), recv(3)}, 4, 2, all());
  ASSERT_EQ(root.kind, GroupKind::Gather) << root.why;
  EXPECT_EQ(root.root, 2);
  EXPECT_EQ(root.recvInto[2], nullptr); // PyTorch copies the root's own piece.
  EXPECT_EQ(root.recvInto[3], at(0x9300));
  for (uint32_t r : {0u, 1u, 3u}) {
    GroupCall leaf = classifyGroup({send(2)}, 4, r, all());
    ASSERT_EQ(leaf.kind, GroupKind::Gather) << leaf.why;
    EXPECT_EQ(leaf.root, 2);
    EXPECT_EQ(leaf.sendFrom[2], at(0x1200));
  }
  // Scatter from rank 1.
  root = classifyGroup({send(0), send(2), send(3)}, 4, 1, all());
  ASSERT_EQ(root.kind, GroupKind::Scatter) << root.why;
  EXPECT_EQ(root.root, 1);
  GroupCall leaf = classifyGroup({recv(1)}, 4, 3, all());
  ASSERT_EQ(leaf.kind, GroupKind::Scatter) << leaf.why;
  EXPECT_EQ(leaf.root, 1);
  // Only what is asked for.
  GroupPatterns scatterOnly;
  scatterOnly.scatter = true;
  EXPECT_EQ(classifyGroup({send(2)}, 4, 0, scatterOnly).kind, GroupKind::None);
  // A copy to itself goes with any shape; half of one goes with none.
  root = classifyGroup({send(2), recv(0), recv(1), recv(2), recv(3)}, 4, 2, all());
  ASSERT_EQ(root.kind, GroupKind::Gather) << root.why;
  EXPECT_EQ(root.root, 2);
  EXPECT_TRUE(root.selfCopy);
  EXPECT_EQ(root.sendFrom[2], at(0x1200));
  EXPECT_EQ(root.recvInto[2], at(0x9200));
  root = classifyGroup({send(0), send(1), send(2), send(3), recv(1)}, 4, 1, all());
  ASSERT_EQ(root.kind, GroupKind::Scatter) << root.why;
  EXPECT_TRUE(root.selfCopy);
  EXPECT_EQ(classifyGroup({recv(0), recv(1), recv(2)}, 4, 2, all()).why,
            "the group receives from its own rank without sending to it");
  EXPECT_EQ(classifyGroup({send(2), send(0)}, 4, 2, all()).why,
            "the group sends to its own rank without receiving from it");
}

TEST(GroupPattern, TwoRanksDecideAlike) {
  // With two ranks one message is a gather's (to the receiver) or a
  // scatter's (from the sender): both ends must say the same.
  GroupPatterns scatterOnly;
  scatterOnly.scatter = true;
  for (const GroupPatterns &p : {all(), scatterOnly}) {
    GroupCall sender = classifyGroup({send(1)}, 2, 0, p);
    GroupCall receiver = classifyGroup({recv(0)}, 2, 1, p);
    ASSERT_NE(sender.kind, GroupKind::None) << sender.why;
    EXPECT_EQ(sender.kind, receiver.kind);
    EXPECT_EQ(sender.root, receiver.root);
    EXPECT_EQ(sender.kind == GroupKind::Gather ? 1 : 0, sender.root);
  }
  EXPECT_EQ(classifyGroup({send(1)}, 2, 0, all()).kind, GroupKind::Gather);
  EXPECT_EQ(classifyGroup({send(1)}, 2, 0, scatterOnly).kind, GroupKind::Scatter);
  // A scatter's root that copies its own piece too: with gather asked for
  // it is still the lone send of a gather to its peer, as its peer's lone
  // receive says, and the copy is its own.
  GroupCall sender = classifyGroup({send(0), recv(0), send(1)}, 2, 0, all());
  ASSERT_EQ(sender.kind, GroupKind::Gather) << sender.why;
  EXPECT_EQ(sender.root, 1);
  EXPECT_TRUE(sender.selfCopy);
  // An exchange of one piece each way is an all-to-all of two ranks, at
  // both ends.
  EXPECT_EQ(classifyGroup({send(1), recv(1)}, 2, 0, all()).kind, GroupKind::AllToAll);
  EXPECT_EQ(classifyGroup({recv(0), send(0)}, 2, 1, all()).kind, GroupKind::AllToAll);
}

TEST(GroupPattern, ParsesTheList) {
  std::string error;
  GroupPatterns p = GroupPatterns::parse(" alltoall, gather ", error);
  EXPECT_EQ(error, "");
  EXPECT_TRUE(p.allToAll && p.gather && !p.scatter);
  p = GroupPatterns::parse("all", error);
  EXPECT_TRUE(p.allToAll && p.gather && p.scatter);
  p = GroupPatterns::parse("alltoall,broadcast", error);
  EXPECT_EQ(error, "'broadcast' is not a group pattern (alltoall, gather, scatter or all)");
  EXPECT_FALSE(GroupPatterns::parse("", error).any());
}
