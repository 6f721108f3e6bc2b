//===- DeviceProbe.cu - Is a CUDA device usable? --------------------------===//

#include "coll/Kernels/DeviceProbe.h"

#include <cuda_runtime.h>

namespace {
__global__ void writeValue(int *dst, int value) {
  *dst = value;
}
} // namespace

bool coll::kernels::probeDevice(int value, int &out) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError(); // clear the sticky "no device" error
    return false;
  }
  int *dev = nullptr;
  if (cudaMalloc(&dev, sizeof(int)) != cudaSuccess)
    return false;
  writeValue<<<1, 1>>>(dev, value);
  int host = 0;
  bool ok = cudaMemcpy(&host, dev, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
  cudaFree(dev);
  if (ok)
    out = host;
  return ok;
}
