//===- LocalInterpreter.h - The interpreter core on a GPU -------*- C++ -*-===//
/// \file
/// The shared interpreter core (coll/Runtime/Interpreter.h) instantiated for
/// CUDA with the simplest device platform: one threadblock, local steps only
/// (cpy, re, nop), fp32 and sum, every thread of the CTA running the control
/// flow and sharing each copy or reduction. It proves the core is
/// host/device clean and gives GPU tests a kernel to compare with the CPU
/// executors; the full CUDA executor (connections between CTAs and ranks)
/// builds on the same core.
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_LOCALINTERPRETER_H
#define COLL_KERNELS_LOCALINTERPRETER_H

#include "coll/Runtime/Plan.h"

#include <cstdint>
#include <string>

namespace coll::kernels {

/// Runs \p tb (local steps only) on the device over \p count elements per
/// rank unit of \p chunksPerUnit chunks, in slices of \p sliceElements.
/// Buffers are host arrays of the sizes the chunk layout gives (input and
/// output: \p inputChunks / \p outputChunks chunks; scratch: \p scratchChunks
/// chunks of the largest size); they are copied to the device and back.
/// Returns "" on success, else the CUDA error or the step that could not run.
std::string runLocalThreadblock(const Threadblock &tb, uint32_t inputChunks, uint32_t outputChunks,
                                uint32_t scratchChunks, uint32_t chunksPerUnit, uint64_t count,
                                uint64_t sliceElements, const float *input, float *output);

} // namespace coll::kernels

#endif // COLL_KERNELS_LOCALINTERPRETER_H
