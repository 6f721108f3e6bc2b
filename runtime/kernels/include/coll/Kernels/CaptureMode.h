//===- CaptureMode.h - CUDA calls that may run during a capture -*- C++ -*-===//
/// \file
/// While a stream is being captured into a CUDA graph in the global mode
/// (PyTorch's default), CUDA refuses calls that may synchronise (cudaMalloc,
/// cudaFree, a synchronous copy) on every thread whose own mode is not
/// relaxed, and the refusal invalidates the capture. RelaxedCapture puts
/// the calling thread in the relaxed mode for a scope, for work on memory
/// and streams outside the capture.
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_CAPTUREMODE_H
#define COLL_KERNELS_CAPTUREMODE_H

#include <cuda_runtime_api.h>

namespace coll {

/// The calling thread in cudaStreamCaptureModeRelaxed for its lifetime
/// (when \p on), its previous mode again after.
class RelaxedCapture {
public:
  explicit RelaxedCapture(bool on = true) : on(on) {
    if (on && cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) {
      cudaGetLastError();
      this->on = false;
    }
  }
  ~RelaxedCapture() {
    if (on)
      cudaThreadExchangeStreamCaptureMode(&mode);
  }
  RelaxedCapture(const RelaxedCapture &) = delete;
  RelaxedCapture &operator=(const RelaxedCapture &) = delete;

private:
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  bool on;
};

} // namespace coll

#endif // COLL_KERNELS_CAPTUREMODE_H
