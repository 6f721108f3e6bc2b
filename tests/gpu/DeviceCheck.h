//===- DeviceCheck.h - Test data and reference collectives on a GPU -*- C++ -*-===//
/// \file
/// What the GPU tests need to check 64M-element runs quickly: the test
/// inputs of Reference.h (the same bits: coll/Runtime/TestData.h), the
/// reference collectives (referenceCollective's definition: rank-order
/// reduction, then Avg's division) and the comparison, all on the device.
/// A test compares each of them with its host version.
//===----------------------------------------------------------------------===//
#ifndef COLL_TESTS_GPU_DEVICECHECK_H
#define COLL_TESTS_GPU_DEVICECHECK_H

#include "coll/Runtime/DataType.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Status.h"

#include <cstdint>
#include <cuda_runtime_api.h>
#include <vector>

namespace coll::test {

/// Fills device buffer \p buf with \p n elements of fillTestInput(type, op,
/// nranks, rank).
Status deviceFillTestInput(DataType type, RedOp op, uint32_t nranks, uint32_t rank, uint64_t n,
                           void *buf);

/// referenceCollective() on device buffers.
Status deviceReference(CollectiveKind kind, uint32_t nranks, uint32_t root, uint64_t count,
                       DataType type, RedOp op, const std::vector<const void *> &inputs,
                       const std::vector<void *> &outputs);

/// countMismatches() on device buffers.
Result<uint64_t> deviceCountMismatches(DataType type, const void *got, const void *want, uint64_t n,
                                       uint64_t *firstIndex = nullptr);

} // namespace coll::test

#endif // COLL_TESTS_GPU_DEVICECHECK_H
