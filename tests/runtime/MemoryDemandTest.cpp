//===- MemoryDemandTest.cpp - A call's memory, described on demand --------===//
//
// MemoryDemand.h (runtime/lib): the sizes of a call's memory take their
// descriptions as callables, made only for an error or for the largest
// part so far, and the errors still name the part.
//
//===----------------------------------------------------------------------===//

#include "MemoryDemand.h"

#include <gtest/gtest.h>

using namespace coll;
using namespace coll::detail;

namespace {

TEST(MemoryDemand, DescribesOnlyTheLargestPartsSoFar) {
  MemoryDemand d;
  int made = 0;
  auto what = [&](uint32_t i) {
    return [&made, i] {
      ++made;
      return cat("part ", i);
    };
  };
  // 56 parts of one size, as the FIFOs of a plan: one description.
  for (uint32_t i = 0; i < 56; ++i)
    ASSERT_TRUE(d.add(what(i), 4096));
  EXPECT_EQ(made, 1);
  EXPECT_EQ(d.largest, "part 0");
  EXPECT_EQ(d.total, 56u * 4096);
  // A larger one is described; a smaller one is not.
  ASSERT_TRUE(d.add(what(56), 8192));
  ASSERT_TRUE(d.add(what(57), 16));
  EXPECT_EQ(made, 2);
  EXPECT_EQ(d.largest, "part 56");
  EXPECT_EQ(d.largestBytes, 8192u);
  // A string works as before.
  ASSERT_TRUE(d.add(std::string("a string"), 1 << 20));
  EXPECT_EQ(d.largest, "a string");
}

TEST(MemoryDemand, ErrorsNameThePart) {
  int made = 0;
  auto what = [&] {
    ++made;
    return std::string("the FIFO of rank 3");
  };
  Result<uint64_t> ok = checkedBytes(what, 2, 3, 4);
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 24u);
  EXPECT_TRUE(checkedRoundUp(what, 1000, 256));
  EXPECT_TRUE(checkedSlotBytes(what, 2, 4096, ProtocolKind::LL));
  EXPECT_EQ(made, 0) << "no description without an error";

  Result<uint64_t> over = checkedBytes(what, uint64_t(1) << 40, uint64_t(1) << 30, 1);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.getStatus().message(), "the FIFO of rank 3 overflows 64 bits");
  EXPECT_FALSE(checkedRoundUp(what, ~uint64_t(0), 256));
  EXPECT_FALSE(checkedSlotBytes(what, 2, ~uint64_t(0) >> 1, ProtocolKind::LL));
  EXPECT_EQ(made, 3);

  MemoryDemand d;
  ASSERT_TRUE(d.add(what, ~uint64_t(0) - 1));
  Status s = d.add([] { return std::string("rank 1's scratch"); }, 2);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), "the memory of the call overflows 64 bits at rank 1's scratch, 2 bytes");
}

} // namespace
