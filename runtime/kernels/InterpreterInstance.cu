//===- InterpreterInstance.cu - The interpreter core on a GPU -------------===//
//
// Interpreter<LocalDevicePlatform>: the shared core compiled by nvcc for the
// device. Every thread of the CTA runs the interpreter's control flow (the
// waits of a single threadblock with local steps are trivially ready), and
// each copy or reduction is spread over the threads, with a barrier after
// it so that the next step sees the whole result.
//
//===----------------------------------------------------------------------===//

#include "coll/Kernels/LocalInterpreter.h"
#include "coll/Runtime/ChunkLayout.h"
#include "coll/Runtime/Elementwise.h"
#include "coll/Runtime/Interpreter.h"

#include <cuda_runtime.h>
#include <vector>

namespace coll::kernels {

namespace {

/// The Platform of Interpreter.h for one CTA with no connections.
struct LocalDevicePlatform {
  char *buffers[numBufferKinds()];
  ChunkLayout layout;

  __device__ MemPiece piece(BufferKind buf, uint32_t chunk, uint64_t slice) const {
    PieceRange r = buf == BufferKind::Scratch ? layout.scratchPiece(chunk, slice)
                                              : layout.userPiece(chunk, slice);
    MemPiece m;
    m.ptr = buffers[static_cast<unsigned>(buf)] + r.begin * sizeof(float);
    m.length = r.length;
    return m;
  }
  __device__ char *slotPiece(char *slot, uint32_t) const { return slot; }
  __device__ const char *recvPiece(char *slot, uint32_t j, uint64_t) const {
    return slotPiece(slot, j);
  }
  __device__ void recvCopy(char *dst, char *slot, uint32_t j, uint64_t n) {
    copy(dst, slotPiece(slot, j), n);
  }
  __device__ void sendPiece(char *slot, uint32_t j, const char *src, uint64_t n) {
    copy(slotPiece(slot, j), src, n);
  }
  __device__ bool sendsResult() const { return false; }

  // One threadblock: its own steps run in order, there is nobody to wait
  // for, and a step that needs a connection cannot run.
  __device__ WaitResult checkAbort() const { return WaitResult::Ready; }
  __device__ WaitResult waitDependency(uint32_t, uint32_t, uint64_t) const {
    return WaitResult::Ready;
  }
  __device__ WaitResult waitRecv(char *&, uint32_t, uint64_t) const { return WaitResult::Aborted; }
  __device__ WaitResult waitSend(char *&, uint32_t, uint64_t) const { return WaitResult::Aborted; }
  __device__ void releaseRecv() {}
  __device__ void publishSend() {}
  __device__ void markProgress(uint64_t, uint32_t) {}

  // Each thread takes every blockDim.x-th element; the barrier makes the
  // whole result visible to the CTA's next step.
  __device__ void copy(char *dst, const char *src, uint64_t n) {
    float *d = reinterpret_cast<float *>(dst);
    const float *s = reinterpret_cast<const float *>(src);
    if (d != s)
      for (uint64_t i = threadIdx.x; i < n; i += blockDim.x)
        d[i] = s[i];
    __syncthreads();
  }
  __device__ void copy2(char *dst0, char *dst1, const char *src, uint64_t n) {
    copy(dst0, src, n);
    copy(dst1, src, n);
  }
  __device__ void reduce(char *dst, const char *in, const char *local, uint64_t n) {
    reduceRange<DataType::Float32, RedOp::Sum>(dst, in, local, n, threadIdx.x, blockDim.x);
    __syncthreads();
  }
  __device__ void reduce2(char *dst0, char *dst1, const char *in, const char *local, uint64_t n) {
    reduce2Range<DataType::Float32, RedOp::Sum>(dst0, dst1, in, local, n, threadIdx.x, blockDim.x);
    __syncthreads();
  }

  __device__ void stepBegin(uint64_t, uint32_t) {}
  __device__ void stepEnd(uint64_t, uint32_t, const Instruction &) {}
};

__global__ void interpretKernel(ProgramView program, LocalDevicePlatform platform,
                                uint64_t numSlices, ExecStatus *status) {
  Interpreter<LocalDevicePlatform> interp(platform, program, numSlices);
  ExecStatus st = interp.run();
  if (threadIdx.x == 0)
    *status = st;
}

/// Device memory freed on scope exit.
template <class T> struct DeviceArray {
  T *ptr = nullptr;
  cudaError_t alloc(size_t n) { return cudaMalloc(&ptr, (n ? n : 1) * sizeof(T)); }
  ~DeviceArray() {
    if (ptr)
      cudaFree(ptr);
  }
};

} // namespace

std::string runLocalThreadblock(const Threadblock &tb, uint32_t inputChunks, uint32_t outputChunks,
                                uint32_t scratchChunks, uint32_t chunksPerUnit, uint64_t count,
                                uint64_t sliceElements, const float *input, float *output) {
  ChunkLayout layout = ChunkLayout::make(count, chunksPerUnit, sliceElements);
  const uint64_t inElems = layout.bufferElements(inputChunks);
  const uint64_t outElems = layout.bufferElements(outputChunks);
  const uint64_t scratchElems = layout.scratchElements(scratchChunks);
  DeviceArray<Instruction> steps;
  DeviceArray<Dependency> deps;
  DeviceArray<float> in, out, scratch;
  DeviceArray<ExecStatus> status;
  cudaError_t err;
  auto failed = [&](const char *what) {
    cudaGetLastError();
    return std::string(what) + ": " + cudaGetErrorString(err);
  };
  if ((err = steps.alloc(tb.steps.size())) || (err = deps.alloc(tb.deps.size())) ||
      (err = in.alloc(inElems)) || (err = out.alloc(outElems)) ||
      (err = scratch.alloc(scratchElems)) || (err = status.alloc(1)))
    return failed("cudaMalloc");
  if ((err = cudaMemcpy(steps.ptr, tb.steps.data(), tb.steps.size() * sizeof(Instruction),
                        cudaMemcpyHostToDevice)) ||
      (err = cudaMemcpy(deps.ptr, tb.deps.data(), tb.deps.size() * sizeof(Dependency),
                        cudaMemcpyHostToDevice)) ||
      (err = cudaMemcpy(in.ptr, input, inElems * sizeof(float), cudaMemcpyHostToDevice)) ||
      (err = cudaMemcpy(out.ptr, output, outElems * sizeof(float), cudaMemcpyHostToDevice)))
    return failed("cudaMemcpy");

  ProgramView program;
  program.steps = steps.ptr;
  program.numSteps = uint32_t(tb.steps.size());
  program.deps = deps.ptr;
  LocalDevicePlatform platform;
  platform.buffers[static_cast<unsigned>(BufferKind::Input)] = reinterpret_cast<char *>(in.ptr);
  platform.buffers[static_cast<unsigned>(BufferKind::Output)] = reinterpret_cast<char *>(out.ptr);
  platform.buffers[static_cast<unsigned>(BufferKind::Scratch)] =
      reinterpret_cast<char *>(scratch.ptr);
  platform.layout = layout;
  interpretKernel<<<1, 128>>>(program, platform, layout.numSlices, status.ptr);
  if ((err = cudaGetLastError()))
    return failed("kernel launch");
  ExecStatus st;
  if ((err = cudaMemcpy(&st, status.ptr, sizeof st, cudaMemcpyDeviceToHost)) ||
      (err = cudaMemcpy(output, out.ptr, outElems * sizeof(float), cudaMemcpyDeviceToHost)))
    return failed("cudaMemcpy");
  if (layout.numSlices && st.result != WaitResult::Ready)
    return "step " + std::to_string(st.step) + " of slice " + std::to_string(st.slice) +
           " needs a connection";
  return "";
}

} // namespace coll::kernels
