//===- Topology.cpp - Reading and writing topology descriptions -----------===//

#include "coll/Runtime/Topology.h"

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
  if (end == s || !std::isfinite(v) || v < 0)
    return false;
  const std::string unit(end);
  for (const auto &u : units)
    if (unit == u.first) {
      out = v * u.second;
      return true;
    }
  return false;
}

bool parseBandwidth(const std::string &text, double &out) {
  static const std::pair<const char *, double> units[] = {
      {"B/s", 1},          {"KB/s", 1e3},       {"MB/s", 1e6},       {"GB/s", 1e9},
      {"TB/s", 1e12},      {"bit/s", 1.0 / 8},  {"Kbit/s", 1e3 / 8}, {"Mbit/s", 1e6 / 8},
      {"Gbit/s", 1e9 / 8}, {"Tbit/s", 1e12 / 8}};
  return parseQuantity(text, units, out);
}

bool parseLatency(const std::string &text, double &out) {
  static const std::pair<const char *, double> units[] = {
      {"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
  return parseQuantity(text, units, out);
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

} // namespace

Status parseTopology(const std::string &text, const std::string &source, Topology &out) {
  Topology t;
  bool haveIntra = false, haveInter = false;
  std::istringstream in(text);
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
    } else if (key == "nics-per-node") {
      ok = parseCount(value, t.nicsPerNode) && t.nicsPerNode > 0;
      expects = "a number of NICs, at least 1";
    } else if (key == "intra-bandwidth" || key == "inter-bandwidth" || key == "copy-bandwidth" ||
               key == "threadblock-bandwidth") {
      const bool zeroOk = key == "copy-bandwidth" || key == "threadblock-bandwidth";
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
      } else {
        t.threadblockBandwidth = v;
      }
    } else if (key == "intra-latency" || key == "inter-latency" || key == "step-latency" ||
               key == "line-step-latency") {
      double v = 0;
      ok = parseLatency(value, v);
      expects = "a latency such as 5us or 1ms";
      (key == "intra-latency"   ? t.intra.latency
       : key == "inter-latency" ? t.inter.latency
       : key == "step-latency"  ? t.stepLatency
                                : t.lineStepLatency) = v;
    } else if (key == "oversubscription") {
      char *end = nullptr;
      t.oversubscription = std::strtod(value.c_str(), &end);
      ok = end != value.c_str() && !*end && std::isfinite(t.oversubscription) &&
           t.oversubscription >= 1;
      expects = "a ratio of at least 1";
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
  }
  o << "copy-bandwidth " << formatBandwidth(t.copyBandwidth) << "\n";
  o << "threadblock-bandwidth " << formatBandwidth(t.threadblockBandwidth) << "\n";
  o << "step-latency " << formatLatency(t.stepLatency) << "\n";
  if (t.lineStepLatency >= 0)
    o << "line-step-latency " << formatLatency(t.lineStepLatency) << "\n";
  return o.str();
}

} // namespace coll
