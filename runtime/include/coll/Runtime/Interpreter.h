//===- Interpreter.h - The plan interpreter core ----------------*- C++ -*-===//
/// \file
/// The one interpreter of plan instructions, shared by every executor
/// (runtime/README.md): the CPU threads and single-thread executors
/// and the CUDA kernel instantiate Interpreter<Platform> with their own
/// platform. Header-only and host/device clean: no exceptions, no virtual
/// calls, no allocation, no standard containers. It reads the plan's
/// fixed-size, trivially copyable records (Instruction, Dependency of
/// Plan.h) wherever they live, host or device memory.
///
/// An Interpreter runs one threadblock's program for every slice of the
/// data (ChunkLayout.h): slice 0's steps in order, then slice 1's, and so
/// on. A step first waits (for its dependencies, for a message on the
/// receive connection, for a free slot on the send connection), then moves
/// data, then publishes what it sent, frees the slot it read and records its
/// progress. Waits come before any effect, so a platform whose waits do not
/// block (the CPU executors, whose workers interleave many threadblocks)
/// returns WaitResult::WouldBlock and a later run() retries the same step
/// from the start; a platform that blocks (a GPU CTA spinning on a flag)
/// returns Ready, TimedOut or Aborted.
///
/// The Platform supplies memory, synchronisation and arithmetic:
///
/// \code
///   struct Platform {
///     // The piece of slice `slice` of chunk `chunk` of a local buffer.
///     MemPiece piece(BufferKind buf, uint32_t chunk, uint64_t slice);
///     // Piece j of a message slot (pieces sit at a fixed stride).
///     char *slotPiece(char *slot, uint32_t j);
///     // The n elements of piece j of a received message, in this rank's
///     // memory: the slot's, where the data lies when the sender left it
///     // there (a direct send, DirectSends.h), or the slot again after the
///     // platform fetched them from the sender's memory into it.
///     const char *recvPiece(char *slot, uint32_t j, uint64_t n);
///     // dst = the n elements of piece j of a received message (one copy,
///     // from wherever they are).
///     void recvCopy(char *dst, char *slot, uint32_t j, uint64_t n);
///     // Puts n elements from src into piece j of an outgoing slot: a copy,
///     // or, for a direct send, where they lie.
///     void sendPiece(char *slot, uint32_t j, const char *src, uint64_t n);
///     // Whether the step that runs sends its result where it lies (a
///     // direct `rcs` or `rrcs`): it writes dst alone, then sends dst.
///     bool sendsResult();
///     // Waits. Each returns Ready, WouldBlock, TimedOut or Aborted.
///     WaitResult checkAbort();                     // before each step
///     WaitResult waitDependency(uint32_t tb, uint32_t step, uint64_t slice);
///     // The oldest unread message, and a free slot to fill, for a step of
///     // `count` chunks in slice `slice` (what a line protocol's message
///     // spans: Protocol.h's messageBytes()). With LL or LL128 the slot
///     // may be the platform's staging copy of the data.
///     WaitResult waitRecv(char *&slot, uint32_t count, uint64_t slice);
///     WaitResult waitSend(char *&slot, uint32_t count, uint64_t slice);
///     void releaseRecv();                          // the slot read is free again
///     void publishSend();                          // the slot written is visible
///     void markProgress(uint64_t slice, uint32_t step);
///     // Arithmetic on n elements of the run's data type and operator.
///     void copy(char *dst, const char *src, uint64_t n);
///     void copy2(char *dst0, char *dst1, const char *src, uint64_t n);
///     void reduce(char *dst, const char *in, const char *local, uint64_t n);
///     void reduce2(char *dst0, char *dst1, const char *in, const char *local,
///                  uint64_t n);
///     // Observation (a trace, when one is recorded): around a step's data
///     // movement and effects, after its waits.
///     void stepBegin(uint64_t slice, uint32_t step);
///     void stepEnd(uint64_t slice, uint32_t step, const Instruction &in);
///   };
/// \endcode
///
/// Reductions put the incoming value (received, or the source of `re`) on
/// the left and the local value on the right: dst = in (op) local.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_INTERPRETER_H
#define COLL_RUNTIME_INTERPRETER_H

#include "coll/Runtime/HostDevice.h"
#include "coll/Runtime/Plan.h"

#include <cstdint>

namespace coll {

/// How a wait ended.
enum class WaitResult : uint8_t {
  Ready,      ///< The condition holds.
  WouldBlock, ///< Not yet, and the platform does not wait (cooperative mode).
  TimedOut,   ///< The platform's time limit passed.
  Aborted,    ///< Another part of the world failed.
};

/// What a threadblock was waiting for when it stopped.
enum class WaitKind : uint8_t {
  None,        ///< Nothing: it finished, or stopped between steps.
  Dependency,  ///< Another threadblock of its rank to finish a step.
  RecvMessage, ///< A message on its receive connection.
  SendSlot,    ///< A free slot on its send connection.
  /// After its last step: its receiver to read the messages it sent
  /// direct (DirectSends.h), whose data lies in its buffers.
  DirectRead,
};

/// Where and why Interpreter::run() returned.
struct ExecStatus {
  WaitResult result = WaitResult::Ready; ///< Ready: the program ran to its end.
  WaitKind waitKind = WaitKind::None;
  uint64_t slice = 0;   ///< The slice of the step that stopped.
  uint32_t step = 0;    ///< The step that stopped.
  uint32_t depTb = 0;   ///< With WaitKind::Dependency: the threadblock waited for ...
  uint32_t depStep = 0; ///< ... and its step.
};

/// A piece of local memory: a pointer and a number of elements.
struct MemPiece {
  char *ptr = nullptr;
  uint64_t length = 0;
};

/// One threadblock's program as the interpreter reads it: the arrays of a
/// Threadblock, wherever they live (host memory, device memory).
struct ProgramView {
  const Instruction *steps = nullptr;
  uint32_t numSteps = 0;
  const Dependency *deps = nullptr;
};

/// The static facts of an opcode, from Opcodes.def, usable on a device.
struct OpcodeFlags {
  bool recv, send, readSrc, writeDst, reduce;
};

/// The facts of \p op; all false for an invalid opcode.
COLL_HOST_DEVICE constexpr OpcodeFlags opcodeFlags(Opcode op) {
  switch (op) {
#define COLL_OPCODE(Id, Mnemonic, Recv, Send, ReadSrc, WriteDst, Reduce)                           \
  case Opcode::Id:                                                                                 \
    return OpcodeFlags{Recv != 0, Send != 0, ReadSrc != 0, WriteDst != 0, Reduce != 0};
#include "coll/Runtime/Opcodes.def"
  }
  return OpcodeFlags{false, false, false, false, false};
}

/// Executes one threadblock's program over every slice (see the file
/// comment). run() may return early with a wait that did not succeed; a
/// later run() resumes at the step that stopped.
template <class Platform> class Interpreter {
public:
  COLL_HOST_DEVICE Interpreter(Platform &platform, ProgramView program, uint64_t numSlices)
      : p(platform), prog(program), numSlices(numSlices) {}

  /// Runs steps until the program's end (result Ready) or until a wait does
  /// not succeed (the status names the step, the slice and the wait).
  COLL_HOST_DEVICE ExecStatus run() {
    while (slice < numSlices) {
      while (step < prog.numSteps) {
        ExecStatus st = execute(prog.steps[step]);
        if (st.result != WaitResult::Ready)
          return st;
        ++step;
        ++executed;
      }
      step = 0;
      ++slice;
    }
    ExecStatus done;
    done.slice = slice;
    return done;
  }

  /// Starts over: \p program (the same steps, perhaps at another address)
  /// from slice 0 of \p slices, for an executor that keeps its interpreters
  /// from one call to the next.
  COLL_HOST_DEVICE void restart(ProgramView program, uint64_t slices) {
    prog = program;
    numSlices = slices;
    slice = 0;
    step = 0;
    executed = 0;
  }

  /// Whether every slice has run.
  COLL_HOST_DEVICE bool finished() const { return slice >= numSlices; }
  /// Steps executed so far, over all slices.
  COLL_HOST_DEVICE uint64_t stepsExecuted() const { return executed; }
  /// The slice and step run() continues with.
  COLL_HOST_DEVICE uint64_t currentSlice() const { return slice; }
  COLL_HOST_DEVICE uint32_t currentStep() const { return step; }

private:
  /// Runs one step: waits, data movement, then the effects on the
  /// connections and the progress counter.
  COLL_HOST_DEVICE ExecStatus execute(const Instruction &in) {
    ExecStatus st;
    st.slice = slice;
    st.step = step;
    if ((st.result = p.checkAbort()) != WaitResult::Ready)
      return st;
    for (uint32_t d = 0; d < in.depCount; ++d) {
      const Dependency &dep = prog.deps[in.depBegin + d];
      if ((st.result = p.waitDependency(dep.tb, dep.step, slice)) != WaitResult::Ready) {
        st.waitKind = WaitKind::Dependency;
        st.depTb = dep.tb;
        st.depStep = dep.step;
        return st;
      }
    }
    OpcodeFlags f = opcodeFlags(in.op);
    char *inSlot = nullptr, *outSlot = nullptr;
    if (f.recv && (st.result = p.waitRecv(inSlot, in.count, slice)) != WaitResult::Ready) {
      st.waitKind = WaitKind::RecvMessage;
      return st;
    }
    if (f.send && (st.result = p.waitSend(outSlot, in.count, slice)) != WaitResult::Ready) {
      st.waitKind = WaitKind::SendSlot;
      return st;
    }

    p.stepBegin(slice, step);
    switch (in.op) {
#define COLL_OPCODE(Id, Mnemonic, Recv, Send, ReadSrc, WriteDst, Reduce)                           \
  case Opcode::Id:                                                                                 \
    handle##Id(in, inSlot, outSlot);                                                               \
    break;
#include "coll/Runtime/Opcodes.def"
    }
    // Effects only after the data movement is complete (on a GPU, after the
    // platform's copy has synchronised the block): the receiver may read the
    // published slot and the sender may refill the released one at once.
    if (f.send)
      p.publishSend();
    if (f.recv)
      p.releaseRecv();
    p.markProgress(slice, step);
    p.stepEnd(slice, step, in);
    return st;
  }

  COLL_HOST_DEVICE MemPiece src(const Instruction &in, uint32_t j) {
    return p.piece(in.srcBuf, in.srcOff + j, slice);
  }
  COLL_HOST_DEVICE MemPiece dst(const Instruction &in, uint32_t j) {
    return p.piece(in.dstBuf, in.dstOff + j, slice);
  }
  COLL_HOST_DEVICE static uint64_t minLength(const MemPiece &a, const MemPiece &b) {
    return a.length < b.length ? a.length : b.length;
  }

  // One handler per opcode of Opcodes.def. Each moves the pieces of the
  // step's `count` chunks; piece j of a message sits at slotPiece(slot, j).

  COLL_HOST_DEVICE void handleNop(const Instruction &, char *, char *) {}

  /// s: send src.
  COLL_HOST_DEVICE void handleSend(const Instruction &in, char *, char *out) {
    for (uint32_t j = 0; j < in.count; ++j) {
      MemPiece s = src(in, j);
      p.sendPiece(out, j, s.ptr, s.length);
    }
  }

  /// r: dst = recv.
  COLL_HOST_DEVICE void handleRecv(const Instruction &in, char *inSlot, char *) {
    for (uint32_t j = 0; j < in.count; ++j) {
      MemPiece d = dst(in, j);
      p.recvCopy(d.ptr, inSlot, j, d.length);
    }
  }

  /// rrc: dst = recv (op) src.
  COLL_HOST_DEVICE void handleRecvReduceCopy(const Instruction &in, char *inSlot, char *) {
    for (uint32_t j = 0; j < in.count; ++j) {
      MemPiece s = src(in, j), d = dst(in, j);
      const uint64_t n = minLength(s, d);
      p.reduce(d.ptr, p.recvPiece(inSlot, j, n), s.ptr, n);
    }
  }

  /// cpy: dst = src.
  COLL_HOST_DEVICE void handleCopy(const Instruction &in, char *, char *) {
    for (uint32_t j = 0; j < in.count; ++j) {
      MemPiece s = src(in, j), d = dst(in, j);
      p.copy(d.ptr, s.ptr, minLength(s, d));
    }
  }

  /// re: dst = src (op) dst.
  COLL_HOST_DEVICE void handleReduce(const Instruction &in, char *, char *) {
    for (uint32_t j = 0; j < in.count; ++j) {
      MemPiece s = src(in, j), d = dst(in, j);
      p.reduce(d.ptr, s.ptr, d.ptr, minLength(s, d));
    }
  }

  /// rcs: dst = recv; send recv. One pass over the incoming slot, or,
  /// when the result is sent where it lies, a copy into dst alone.
  COLL_HOST_DEVICE void handleRecvCopySend(const Instruction &in, char *inSlot, char *out) {
    const bool inPlace = p.sendsResult();
    for (uint32_t j = 0; j < in.count; ++j) {
      MemPiece d = dst(in, j);
      if (inPlace) {
        p.recvCopy(d.ptr, inSlot, j, d.length);
        p.sendPiece(out, j, d.ptr, d.length);
      } else {
        p.copy2(d.ptr, p.slotPiece(out, j), p.recvPiece(inSlot, j, d.length), d.length);
      }
    }
  }

  /// rrs: send recv (op) src; nothing stored.
  COLL_HOST_DEVICE void handleRecvReduceSend(const Instruction &in, char *inSlot, char *out) {
    for (uint32_t j = 0; j < in.count; ++j) {
      MemPiece s = src(in, j);
      p.reduce(p.slotPiece(out, j), p.recvPiece(inSlot, j, s.length), s.ptr, s.length);
    }
  }

  /// rrcs: dst = recv (op) src; send dst. One pass, two destinations, or,
  /// when the result is sent where it lies, one.
  COLL_HOST_DEVICE void handleRecvReduceCopySend(const Instruction &in, char *inSlot, char *out) {
    const bool inPlace = p.sendsResult();
    for (uint32_t j = 0; j < in.count; ++j) {
      MemPiece s = src(in, j), d = dst(in, j);
      const uint64_t n = minLength(s, d);
      if (inPlace) {
        p.reduce(d.ptr, p.recvPiece(inSlot, j, n), s.ptr, n);
        p.sendPiece(out, j, d.ptr, n);
      } else {
        p.reduce2(d.ptr, p.slotPiece(out, j), p.recvPiece(inSlot, j, n), s.ptr, n);
      }
    }
  }

  Platform &p;
  ProgramView prog;
  uint64_t numSlices;
  uint64_t slice = 0;
  uint32_t step = 0;
  uint64_t executed = 0;
};

} // namespace coll

#endif // COLL_RUNTIME_INTERPRETER_H
