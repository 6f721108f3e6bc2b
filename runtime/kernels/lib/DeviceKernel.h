//===- DeviceKernel.h - The CUDA interpreter kernel -------------*- C++ -*-===//
/// \file
/// The CUDA interpreter kernel: the shared interpreter core
/// (coll/Runtime/Interpreter.h) on a GPU. This header gathers its parts:
///  - KernelAbi.h: the records shared by the host and the kernel;
///  - DeviceSync.cuh: synchronisation words and their memory ordering;
///  - DeviceCopy.cuh: the CTA's copies and reductions;
///  - DevicePlatform.cuh: the Platform of Interpreter.h for one CTA;
///  - InterpretPlan.cuh: the kernel and its instantiations.
/// Host code sees the records and the entry points; the device parts are
/// included only when nvcc compiles.
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_LIB_DEVICEKERNEL_H
#define COLL_KERNELS_LIB_DEVICEKERNEL_H

#include "KernelAbi.h"
#include "coll/Runtime/ChunkLayout.h"
#include "coll/Runtime/Elementwise.h"
#include "coll/Runtime/Interpreter.h"

#include <cstdint>
#include <cuda_runtime.h>

namespace coll::kernels {

/// The kernel of \p type and \p op; null when invalid.
KernelFn selectKernel(DataType type, RedOp op);
/// Enqueues p[i] = p[i] / nranks for n elements of \p type.
cudaError_t launchDivide(DataType type, void *p, uint64_t n, uint32_t nranks, cudaStream_t stream);

} // namespace coll::kernels

#ifdef __CUDACC__
#include "DeviceCopy.cuh"
#include "DevicePlatform.cuh"
#include "DeviceSync.cuh"
#include "InterpretPlan.cuh"
#endif // __CUDACC__

#endif // COLL_KERNELS_LIB_DEVICEKERNEL_H
