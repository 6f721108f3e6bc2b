//===- PlanPage.cpp - A plan as a self-contained HTML page ----------------===//
//
// The page is a fixed template (PlanPageTemplate.inc: styles and script)
// around one JSON object with the plan, the simulated spans, the links and
// the predicted table. The script draws from that object alone.
//
//===----------------------------------------------------------------------===//

#include "coll/Compiler/PlanPage.h"

#include "coll/Runtime/Collective.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Json.h"
#include "coll/Runtime/Predict.h"
#include "coll/Runtime/Protocol.h"
#include "coll/Runtime/Selection.h"

#include <algorithm>
#include <cstdio>

namespace coll::compiler {

namespace {

const char *const kTemplate =
#include "PlanPageTemplate.inc"
    ;

/// A number as JSON, in at most \p digits significant digits.
std::string num(double v, int digits = 6) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

/// The count of a call of nccl-tests' size \p bytes on \p plan.
uint64_t countFor(const Plan &plan, uint64_t bytes, DataType type) {
  const BufferElements unit = planBufferElements(plan.info, 1);
  const uint64_t perCount = std::max<uint64_t>(1, std::max(unit.input, unit.output));
  return bytes / dataTypeSize(type) / perCount;
}

} // namespace

Topology nominalTopology() {
  Topology t;
  t.name = "nominal";
  t.ranksPerNode = 0;
  t.intra.bandwidth = 10e9;
  t.intra.latency = 1e-6;
  t.stepLatency = 1e-6;
  t.copyBandwidth = 10e9;
  return t;
}

Result<std::string> renderPlanPage(const Plan &plan, const PlanPageOptions &options) {
  const Topology nominal = nominalTopology();
  const Topology &topo = options.topology ? *options.topology : nominal;
  const uint64_t count = std::max<uint64_t>(1, countFor(plan, options.timelineBytes, options.type));
  PredictOptions predict;
  predict.recordSpans = true;
  predict.sliceElements = options.sliceElements;
  Result<Prediction> run = predictPlan(plan, topo, count, options.type, predict);
  if (!run)
    return run.getStatus();

  std::string j = "{";
  const PlanInfo &info = plan.info;
  j += "\"name\":" + jsonQuoted(info.name);
  j += ",\"source\":" + jsonQuoted(options.source);
  j += ",\"collective\":" + jsonQuoted(info.collective == CollectiveKind::Custom
                                           ? "custom"
                                           : collectiveName(info.collective));
  j += ",\"nranks\":" + std::to_string(info.nranks);
  j += ",\"root\":" + std::to_string(info.root);
  j += ",\"rooted\":" + std::string(collectiveInfo(info.collective).rooted ? "true" : "false");
  j += ",\"inputChunks\":" + std::to_string(info.inputChunks);
  j += ",\"outputChunks\":" + std::to_string(info.outputChunks);
  j += ",\"protocol\":" + jsonQuoted(protocolName(run->protocol));
  j += ",\"depth\":" + std::to_string(info.connectionDepth);
  j += ",\"opcodes\":[";
  for (unsigned op = 0; op < numOpcodes(); ++op) {
    const OpcodeInfo &o = opcodeInfo(Opcode(op));
    j += std::string(op ? "," : "") + "{\"m\":" + jsonQuoted(o.mnemonic) +
         ",\"recv\":" + (o.recv ? "1" : "0") + ",\"send\":" + (o.send ? "1" : "0") +
         ",\"reduce\":" + (o.reduce ? "1" : "0") + ",\"read\":" + (o.readSrc ? "1" : "0") +
         ",\"write\":" + (o.writeDst ? "1" : "0") + "}";
  }
  j += "],\"buffers\":[";
  for (unsigned b = 0; b < numBufferKinds(); ++b)
    j += std::string(b ? "," : "") + jsonQuoted(bufferKindName(BufferKind(b)));
  // Ranks: per threadblock its peers and its steps, six numbers each (op,
  // source buffer and offset, destination buffer and offset, count).
  // Too many steps for a page: the first slice's, then the earliest of
  // those.
  std::vector<StepSpan> &spans = run->spans;
  const uint64_t allSpans = spans.size();
  const bool firstSliceOnly = spans.size() > options.maxSpans;
  if (firstSliceOnly)
    spans.erase(
        std::remove_if(spans.begin(), spans.end(), [](const StepSpan &s) { return s.slice != 0; }),
        spans.end());
  if (spans.size() > options.maxSpans) {
    std::stable_sort(spans.begin(), spans.end(),
                     [](const StepSpan &a, const StepSpan &b) { return a.start < b.start; });
    spans.resize(options.maxSpans);
  }
  // A threadblock's steps as far as the page's spans reach (the moves the
  // slider lists), and how many chunks it sends in all (the weight of its
  // connection in the picture).
  std::vector<std::vector<uint32_t>> shownSteps(plan.ranks.size());
  for (size_t r = 0; r < plan.ranks.size(); ++r)
    shownSteps[r].assign(plan.ranks[r].threadblocks.size(), 0);
  for (const StepSpan &sp : spans)
    if (sp.rank < shownSteps.size() && sp.tb < shownSteps[sp.rank].size())
      shownSteps[sp.rank][sp.tb] = std::max(shownSteps[sp.rank][sp.tb], sp.step + 1);

  j += "],\"ranks\":[";
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const RankPlan &rp = plan.ranks[r];
    j += std::string(r ? "," : "") + "{\"scratch\":" + std::to_string(rp.scratchChunks) +
         ",\"tbs\":[";
    for (size_t t = 0; t < rp.threadblocks.size(); ++t) {
      const Threadblock &tb = rp.threadblocks[t];
      uint64_t sent = 0;
      for (const Instruction &in : tb.steps)
        if (opcodeInfo(in.op).send)
          sent += in.count;
      j += std::string(t ? "," : "") + "{\"send\":" + std::to_string(tb.sendPeer) +
           ",\"recv\":" + std::to_string(tb.recvPeer) +
           ",\"channel\":" + std::to_string(tb.channel) + ",\"sent\":" + std::to_string(sent) +
           ",\"steps\":[";
      for (size_t s = 0; s < std::min<size_t>(tb.steps.size(), shownSteps[r][t]); ++s) {
        const Instruction &in = tb.steps[s];
        j += std::string(s ? "," : "") + std::to_string(unsigned(in.op)) + "," +
             std::to_string(unsigned(in.srcBuf)) + "," + std::to_string(in.srcOff) + "," +
             std::to_string(unsigned(in.dstBuf)) + "," + std::to_string(in.dstOff) + "," +
             std::to_string(in.count);
      }
      j += "]}";
    }
    j += "]}";
  }
  j += "]";

  // The timeline's call and its spans (microseconds), five numbers each:
  // rank, threadblock, step, start, end; slices past the first dropped
  // when there are too many.
  const double total = run->seconds - callSeconds(topo, info.nranks);
  j += ",\"system\":{\"name\":" + jsonQuoted(options.topology ? topo.name : "") +
       ",\"nominal\":" + (options.topology ? "false" : "true") +
       ",\"ranksPerNode\":" + std::to_string(topo.ranksPerNode) + "}";
  j += ",\"call\":{\"bytes\":" + std::to_string(run->sizeBytes) +
       ",\"size\":" + jsonQuoted(formatByteSize(run->sizeBytes)) +
       ",\"count\":" + std::to_string(count) +
       ",\"type\":" + jsonQuoted(dataTypeName(options.type)) + ",\"us\":" + num(total * 1e6) +
       ",\"slices\":" + std::to_string(run->slices) + ",\"steps\":" + std::to_string(run->steps) +
       ",\"messages\":" + std::to_string(run->messages) +
       ",\"firstSliceOnly\":" + (firstSliceOnly ? "true" : "false") +
       ",\"spansShown\":" + std::to_string(spans.size()) +
       ",\"spansRun\":" + std::to_string(allSpans) +
       ",\"lastRank\":" + std::to_string(run->lastRank) +
       ",\"lastTb\":" + std::to_string(run->lastTb) + "}";
  j += ",\"spans\":[";
  bool first = true;
  for (const StepSpan &s : spans) {
    j += std::string(first ? "" : ",") + std::to_string(s.rank) + "," + std::to_string(s.tb) + "," +
         std::to_string(s.step) + "," + num(s.start * 1e6, 7) + "," + num(s.end * 1e6, 7);
    first = false;
  }
  j += "]";

  // The links: name, capacity (GB/s), bytes, share of the run busy.
  std::vector<LinkUsage> links = run->links;
  std::stable_sort(links.begin(), links.end(),
                   [](const LinkUsage &a, const LinkUsage &b) { return a.busy > b.busy; });
  j += ",\"links\":[";
  for (size_t i = 0; i < links.size(); ++i) {
    const LinkUsage &l = links[i];
    j += std::string(i ? "," : "") + "[" + jsonQuoted(l.name) + "," + num(l.capacity / 1e9) + "," +
         num(l.bytes) + "," + num(total > 0 ? l.busy / total : 0, 4) + "]";
  }
  j += "]";

  // The predicted table, on a described system.
  j += ",\"table\":";
  if (!options.topology) {
    j += "null";
  } else {
    j += "[";
    std::vector<PredictCall> calls;
    for (uint64_t bytes : sweepSizes(options.minBytes, options.maxBytes, options.factor))
      if (const uint64_t c = countFor(plan, bytes, options.type); c > 0)
        calls.push_back(PredictCall{&plan, c});
    PredictOptions sweep;
    sweep.sliceElements = options.sliceElements;
    std::vector<Result<Prediction>> results =
        predictPlans(calls, topo, options.type, sweep, options.threads);
    for (size_t i = 0; i < results.size(); ++i) {
      Result<Prediction> &p = results[i];
      if (!p)
        return p.getStatus();
      j += std::string(i ? "," : "") + "[" + std::to_string(p->sizeBytes) + "," +
           num(p->seconds * 1e6) + "," + num(p->algbw / 1e9) + "," + num(p->busbw / 1e9) + "]";
    }
    j += "]";
  }
  j += "}";

  std::string page = kTemplate;
  const std::string title = info.name + " (" + std::to_string(info.nranks) + " ranks)";
  auto replace = [&](const std::string &key, const std::string &value) {
    size_t at = page.find(key);
    if (at != std::string::npos)
      page.replace(at, key.size(), value);
  };
  std::string escapedTitle;
  for (char c : title)
    escapedTitle += c == '<'   ? std::string("&lt;")
                    : c == '&' ? std::string("&amp;")
                               : std::string(1, c);
  replace("@TITLE@", escapedTitle);
  replace("@DATA@", j);
  return page;
}

} // namespace coll::compiler
