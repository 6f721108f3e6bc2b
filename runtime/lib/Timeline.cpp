//===- Timeline.cpp - Chrome trace output of a run ------------------------===//
//
// The Trace Event Format of chrome://tracing and Perfetto: metadata events
// name one process per rank and one thread (track) per threadblock; each
// step is a complete ("X") event in microseconds.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Json.h"

#include <cstdio>
#include <fstream>

namespace coll {

void Timeline::writeChromeTrace(std::ostream &os, const Plan &plan) const {
  os << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"plan\":" << jsonQuoted(plan.info.name)
     << ",\"collective\":\"" << collectiveName(plan.info.collective) << "\",\"protocol\":\""
     << protocolName(protocol) << "\"},\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&]() -> std::ostream & {
    os << (first ? "" : ",\n");
    first = false;
    return os;
  };
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    sep() << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << r
          << ",\"args\":{\"name\":\"rank " << r << "\"}}";
    sep() << "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" << r
          << ",\"args\":{\"sort_index\":" << r << "}}";
    const auto &tbs = plan.ranks[r].threadblocks;
    for (size_t b = 0; b < tbs.size(); ++b) {
      std::string name = "tb " + std::to_string(b);
      if (tbs[b].sendPeer >= 0)
        name += " send " + std::to_string(tbs[b].sendPeer);
      if (tbs[b].recvPeer >= 0)
        name += " recv " + std::to_string(tbs[b].recvPeer);
      name += " ch " + std::to_string(tbs[b].channel);
      sep() << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << r << ",\"tid\":" << b
            << ",\"args\":{\"name\":" << jsonQuoted(name) << "}}";
      sep() << "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" << r << ",\"tid\":" << b
            << ",\"args\":{\"sort_index\":" << b << "}}";
    }
  }
  char buf[64];
  for (const TraceEvent &e : events) {
    std::snprintf(buf, sizeof buf, "\"ts\":%.3f,\"dur\":%.3f", e.beginUs, e.endUs - e.beginUs);
    sep() << "{\"ph\":\"X\",\"name\":\"" << opcodeInfo(e.op).mnemonic << "\",\"cat\":\"step\","
          << "\"pid\":" << e.rank << ",\"tid\":" << e.tb << "," << buf
          << ",\"args\":{\"step\":" << e.step << ",\"slice\":" << e.slice
          << ",\"count\":" << e.count << "}}";
  }
  os << "\n]}\n";
}

Status Timeline::writeChromeTraceFile(const std::string &path, const Plan &plan) const {
  std::ofstream os(path);
  if (!os)
    return Status::error("cannot open '" + path + "' for writing");
  writeChromeTrace(os, plan);
  os.close();
  if (!os)
    return Status::error("cannot write '" + path + "'");
  return Status::success();
}

} // namespace coll
