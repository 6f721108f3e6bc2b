//===- HostDevice.h - Code shared by host and device ------------*- C++ -*-===//
/// \file
/// COLL_HOST_DEVICE marks functions that the CPU executors and the CUDA
/// kernels share: `__host__ __device__` when nvcc compiles, nothing else.
/// Code marked with it uses no exceptions, no virtual calls, no allocation
/// and no standard containers.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_HOSTDEVICE_H
#define COLL_RUNTIME_HOSTDEVICE_H

#ifdef __CUDACC__
#define COLL_HOST_DEVICE __host__ __device__
#else
#define COLL_HOST_DEVICE
#endif

#endif // COLL_RUNTIME_HOSTDEVICE_H
