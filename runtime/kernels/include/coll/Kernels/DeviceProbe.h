//===- DeviceProbe.h - Is a CUDA device usable? -----------------*- C++ -*-===//
/// \file
/// The first piece of the CUDA runtime: finds out whether a device can run a
/// kernel, so GPU tests can skip cleanly on machines without one.
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_DEVICEPROBE_H
#define COLL_KERNELS_DEVICEPROBE_H

namespace coll::kernels {

/// Launches a one-thread kernel that writes \p value into device memory and
/// copies it back. Returns true and sets \p out when a device ran it; false
/// (and \p out untouched) when there is no usable device.
bool probeDevice(int value, int &out);

} // namespace coll::kernels

#endif // COLL_KERNELS_DEVICEPROBE_H
