//===- ProcessRun.h - The run of one rank of a process call ----*- C++ -*-===//
//
// The last step of a ProcessGroup call: this rank's threadblocks run on its
// workers (Interpreter<CpuPlatform>, as in LocalWorld), paced by
// ShmPacer: spin, yield, then sleep on the rank's doorbell, and every
// liveness interval check on the peers. Private to the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_PROCESSRUN_H
#define COLL_RUNTIME_LIB_PROCESSRUN_H

#include "DirectSends.h"
#include "ExecCommon.h"
#include "ProcessControl.h"
#include "ProcessData.h"

#include <memory>
#include <vector>

namespace coll {
namespace detail {

/// This rank's threadblocks of a process call, built once over the call's
/// FIFOs and progress counters and run again by later calls of the same
/// description (ProcessGroup.cpp keeps it with the call's data segment).
class RankRun {
public:
  /// Builds the runs of \p rp's threadblocks (this rank's section) over
  /// \p fifos and the progress counters of \p own, with \p layout and
  /// \p kernels; all four must outlive this object, and stay where they are.
  void build(JobControl &jc, const RankPlan &rp, const ChunkLayout &layout,
             const HostKernels &kernels, CallFifos &fifos, const OwnDataSegment &own);

  /// Runs call \p seq of \p rp (the section built from, or one with the same
  /// content at another address) on \p input, \p output and \p scratch
  /// with ProcessGroupOptions::workers workers (the calling thread is one).
  /// The FIFOs' counters go on from the last run (a connection carries the
  /// messages of one call after the other's); the progress counters start
  /// from zero. The first failure (in time) is the error; it breaks the
  /// group, but for one of kind Mismatch: with \p watch (this rank's
  /// publication of a call it runs before it has seen the peers'), the run
  /// stops when a peer publishes the call differently (peerDisagrees()).
  /// \p steps: per threadblock, the steps to run instead of \p rp's (an
  /// OutOfPlaceProgram's), or null. \p direct: per threadblock, the steps
  /// that may send direct (DirectSends.h, for the program run), used where
  /// the receiver reads our memory, of the buffers whose bits (1 <<
  /// BufferKind) \p directBuffers holds (armDirectSends()). \p inputBlocks,
  /// \p outputBlocks: the Input and Output in blocks of one unit
  /// (HostBinding), or null.
  CallError run(JobControl &jc, uint64_t seq, const RankPlan &rp,
                const std::vector<std::vector<Instruction>> *steps, const DirectSteps &direct,
                uint8_t directBuffers, char *input, char *output, void *const *inputBlocks,
                void *const *outputBlocks, char *scratch, const PublishedCall *watch = nullptr);

  bool empty() const { return runs.empty(); }
  /// Set before run(): the run's copies into the Input and Output stream
  /// their stores (RankState::streamStores); \p scratchBytes: the bytes at
  /// run()'s scratch.
  void setStores(bool stream, uint64_t scratchBytes) {
    rs.streamStores = stream;
    rs.scratchBytes = scratchBytes;
  }
  /// The direct messages this rank read in the last run.
  uint64_t directReceived() const;

private:
  WorldState world;
  RankState rs;
  std::vector<std::unique_ptr<TbRun>> runs;
  std::vector<std::vector<TbRun *>> workers;
  CallFifos *fifos = nullptr;
  uint64_t numSlices = 0;
};

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_PROCESSRUN_H
