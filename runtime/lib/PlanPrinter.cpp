//===- PlanPrinter.cpp - The text dump of a plan --------------------------===//
//
// printPlanText: one line per plan, rank, threadblock and step, described in
// docs/plan-format.md. It prints whatever the plan holds, valid or not.
//
//===----------------------------------------------------------------------===//

#include "PlanFormat.h"

#include <cstdio>
#include <iomanip>
#include <sstream>
#include <vector>

namespace coll {

using namespace planformat;

std::string printablePlanName(const std::string &name) {
  if (name.empty())
    return "(unnamed)";
  std::string out;
  for (unsigned char c : name) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

namespace {

void printStep(const Threadblock &tb, uint32_t i, std::ostream &os) {
  const Instruction &in = tb.steps[i];
  std::ostringstream line;
  std::string mnemonic;
  bool valid = isValidOpcode(in.op);
  OpcodeInfo oi = valid ? opcodeInfo(in.op) : OpcodeInfo{"", false, false, true, true, false};
  mnemonic = valid ? oi.mnemonic : cat("op?", unsigned(in.op));
  line << mnemonic;
  std::vector<std::string> fields;
  auto operand = [](BufferKind buf, uint32_t off) {
    return cat(isValidBufferKind(buf) ? bufferKindLetter(buf) : cat("?", unsigned(buf)), '[', off,
               ']');
  };
  if (oi.readSrc)
    fields.push_back("src " + operand(in.srcBuf, in.srcOff));
  if (oi.writeDst)
    fields.push_back("dst " + operand(in.dstBuf, in.dstOff));
  if (in.op != Opcode::Nop)
    fields.push_back(cat("count ", in.count));
  if (in.depCount > 0) {
    std::string deps = "deps ";
    if (uint64_t(in.depBegin) + in.depCount > tb.deps.size()) {
      deps += cat("?", in.depBegin, "+", in.depCount);
    } else {
      for (uint32_t k = 0; k < in.depCount; ++k) {
        const Dependency &d = tb.deps[in.depBegin + k];
        deps += cat(k ? "," : "", "tb", d.tb, ':', d.step);
      }
    }
    fields.push_back(deps);
  }
  os << "    " << i << ": ";
  if (fields.empty()) {
    os << mnemonic << '\n';
    return;
  }
  os << std::left << std::setw(4) << mnemonic << std::right;
  for (const std::string &f : fields)
    os << ' ' << f;
  os << '\n';
}

/// `contract: T terms`, then one line per output chunk the contract
/// constrains: `output[r][i] = input[q][j]` or `= reduce(input[..][..], ...)`.
void printContract(const PlanInfo &info, const PlanContract &c, std::ostream &os) {
  os << "contract: " << plural(c.numTerms(), "term") << '\n';
  if (info.outputChunks == 0)
    return;
  for (size_t e = 0; e < c.outputs.size(); ++e) {
    if (c.outputs[e] == 0 || c.outputs[e] > c.numTerms())
      continue;
    uint32_t t = c.outputs[e] - 1, begin = c.termBegin[t], end = c.termBegin[t + 1];
    os << "  output[" << e / info.outputChunks << "][" << e % info.outputChunks << "] = ";
    if (end - begin > 1)
      os << "reduce(";
    for (uint32_t k = begin; k < end && k < c.operands.size(); ++k)
      os << (k > begin ? ", " : "") << "input[" << c.operands[k].rank << "][" << c.operands[k].chunk
         << ']';
    os << (end - begin > 1 ? ")\n" : "\n");
  }
}

} // namespace

void printPlanText(const Plan &plan, std::ostream &os) {
  const PlanInfo &info = plan.info;
  os << "plan " << printablePlanName(info.name) << ": ";
  if (isValidCollective(info.collective))
    os << collectiveName(info.collective);
  else
    os << "collective?" << unsigned(info.collective);
  if (collectiveInfo(info.collective).rooted || info.root != 0)
    os << " root " << info.root;
  os << ", " << plural(info.nranks, "rank") << ", input " << plural(info.inputChunks, "chunk")
     << ", output " << plural(info.outputChunks, "chunk") << ", protocol ";
  if (isValidProtocol(info.protocol))
    os << protocolName(info.protocol);
  else
    os << "protocol?" << unsigned(info.protocol);
  os << ", depth " << info.connectionDepth << ", instances " << info.instances << ", "
     << (info.inplace ? "in-place" : "out-of-place") << '\n';
  if (plan.loadedRank >= 0)
    os << "loaded for rank " << plan.loadedRank << " only\n";

  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const RankPlan &rp = plan.ranks[r];
    os << "rank " << (plan.loadedRank >= 0 ? uint64_t(plan.loadedRank) : uint64_t(r))
       << ": scratch " << plural(rp.scratchChunks, "chunk") << ", "
       << plural(rp.threadblocks.size(), "threadblock") << '\n';
    for (size_t t = 0; t < rp.threadblocks.size(); ++t) {
      const Threadblock &tb = rp.threadblocks[t];
      os << "  tb " << t << ':';
      if (tb.sendPeer != -1)
        os << " send " << tb.sendPeer << ',';
      if (tb.recvPeer != -1)
        os << " recv " << tb.recvPeer << ',';
      os << " channel " << tb.channel << ", " << plural(tb.steps.size(), "step") << '\n';
      for (uint32_t i = 0; i < tb.steps.size(); ++i)
        printStep(tb, i, os);
    }
  }
  if (plan.contract)
    printContract(info, *plan.contract, os);
}

} // namespace coll
