//===- IntArithTest.cpp - Checked integer semantics -----------------------===//

#include "coll/Lang/IntArith.h"

#include <gtest/gtest.h>

using namespace coll;

TEST(IntArith, FlooredDivisionAndModulo) {
  EXPECT_EQ(checkedDiv(7, 2).value, 3);
  EXPECT_EQ(checkedDiv(-7, 2).value, -4);
  EXPECT_EQ(checkedDiv(7, -2).value, -4);
  EXPECT_EQ(checkedDiv(-7, -2).value, 3);
  EXPECT_EQ(checkedMod(-1, 8).value, 7); // (r - 1) % N is a rank
  EXPECT_EQ(checkedMod(7, -2).value, -1);
  EXPECT_EQ(checkedMod(-8, 8).value, 0);
  EXPECT_EQ(checkedMod(INT64_MIN, -1).value, 0);
}

TEST(IntArith, DivisionByZeroAndOverflowAreErrors) {
  EXPECT_EQ(checkedDiv(1, 0).error, ArithError::DivByZero);
  EXPECT_EQ(checkedMod(1, 0).error, ArithError::DivByZero);
  EXPECT_EQ(checkedDiv(INT64_MIN, -1).error, ArithError::Overflow);
  EXPECT_EQ(checkedAdd(INT64_MAX, 1).error, ArithError::Overflow);
  EXPECT_EQ(checkedSub(INT64_MIN, 1).error, ArithError::Overflow);
  EXPECT_EQ(checkedMul(INT64_MAX / 2 + 1, 2).error, ArithError::Overflow);
  EXPECT_EQ(checkedNeg(INT64_MIN).error, ArithError::Overflow);
  EXPECT_EQ(checkedAbs(INT64_MIN).error, ArithError::Overflow);
  EXPECT_TRUE(checkedAdd(INT64_MAX - 1, 1).ok());
}

TEST(IntArith, Shifts) {
  EXPECT_EQ(checkedShl(1, 62).value, int64_t(1) << 62);
  EXPECT_EQ(checkedShl(1, 63).error, ArithError::Overflow);
  EXPECT_EQ(checkedShl(3, 62).error, ArithError::Overflow);
  EXPECT_EQ(checkedShl(-1, 63).value, INT64_MIN);
  EXPECT_EQ(checkedShl(1, 64).error, ArithError::BadShift);
  EXPECT_EQ(checkedShr(1, -1).error, ArithError::BadShift);
  EXPECT_EQ(checkedShr(-8, 1).value, -4);
}

TEST(IntArith, Functions) {
  EXPECT_EQ(checkedLog2(1).value, 0);
  EXPECT_EQ(checkedLog2(1024).value, 10);
  EXPECT_EQ(checkedLog2(1025).value, 10);
  EXPECT_EQ(checkedLog2(0).error, ArithError::Domain);
  EXPECT_EQ(checkedLog2(-4).error, ArithError::Domain);
  EXPECT_EQ(checkedCeilLog2(1).value, 0);
  EXPECT_EQ(checkedCeilLog2(2).value, 1);
  EXPECT_EQ(checkedCeilLog2(5).value, 3);
  EXPECT_EQ(checkedCeilLog2(1024).value, 10);
  EXPECT_EQ(checkedCeilLog2(1025).value, 11);
  EXPECT_EQ(checkedCeilLog2(INT64_MAX).value, 63);
  EXPECT_EQ(checkedCeilLog2(0).error, ArithError::Domain);
  EXPECT_EQ(checkedCeilLog2(-4).error, ArithError::Domain);
  EXPECT_EQ(checkedPow2(0).value, 1);
  EXPECT_EQ(checkedPow2(10).value, 1024);
  EXPECT_EQ(checkedPow2(62).value, int64_t(1) << 62);
  EXPECT_EQ(checkedPow2(63).error, ArithError::Domain);
  EXPECT_EQ(checkedPow2(-1).error, ArithError::Domain);
  EXPECT_EQ(checkedDivCeil(7, 2).value, 4);
  EXPECT_EQ(checkedDivCeil(8, 2).value, 4);
  EXPECT_EQ(checkedDivCeil(-7, 2).value, -3);
  EXPECT_EQ(checkedDivCeil(1, 0).error, ArithError::DivByZero);
  EXPECT_EQ(checkedDivCeil(1, -1).error, ArithError::Domain);
}
