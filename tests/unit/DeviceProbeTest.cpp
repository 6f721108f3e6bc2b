//===- DeviceProbeTest.cpp - A kernel runs where there is a GPU -----------===//

#include "coll/Kernels/DeviceProbe.h"

#include <gtest/gtest.h>

TEST(DeviceProbe, KernelWritesTheValue) {
  int out = 0;
  if (!coll::kernels::probeDevice(12345, out))
    GTEST_SKIP() << "no CUDA device";
  EXPECT_EQ(out, 12345);
}
