//===- Plan.cpp - Names and facts of the plan's enums ---------------------===//
//
// The opcode table is generated from Opcodes.def; the other names are the
// spellings the text dump and the diagnostics use.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/Plan.h"

#include "coll/Runtime/Selection.h"

#include <cassert>
#include <strings.h>

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

Instruction makeInstruction(Opcode op, BufferKind srcBuf, uint32_t srcOff, BufferKind dstBuf,
                            uint32_t dstOff, uint32_t count) {
  Instruction in;
  in.op = op;
  const OpcodeInfo &info = opcodeInfo(op);
  if (info.readSrc) {
    in.srcBuf = srcBuf;
    in.srcOff = srcOff;
  }
  if (info.writeDst) {
    in.dstBuf = dstBuf;
    in.dstOff = dstOff;
  }
  in.count = count;
  return in;
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

bool parseProtocol(const char *name, ProtocolKind &kind) {
  for (ProtocolKind k : {ProtocolKind::Simple, ProtocolKind::LL, ProtocolKind::LL128})
    if (strcasecmp(name, protocolName(k)) == 0) {
      kind = k;
      return true;
    }
  return false;
}

Status parseProtocolChoice(const std::string &text, ProtocolChoice &choice) {
  ProtocolChoice c;
  auto bad = [&](const std::string &why) {
    return Status::error("bad protocol choice '" + text + "': " + why +
                         " (expected auto, Simple, LL, LL128, or thresholds such as "
                         "LL:4K,LL128:256K)");
  };
  if (text.empty() || strcasecmp(text.c_str(), "auto") == 0) {
    choice = c;
    return Status::success();
  }
  if (text.find(':') == std::string::npos) {
    if (!parseProtocol(text.c_str(), c.forced))
      return bad("not a protocol");
    c.force = true;
    choice = c;
    return Status::success();
  }
  size_t at = 0;
  bool seen[3] = {};
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    size_t colon = item.find(':');
    ProtocolKind k;
    uint64_t bytes = 0;
    if (colon == std::string::npos || !parseProtocol(item.substr(0, colon).c_str(), k))
      return bad("'" + item + "' is not PROTOCOL:BYTES");
    if (k == ProtocolKind::Simple)
      return bad("Simple takes no threshold (it is what the plan runs above them)");
    if (!parseByteSize(item.substr(colon + 1), bytes) || bytes == 0)
      return bad("'" + item.substr(colon + 1) + "' is not a size of at least 1 byte");
    if (seen[unsigned(k)])
      return bad(std::string(protocolName(k)) + " is named twice");
    seen[unsigned(k)] = true;
    (k == ProtocolKind::LL ? c.llMaxBytes : c.ll128MaxBytes) = bytes;
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  choice = c;
  return Status::success();
}

std::string formatProtocolChoice(const ProtocolChoice &c) {
  if (c.force)
    return protocolName(c.forced);
  std::string s;
  if (c.llMaxBytes)
    s += "LL:" + std::to_string(c.llMaxBytes);
  if (c.ll128MaxBytes)
    s += (s.empty() ? "" : ",") + std::string("LL128:") + std::to_string(c.ll128MaxBytes);
  return s.empty() ? "auto" : s;
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
