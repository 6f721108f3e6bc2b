//===- Topology.cpp - Reading and writing topology descriptions -----------===//

#include "coll/Runtime/Topology.h"

#include "coll/Runtime/XmlReader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace coll {

namespace {

/// \p text as a number followed by one of \p units (name, factor); false
/// when it is not.
template <size_t N>
bool parseQuantity(const std::string &text, const std::pair<const char *, double> (&units)[N],
                   double &out) {
  const char *s = text.c_str();
  char *end = nullptr;
  const double v = std::strtod(s, &end);
  // Decimal only: strtod also reads hexadecimal (no unit has an x).
  if (end == s || !std::isfinite(v) || v < 0 || text.find_first_of("xX") != std::string::npos)
    return false;
  const std::string unit(end);
  for (const auto &u : units)
    if (unit == u.first) {
      out = v * u.second;
      return std::isfinite(out);
    }
  return false;
}

bool parseBandwidth(const std::string &text, double &out) {
  static const std::pair<const char *, double> units[] = {
      {"B/s", 1},          {"KB/s", 1e3},       {"MB/s", 1e6},       {"GB/s", 1e9},
      {"TB/s", 1e12},      {"bit/s", 1.0 / 8},  {"Kbit/s", 1e3 / 8}, {"Mbit/s", 1e6 / 8},
      {"Gbit/s", 1e9 / 8}, {"Tbit/s", 1e12 / 8}};
  // 0 needs no unit.
  if (text == "0") {
    out = 0;
    return true;
  }
  // Below a byte per second is no link (and its times would overflow).
  return parseQuantity(text, units, out) && (out == 0 || out >= 1);
}

bool parseLatency(const std::string &text, double &out) {
  static const std::pair<const char *, double> units[] = {
      {"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
  // Up to an hour: sums of many such stay far from overflowing.
  return parseQuantity(text, units, out) && out <= 3600;
}

bool parseBytes(const std::string &text, uint64_t &out) {
  static const std::pair<const char *, double> units[] = {{"", 1},
                                                          {"B", 1},
                                                          {"KiB", 1024},
                                                          {"MiB", 1024.0 * 1024},
                                                          {"GiB", 1024.0 * 1024 * 1024},
                                                          {"KB", 1e3},
                                                          {"MB", 1e6},
                                                          {"GB", 1e9}};
  double v = 0;
  if (!parseQuantity(text, units, v) || v >= 1.8e19)
    return false;
  out = uint64_t(v);
  return true;
}

bool parseCount(const std::string &text, uint32_t &out) {
  const char *s = text.c_str();
  char *end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (end == s || *end || text[0] == '-' || v > 1u << 24)
    return false;
  out = uint32_t(v);
  return true;
}

std::string formatBandwidth(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9gGB/s", v / 1e9);
  return buf;
}

std::string formatLatency(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9gus", v * 1e6);
  return buf;
}

/// The value of attribute \p name of \p tag, or "".
std::string attr(const XmlTag &tag, const char *name) {
  for (const auto &a : tag.attrs)
    if (a.first == name)
      return a.second;
  return "";
}

/// Attribute \p name of \p tag as a number in [\p lo, \p hi]: all of it,
/// or its leading number when \p suffixOk ("16.0 GT/s PCIe"); \p absent
/// when the tag lacks it. An error at the tag otherwise.
Status numberAttr(const XmlReader &reader, const XmlTag &tag, const char *name, double lo,
                  double hi, double absent, double &out, bool suffixOk = false) {
  bool present = false;
  std::string text;
  for (const auto &a : tag.attrs)
    if (a.first == name) {
      present = true;
      text = a.second;
    }
  if (!present) {
    out = absent;
    return Status::success();
  }
  const char *s = text.c_str();
  char *end = nullptr;
  const double v = std::strtod(s, &end);
  // Decimal only: strtod also reads hexadecimal.
  const std::string read(s, size_t(end - s));
  const bool number = end != s && (suffixOk || !*end) && std::isfinite(v) &&
                      read.find_first_of("xXpP") == std::string::npos;
  if (!number || v < lo || v > hi) {
    char range[96];
    std::snprintf(range, sizeof range, "%g to %g", lo, hi);
    return Status::error(reader.at(tag.line, tag.col) + "<" + tag.name + "> attribute " + name +
                         "=\"" + text + "\" is not a number from " + range);
  }
  out = v;
  return Status::success();
}

/// NCCL's bandwidth of one NVLink of a GPU of compute capability \p sm,
/// bytes per second (NCCL's topology model: SMxx_NVLINK_BW).
double nvlinkBandwidth(int sm) {
  if (sm >= 100)
    return 40.1e9;
  if (sm >= 90)
    return 20.6e9;
  if (sm >= 80)
    return 20.0e9;
  if (sm >= 70)
    return 20.0e9;
  return 18.0e9;
}

/// A PCIe link's bandwidth from NCCL's attributes ("16.0 GT/s PCIe", 16
/// lanes), bytes per second, as NCCL rates it: lanes x {15, 30, 60, 120,
/// 240, 480} / 80 GB/s for 2.5 to 64 GT/s (0 when unknown).
double pciBandwidth(double gts, double lanes) {
  double perLane = 0; // NCCL's units of 100 Mbit/s per lane.
  if (gts >= 64)
    perLane = 480;
  else if (gts >= 32)
    perLane = 240;
  else if (gts >= 16)
    perLane = 120;
  else if (gts >= 8)
    perLane = 60;
  else if (gts >= 5)
    perLane = 30;
  else if (gts >= 2.5)
    perLane = 15;
  return lanes * perLane / 80.0 * 1e9;
}

/// One node from NCCL's topology XML (NCCL_TOPO_DUMP_FILE): its GPUs are
/// the node's ranks; a GPU's port is the sum of its NVLinks (at NCCL's
/// per-link rate for its compute capability), else its PCIe link; the
/// NICs are its <net> elements (speed in Mbit/s). What the file does not
/// say takes the GPU executor's measured figures (docs/prediction.md).
Status parseNcclTopology(const std::string &text, const std::string &source, Topology &out) {
  XmlReader reader(text, source, "NCCL's topology XML");
  Topology t;
  t.name = source;
  std::vector<XmlTag> open; // The elements we are inside.
  uint32_t gpus = 0, nets = 0;
  double port = 0, nic = 0, nicLatency = 0;
  double gpuLinks = 0; // NVLink bandwidth of the GPU being read.
  int gpuSm = 0;
  bool sawSystem = false;
  auto endGpu = [&](const XmlTag &gpu) {
    double bw = gpuLinks;
    if (bw == 0) {
      // No NVLink: the GPU's PCIe link (its parent <pci>).
      for (auto it = open.rbegin(); it != open.rend(); ++it)
        if (it->name == "pci") {
          double gts = 0, lanes = 0;
          if (Status st = numberAttr(reader, *it, "link_speed", 0, 1e4, 0, gts, true); !st)
            return st;
          if (Status st = numberAttr(reader, *it, "link_width", 0, 1024, 0, lanes); !st)
            return st;
          // Less than a lane is no link.
          bw = lanes >= 1 ? pciBandwidth(gts, lanes) : 0;
          break;
        }
    }
    if (bw <= 0)
      return Status::error(reader.at(gpu.line, gpu.col) +
                           "<gpu> has neither NVLinks nor a PCIe link speed and width");
    port = gpus == 0 ? bw : std::min(port, bw);
    ++gpus;
    return Status::success();
  };
  for (;;) {
    XmlTag tag;
    XmlReader::Event ev = reader.next(tag);
    if (ev == XmlReader::Event::Error)
      return Status::error(reader.error());
    if (ev == XmlReader::Event::Eof)
      break;
    if (ev == XmlReader::Event::End) {
      if (open.empty() || open.back().name != tag.name)
        return Status::error(reader.at(tag.line, tag.col) + "</" + tag.name + "> closes " +
                             (open.empty() ? "nothing" : "<" + open.back().name + ">"));
      if (tag.name == "gpu")
        if (Status s = endGpu(open.back()); !s)
          return s;
      open.pop_back();
      continue;
    }
    if (tag.name == "system") {
      sawSystem = true;
    } else if (tag.name == "gpu") {
      gpuLinks = 0;
      gpuSm = std::atoi(attr(tag, "sm").c_str());
    } else if (tag.name == "nvlink") {
      double count = 1;
      if (Status st = numberAttr(reader, tag, "count", 1, 1024, 1, count); !st)
        return st;
      gpuLinks += count * nvlinkBandwidth(gpuSm);
    } else if (tag.name == "net") {
      // Mbit/s, from a kbit/s to a Pbit/s; latency in microseconds, up to
      // an hour.
      double mbps = 0, latency = 0;
      if (Status st = numberAttr(reader, tag, "speed", 0, 1e9, 0, mbps); !st)
        return st;
      if (mbps < 1e-3)
        return Status::error(reader.at(tag.line, tag.col) +
                             "<net> has no speed (Mbit/s, at least 0.001)");
      if (Status st = numberAttr(reader, tag, "latency", 0, 3.6e9, 0, latency); !st)
        return st;
      const double bw = mbps * 1e6 / 8;
      nic = nets == 0 ? bw : std::min(nic, bw);
      nicLatency = std::max(nicLatency, latency * 1e-6);
      ++nets;
    }
    if (tag.selfClosing) {
      if (tag.name == "gpu")
        if (Status s = endGpu(tag); !s)
          return s;
    } else {
      open.push_back(tag);
    }
  }
  if (!open.empty())
    return Status::error(reader.at(open.back().line, open.back().col) + "<" + open.back().name +
                         "> is not closed");
  if (!sawSystem)
    return Status::error(source + ": not NCCL's topology XML (no <system>)");
  if (gpus == 0)
    return Status::error(source + ": the topology has no <gpu>");
  t.ranksPerNode = gpus;
  t.intra = {port, 1e-6};
  t.nicsPerNode = nets ? nets : 1;
  // A node without a NIC reaches others at PCIe speed through the host.
  t.inter = {nets ? nic : 12e9, nicLatency > 0 ? nicLatency : 5e-6};
  t.copyBandwidth = 49e9;
  t.threadblockBandwidth = 49e9;
  t.stepLatency = 1.9e-6;
  out = std::move(t);
  return Status::success();
}

} // namespace

Status parseTopology(const std::string &text, const std::string &source, Topology &out) {
  // A UTF-8 byte order mark is no text, in either format.
  const size_t bom = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  const size_t first = text.find_first_not_of(" \t\r\n", bom);
  if (first != std::string::npos && text[first] == '<')
    return parseNcclTopology(text, source, out);
  Topology t;
  bool haveIntra = false, haveInter = false;
  std::istringstream in(text.substr(bom));
  std::string line;
  for (unsigned lineNo = 1; std::getline(in, line); ++lineNo) {
    if (size_t hash = line.find('#'); hash != std::string::npos)
      line.resize(hash);
    std::istringstream words(line);
    std::string key, value, extra;
    if (!(words >> key))
      continue;
    auto fail = [&](const std::string &why) {
      return Status::error(source + ":" + std::to_string(lineNo) + ": " + why);
    };
    if (!(words >> value))
      return fail("'" + key + "' needs a value");
    if (words >> extra)
      return fail("'" + key + "' takes one value, not '" + value + " " + extra + "'");
    bool ok = true;
    const char *expects = "";
    if (key == "name") {
      t.name = value;
    } else if (key == "ranks-per-node") {
      ok = parseCount(value, t.ranksPerNode);
      expects = "a number of ranks";
    } else if (key == "threads-per-rank") {
      ok = parseCount(value, t.threadsPerRank);
      expects = "a number of threads, or 0 for one per threadblock";
    } else if (key == "cpus-per-node") {
      ok = parseCount(value, t.cpusPerNode);
      expects = "a number of CPUs, or 0 for no limit";
    } else if (key == "nodes-per-leaf") {
      ok = parseCount(value, t.nodesPerLeaf);
      expects = "a number of nodes, or 0 for one core";
    } else if (key == "rail-optimised") {
      ok = value == "0" || value == "1";
      t.railOptimised = value == "1";
      expects = "0 or 1";
    } else if (key == "nics-per-node") {
      ok = parseCount(value, t.nicsPerNode) && t.nicsPerNode > 0;
      expects = "a number of NICs, at least 1";
    } else if (key == "cache-bytes") {
      ok = parseBytes(value, t.cacheBytes);
      expects = "a size such as 32MiB, or 0";
    } else if (key == "intra-bandwidth" || key == "inter-bandwidth" || key == "copy-bandwidth" ||
               key == "threadblock-bandwidth" || key == "node-bandwidth" ||
               key == "cached-intra-bandwidth" || key == "cached-threadblock-bandwidth" ||
               key == "cached-node-bandwidth" || key == "reduce-bandwidth") {
      const bool zeroOk = key != "intra-bandwidth" && key != "inter-bandwidth";
      double v = 0;
      ok = parseBandwidth(value, v) && (zeroOk || v > 0);
      expects = zeroOk ? "a bandwidth such as 1500GB/s, or 0"
                       : "a bandwidth above 0 such as 450GB/s or 400Gbit/s";
      if (key == "intra-bandwidth") {
        t.intra.bandwidth = v;
        haveIntra = true;
      } else if (key == "inter-bandwidth") {
        t.inter.bandwidth = v;
        haveInter = true;
      } else if (key == "copy-bandwidth") {
        t.copyBandwidth = v;
      } else if (key == "node-bandwidth") {
        t.nodeBandwidth = v;
      } else if (key == "cached-intra-bandwidth") {
        t.cachedIntraBandwidth = v;
      } else if (key == "cached-threadblock-bandwidth") {
        t.cachedThreadblockBandwidth = v;
      } else if (key == "cached-node-bandwidth") {
        t.cachedNodeBandwidth = v;
      } else if (key == "reduce-bandwidth") {
        t.reduceBandwidth = v;
      } else {
        t.threadblockBandwidth = v;
      }
    } else if (key == "intra-latency" || key == "inter-latency" || key == "step-latency" ||
               key == "line-step-latency" || key == "call-latency" || key == "switch-latency" ||
               key == "piece-latency" || key == "call-rank-latency" ||
               key == "dependency-latency" || key == "recv-reduce-latency") {
      double v = 0;
      ok = parseLatency(value, v);
      expects = "a latency such as 5us or 1ms, at most 3600s";
      (key == "intra-latency"         ? t.intra.latency
       : key == "inter-latency"       ? t.inter.latency
       : key == "step-latency"        ? t.stepLatency
       : key == "call-latency"        ? t.callLatency
       : key == "call-rank-latency"   ? t.callRankLatency
       : key == "switch-latency"      ? t.switchLatency
       : key == "piece-latency"       ? t.pieceLatency
       : key == "dependency-latency"  ? t.dependencyLatency
       : key == "recv-reduce-latency" ? t.recvReduceLatency
                                      : t.lineStepLatency) = v;
    } else if (key == "direct-sends") {
      ok = value == "0" || value == "1";
      t.directSends = value == "1";
      expects = "0 or 1";
    } else if (key == "oversubscription") {
      char *end = nullptr;
      t.oversubscription = std::strtod(value.c_str(), &end);
      // Up to a million: a core of a millionth of the leaves' links.
      ok = end != value.c_str() && !*end && std::isfinite(t.oversubscription) &&
           t.oversubscription >= 1 && t.oversubscription <= 1e6;
      ok = ok && value.find_first_of("xX") == std::string::npos;
      expects = "a ratio from 1 to 1000000";
    } else {
      return fail("unknown key '" + key + "'");
    }
    if (!ok)
      return fail("'" + key + "' expects " + expects + ", not '" + value + "'");
  }
  if (!haveIntra)
    return Status::error(source + ": no intra-bandwidth (each rank's port into its node)");
  if (t.ranksPerNode && !haveInter)
    return Status::error(source + ": ranks-per-node " + std::to_string(t.ranksPerNode) +
                         " needs an inter-bandwidth (each NIC's)");
  if (t.railOptimised && !t.nodesPerLeaf)
    return Status::error(source + ": rail-optimised needs nodes-per-leaf (the nodes under a leaf)");
  if (t.name.empty())
    t.name = source;
  out = std::move(t);
  return Status::success();
}

Result<Topology> loadTopology(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return Status::error("cannot open topology '" + path + "'");
  std::stringstream text;
  text << f.rdbuf();
  Topology t;
  if (Status s = parseTopology(text.str(), path, t); !s)
    return s;
  return t;
}

std::string formatTopology(const Topology &t) {
  std::ostringstream o;
  o << "name " << (t.name.empty() ? "unnamed" : t.name) << "\n";
  o << "ranks-per-node " << t.ranksPerNode << "\n";
  o << "intra-bandwidth " << formatBandwidth(t.intra.bandwidth) << "\n";
  o << "intra-latency " << formatLatency(t.intra.latency) << "\n";
  if (t.ranksPerNode) {
    o << "nics-per-node " << t.nicsPerNode << "\n";
    o << "inter-bandwidth " << formatBandwidth(t.inter.bandwidth) << "\n";
    o << "inter-latency " << formatLatency(t.inter.latency) << "\n";
    o << "oversubscription " << t.oversubscription << "\n";
    if (t.nodesPerLeaf) {
      o << "nodes-per-leaf " << t.nodesPerLeaf << "\n";
      o << "rail-optimised " << (t.railOptimised ? 1 : 0) << "\n";
    }
  }
  o << "copy-bandwidth " << formatBandwidth(t.copyBandwidth) << "\n";
  o << "threadblock-bandwidth " << formatBandwidth(t.threadblockBandwidth) << "\n";
  o << "node-bandwidth " << formatBandwidth(t.nodeBandwidth) << "\n";
  if (t.reduceBandwidth > 0)
    o << "reduce-bandwidth " << formatBandwidth(t.reduceBandwidth) << "\n";
  if (t.threadsPerRank)
    o << "threads-per-rank " << t.threadsPerRank << "\n";
  o << "call-latency " << formatLatency(t.callLatency) << "\n";
  if (t.callRankLatency > 0)
    o << "call-rank-latency " << formatLatency(t.callRankLatency) << "\n";
  o << "direct-sends " << (t.directSends ? 1 : 0) << "\n";
  o << "step-latency " << formatLatency(t.stepLatency) << "\n";
  if (t.lineStepLatency >= 0)
    o << "line-step-latency " << formatLatency(t.lineStepLatency) << "\n";
  if (t.pieceLatency > 0)
    o << "piece-latency " << formatLatency(t.pieceLatency) << "\n";
  if (t.dependencyLatency > 0)
    o << "dependency-latency " << formatLatency(t.dependencyLatency) << "\n";
  if (t.recvReduceLatency > 0)
    o << "recv-reduce-latency " << formatLatency(t.recvReduceLatency) << "\n";
  if (t.cpusPerNode)
    o << "cpus-per-node " << t.cpusPerNode << "\n";
  if (t.cpusPerNode || t.switchLatency > 0)
    o << "switch-latency " << formatLatency(t.switchLatency) << "\n";
  if (t.cacheBytes) {
    o << "cache-bytes " << t.cacheBytes << "\n";
    if (t.cachedIntraBandwidth > 0)
      o << "cached-intra-bandwidth " << formatBandwidth(t.cachedIntraBandwidth) << "\n";
    if (t.cachedThreadblockBandwidth > 0)
      o << "cached-threadblock-bandwidth " << formatBandwidth(t.cachedThreadblockBandwidth) << "\n";
    if (t.cachedNodeBandwidth > 0)
      o << "cached-node-bandwidth " << formatBandwidth(t.cachedNodeBandwidth) << "\n";
  }
  return o.str();
}

double callSeconds(const Topology &topo, uint32_t nranks) {
  const uint32_t onNode = topo.ranksPerNode ? std::min(topo.ranksPerNode, nranks) : nranks;
  return topo.callLatency + topo.callRankLatency * double(onNode > 1 ? onNode - 1 : 0);
}

} // namespace coll
