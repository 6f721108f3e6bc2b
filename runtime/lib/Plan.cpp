//===- Plan.cpp - Names and facts of the plan's enums ---------------------===//
//
// The opcode table is generated from Opcodes.def; the other names are the
// spellings the text dump and the diagnostics use.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/Plan.h"

#include <cassert>

namespace coll {

namespace {
const OpcodeInfo opcodeTable[] = {
#define COLL_OPCODE(Id, Mnemonic, Recv, Send, ReadSrc, WriteDst, Reduce)                           \
  {Mnemonic, Recv != 0, Send != 0, ReadSrc != 0, WriteDst != 0, Reduce != 0},
#include "coll/Runtime/Opcodes.def"
};
static_assert(sizeof(opcodeTable) / sizeof(opcodeTable[0]) == numOpcodes(),
              "one table entry per opcode");

/// Returned for an out-of-range opcode so that a caller that broke the
/// precondition in a release build still reads valid memory.
const OpcodeInfo invalidOpcode = {"?", false, false, false, false, false};
} // namespace

const OpcodeInfo &opcodeInfo(Opcode op) {
  auto index = static_cast<unsigned>(op);
  assert(index < numOpcodes() && "opcodeInfo of an invalid opcode");
  return index < numOpcodes() ? opcodeTable[index] : invalidOpcode;
}

const char *protocolName(ProtocolKind kind) {
  switch (kind) {
  case ProtocolKind::Simple:
    return "Simple";
  case ProtocolKind::LL:
    return "LL";
  case ProtocolKind::LL128:
    return "LL128";
  }
  return "unknown";
}

std::pair<BufferKind, uint32_t> aliasedChunk(const PlanInfo &info, uint32_t rank, BufferKind b,
                                             uint32_t chunk) {
  if (!info.inplace || info.collective == CollectiveKind::Custom)
    return {b, chunk};
  switch (collectiveInfo(info.collective).inPlace) {
  case InPlaceAlias::Same:
    if (b == BufferKind::Output)
      return {BufferKind::Input, chunk};
    break;
  case InPlaceAlias::InputInOutput:
    if (b == BufferKind::Input)
      return {BufferKind::Output, rank * info.inputChunks + chunk};
    break;
  case InPlaceAlias::OutputInInput:
    if (b == BufferKind::Output)
      return {BufferKind::Input, rank * info.outputChunks + chunk};
    break;
  default:
    break;
  }
  return {b, chunk};
}

} // namespace coll
