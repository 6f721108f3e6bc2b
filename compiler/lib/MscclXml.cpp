//===- MscclXml.cpp - MSCCL-IR XML in -------------------------------------===//
//
// The mapping of MSCCL-IR's algo/gpu/tb/step onto a Plan, read with the
// runtime's XmlReader. Every error names its line and column.
//
//===----------------------------------------------------------------------===//

#include "coll/Compiler/MscclXml.h"

#include "coll/Runtime/Collective.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/XmlReader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <regex>
#include <vector>

namespace coll::compiler {

namespace {

using Tag = XmlTag;

/// Attribute access with typed, located errors.
class Attrs {
public:
  Attrs(const Tag &tag, const XmlReader &reader, std::string what)
      : tag(tag), reader(reader), what(std::move(what)) {}

  const std::string *find(const char *name) const {
    for (const auto &a : tag.attrs)
      if (a.first == name)
        return &a.second;
    return nullptr;
  }
  Status error(const std::string &msg) const {
    return Status::error(reader.at(tag.line, tag.col) + what + ": " + msg);
  }
  /// An integer attribute; \p fallback when absent (none: required).
  Status integer(const char *name, int64_t &out, std::optional<int64_t> fallback = std::nullopt,
                 int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const {
    const std::string *v = find(name);
    if (!v) {
      if (!fallback)
        return error("attribute '" + std::string(name) + "' is missing");
      out = *fallback;
      return Status::success();
    }
    const char *s = v->c_str();
    char *end = nullptr;
    errno = 0;
    long long x = std::strtoll(s, &end, 10);
    if (v->empty() || *end || errno || end == s)
      return error("attribute " + std::string(name) + "=\"" + *v + "\" is not an integer");
    if (x < lo || x > hi)
      return error("attribute " + std::string(name) + "=\"" + *v + "\" is out of range [" +
                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out = x;
    return Status::success();
  }

private:
  const Tag &tag;
  const XmlReader &reader;
  std::string what;
};

/// The next child of the element \p parent (named \p context in
/// messages), which must be a <\p child>: true with its tag in \p tag,
/// false at the parent's end tag; an error in \p error otherwise.
bool nextChild(XmlReader &reader, const Tag &parent, const char *child, const std::string &context,
               Tag &tag, Status &error) {
  XmlReader::Event ev = reader.next(tag);
  if (ev == XmlReader::Event::Error) {
    error = Status::error(reader.error());
  } else if (ev == XmlReader::Event::Eof) {
    error = Status::error(reader.at(parent.line, parent.col) + context + ": <" + parent.name +
                          "> is not closed");
  } else if (ev == XmlReader::Event::End) {
    if (tag.name == parent.name)
      return false;
    error = Status::error(reader.at(tag.line, tag.col) + "</" + tag.name + "> where </" +
                          parent.name + "> was expected");
  } else if (tag.name == child) {
    return true;
  } else {
    error = Status::error(reader.at(tag.line, tag.col) + "unexpected <" + tag.name + "> in " +
                          context + " (expected <" + child + ">)");
  }
  return false;
}

std::optional<Opcode> opcodeNamed(const std::string &s) {
  for (unsigned i = 0; i < numOpcodes(); ++i)
    if (s == opcodeInfo(Opcode(i)).mnemonic)
      return Opcode(i);
  return std::nullopt;
}

std::optional<BufferKind> bufferNamed(const std::string &s) {
  if (s == "i" || s == "input")
    return BufferKind::Input;
  if (s == "o" || s == "output")
    return BufferKind::Output;
  if (s == "s" || s == "scratch")
    return BufferKind::Scratch;
  return std::nullopt;
}

constexpr int64_t maxChunks = int64_t(PlanLimits::maxChunks);

/// MSCCL-IR gives a step one dependency and writes the others as nops
/// before it: the executors hand the dependencies of a run of nops to the
/// next step that is not one (and drop nops at the end of a threadblock).
/// Does the same to \p rp: each such step gets its nops' dependencies
/// first, then its own, and the nops go; a dependency on a nop becomes one
/// on the next step that remains (the executors' waits are satisfied by a
/// later step's progress), or the last before it. \p positions receives
/// each remaining step's position in the file, per threadblock.
void foldNops(RankPlan &rp, std::vector<std::vector<uint32_t>> &positions) {
  const size_t ntb = rp.threadblocks.size();
  positions.assign(ntb, {});
  // The index each file position has once the nops are gone.
  std::vector<std::vector<int64_t>> after(ntb), before(ntb);
  for (size_t t = 0; t < ntb; ++t) {
    const std::vector<Instruction> &steps = rp.threadblocks[t].steps;
    after[t].assign(steps.size(), -1);
    before[t].assign(steps.size(), -1);
    int64_t kept = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
      before[t][k] = kept - 1;
      if (steps[k].op != Opcode::Nop)
        positions[t].push_back(uint32_t(k)), ++kept;
    }
    int64_t next = kept;
    for (size_t k = steps.size(); k-- > 0;) {
      if (steps[k].op != Opcode::Nop)
        --next;
      after[t][k] = next < kept ? next : -1;
    }
  }
  auto remap = [&](const Dependency &d) -> std::optional<Dependency> {
    int64_t i = after[d.tb][d.step];
    if (i < 0)
      i = before[d.tb][d.step];
    if (i < 0)
      return std::nullopt;
    return Dependency{d.tb, uint32_t(i)};
  };
  for (size_t t = 0; t < ntb; ++t) {
    Threadblock &tb = rp.threadblocks[t];
    std::vector<Instruction> steps;
    std::vector<Dependency> deps, pending;
    for (const Instruction &in : tb.steps) {
      for (uint32_t d = 0; d < in.depCount; ++d)
        if (std::optional<Dependency> m = remap(tb.deps[in.depBegin + d]))
          pending.push_back(*m);
      if (in.op == Opcode::Nop)
        continue;
      Instruction out = in;
      out.depBegin = uint32_t(deps.size());
      out.depCount = uint32_t(pending.size());
      deps.insert(deps.end(), pending.begin(), pending.end());
      pending.clear();
      if (out.depCount == 0)
        out.depBegin = 0;
      steps.push_back(out);
    }
    tb.steps = std::move(steps);
    tb.deps = std::move(deps);
  }
}

} // namespace

/// Whether \p text is UTF-8 without control characters (tab aside).
static bool wellFormedText(const std::string &text) {
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t') || c == 0x7f)
        return false;
      ++i;
      continue;
    }
    // The length of the sequence, from its first byte (no overlong forms
    // of two bytes, nothing past U+10FFFF).
    const size_t n = c >= 0xc2 && c <= 0xdf   ? 2
                     : c >= 0xe0 && c <= 0xef ? 3
                     : c >= 0xf0 && c <= 0xf4 ? 4
                                              : 0;
    if (n == 0 || i + n > text.size())
      return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80)
        return false;
    i += n;
  }
  return true;
}

std::string mscclProblem(const MscclAlgoInfo &algo, const std::string &fileName,
                         const std::string &problem, bool folded) {
  // The plan's own names ("rank 0 threadblock 1 step 2", "rank 1 -> rank 2")
  // become the file's, with the file's step numbers.
  static const std::regex step(R"(rank (\d+) threadblock (\d+) step (\d+))");
  std::string text;
  std::smatch m;
  std::string rest = problem;
  while (std::regex_search(rest, m, step)) {
    const uint64_t r = std::stoull(m[1]), t = std::stoull(m[2]);
    uint64_t k = std::stoull(m[3]);
    if (folded && r < algo.positions.size() && t < algo.positions[r].size() &&
        k < algo.positions[r][t].size())
      k = algo.positions[r][t][k];
    text += m.prefix().str() + "gpu " + std::to_string(r) + " tb " + std::to_string(t) + " step " +
            std::to_string(k);
    rest = m.suffix().str();
  }
  text += rest;
  static const std::regex threadblock(R"(\brank (\d+) threadblock (\d+))");
  text = std::regex_replace(text, threadblock, "gpu $1 tb $2");
  static const std::regex rank(R"(\brank (\d+))");
  text = std::regex_replace(text, rank, "gpu $1");
  // The first step named that the file has, in its terms now, gives the
  // place.
  static const std::regex gpuStep(R"(gpu (\d+) tb (\d+) step (\d+))");
  std::optional<std::pair<unsigned, unsigned>> at;
  for (auto i = std::sregex_iterator(text.begin(), text.end(), gpuStep);
       !at && i != std::sregex_iterator(); ++i) {
    const uint64_t r = std::stoull((*i)[1]), t = std::stoull((*i)[2]), k = std::stoull((*i)[3]);
    if (r > UINT32_MAX || t > UINT32_MAX || k > UINT32_MAX)
      continue;
    at = algo.stepLocation(r, t, k);
  }
  // Else the first threadblock named (a connection's ends), else the first
  // gpu (a dependency cycle of its threadblocks).
  auto element = [&](const std::regex &re, bool withTb) {
    for (auto i = std::sregex_iterator(text.begin(), text.end(), re);
         !at && i != std::sregex_iterator(); ++i) {
      const std::string gpu = (*i)[1], tb = withTb ? (*i)[2].str() : std::string();
      if (gpu.size() > 9 || tb.size() > 9)
        continue;
      auto it = algo.elementLocations.find(
          {uint32_t(std::stoull(gpu)), withTb ? uint32_t(std::stoull(tb)) : UINT32_MAX});
      if (it != algo.elementLocations.end())
        at = it->second;
    }
  };
  static const std::regex gpuTb(R"(gpu (\d+) tb (\d+))"), gpuOnly(R"(\bgpu (\d+))");
  element(gpuTb, true);
  element(gpuOnly, false);
  return fileName +
         (at ? ":" + std::to_string(at->first) + ":" + std::to_string(at->second) : std::string()) +
         ": error: " + text;
}

Result<Plan> importMscclXml(const std::string &text, const std::string &fileName,
                            const MscclImportOptions &options, MscclAlgoInfo *algoOut) {
  XmlReader reader(text, fileName, "MSCCL-IR");
  Tag tag;
  Plan plan;
  MscclAlgoInfo algo;
  auto readErr = [&]() { return Status::error(reader.error()); };

  // <algo ...>
  XmlReader::Event ev = reader.next(tag);
  if (ev == XmlReader::Event::Error)
    return readErr();
  if (ev == XmlReader::Event::Eof)
    return Status::error(fileName + ": error: the file has no elements (expected <algo> as the "
                                    "root element)");
  if (ev != XmlReader::Event::Start || tag.name != "algo")
    return Status::error(reader.at(tag.line, tag.col) + "expected <algo> as the root element" +
                         (ev == XmlReader::Event::Start ? ", found <" + tag.name + ">" : ""));
  const Tag algoTag = tag;
  Attrs a(algoTag, reader, "<algo>");
  int64_t ngpus = 0, nchunks = 0, nchannels = 0, inplace = 0, outofplace = -1;
  if (Status s = a.integer("ngpus", ngpus, std::nullopt, 1, PlanLimits::maxRanks); !s)
    return s;
  if (Status s = a.integer("nchunksperloop", nchunks, std::nullopt, 1, maxChunks); !s)
    return s;
  if (Status s = a.integer("nchannels", nchannels, 1, 1, PlanLimits::maxChannels); !s)
    return s;
  // Nonzero means true, as the executors read them.
  if (Status s = a.integer("inplace", inplace, 0, 0); !s)
    return s;
  if (Status s = a.integer("outofplace", outofplace, -1, 0); !s)
    return s;
  inplace = inplace != 0;
  if (outofplace > 0)
    outofplace = 1;
  for (const char *k : {"minBytes", "maxBytes"}) {
    int64_t v = 0;
    if (Status s = a.integer(k, v, 0, 0); !s)
      return s;
    (k[1] == 'i' ? algo.minBytes : algo.maxBytes) = uint64_t(v);
  }
  const std::string *coll = a.find("coll");
  if (!coll)
    return a.error("attribute 'coll' is missing");
  algo.collName = *coll;
  std::string collName = *coll;
  if (collName == "reduce_scatter")
    collName = "reducescatter";
  if (collName == "all_reduce")
    collName = "allreduce";
  if (collName == "all_gather")
    collName = "allgather";
  if (collName == "all_to_all")
    collName = "alltoall";
  // A custom collective (msccl-tools' own Collective classes) says nothing
  // of what it computes: the simulation derives its contract.
  const CollectiveInfo *ci =
      collName == "custom" ? &collectiveInfo(CollectiveKind::Custom) : findCollective(collName);
  if (!ci)
    return a.error("coll=\"" + *coll +
                   "\" is not a collective Collc knows (allreduce, allgather, reduce_scatter, "
                   "alltoall, broadcast, reduce, gather, scatter, or custom)");
  if (collectiveInfo(ci->kind).rooted)
    return a.error("coll=\"" + *coll + "\": rooted collectives have no root in MSCCL-IR");
  const bool custom = ci->kind == CollectiveKind::Custom;
  if (custom && inplace == 1) {
    // msccl-tools' base Collective aliases no buffers: its steps name the
    // input and the output as two buffers, and so does the plan.
    algo.warnings.push_back(fileName + ":" + std::to_string(algoTag.line) + ":" +
                            std::to_string(algoTag.col) +
                            ": warning: inplace=\"1\" on a custom collective: its input and "
                            "output are imported as the two buffers its steps name");
    inplace = 0;
  }
  plan.info.collective = ci->kind;
  plan.info.nranks = uint32_t(ngpus);
  plan.info.inplace = inplace == 1;
  plan.info.connectionDepth = options.connectionDepth;
  plan.info.name = a.find("name") ? *a.find("name") : std::string("msccl");
  if (plan.info.name.empty() || plan.info.name.size() > PlanLimits::maxNameBytes)
    return a.error("the name must be 1 to " + std::to_string(PlanLimits::maxNameBytes) + " bytes");
  const std::string proto = a.find("proto") ? *a.find("proto") : std::string("Simple");
  if (proto == "Simple")
    plan.info.protocol = ProtocolKind::Simple;
  else if (proto == "LL")
    plan.info.protocol = ProtocolKind::LL;
  else if (proto == "LL128")
    plan.info.protocol = ProtocolKind::LL128;
  else
    return a.error("proto=\"" + proto + "\" is not Simple, LL or LL128");
  if (inplace == 1 && !hasInPlaceForm(ci->kind))
    return a.error(std::string(ci->name) + " has no in-place form");
  algo.nchannels = uint32_t(nchannels);
  algo.nchunksperloop = uint32_t(nchunks);
  algo.outOfPlace = outofplace < 0 ? inplace == 0 : outofplace == 1;
  plan.ranks.resize(size_t(ngpus));
  std::vector<bool> seen(size_t(ngpus), false);
  // By gpu id, whatever order the file lists the gpus in.
  algo.positions.assign(size_t(ngpus), {});
  if (algoTag.selfClosing)
    return a.error("it has no <gpu> elements");

  // The chunks of the collective's buffers, from the gpus' i/o chunks.
  int64_t inChunks = -1, outChunks = -1;
  auto sizesFrom = [&](int64_t i, int64_t o) -> std::optional<std::string> {
    const int64_t n = ngpus;
    int64_t in = 0, out = 0;
    // A custom collective's gpus may use buffers of different sizes (a
    // pipeline's first stage has no output): the plan's are the largest.
    if (custom) {
      inChunks = std::max(inChunks, i);
      outChunks = std::max(outChunks, o);
      return std::nullopt;
    }
    switch (ci->kind) {
    case CollectiveKind::AllReduce:
      in = out = std::max(i, o);
      break;
    case CollectiveKind::AllGather:
      out = std::max(o, i * n);
      if (out % n)
        return "o_chunks=" + std::to_string(o) + " is not a multiple of ngpus";
      in = out / n;
      break;
    case CollectiveKind::ReduceScatter:
      in = std::max(i, o * n);
      if (in % n)
        return "i_chunks=" + std::to_string(i) + " is not a multiple of ngpus";
      out = in / n;
      break;
    default:
      in = out = std::max(i, o);
      break;
    }
    if (in <= 0 || out <= 0)
      return std::string("the buffers have no chunks");
    if (std::max(in, out) > maxChunks)
      return "the " + std::string(in > out ? "input" : "output") + " holds " +
             std::to_string(std::max(in, out)) + " chunks, more than a plan's limit of " +
             std::to_string(maxChunks);
    if (inChunks < 0) {
      inChunks = in;
      outChunks = out;
    } else if (in != inChunks || out != outChunks) {
      return "i_chunks=" + std::to_string(i) + " o_chunks=" + std::to_string(o) +
             " differ from the other gpus'";
    }
    return std::nullopt;
  };

  for (;;) {
    Status childError = Status::success();
    if (!nextChild(reader, algoTag, "gpu", "<algo>", tag, childError)) {
      if (!childError)
        return childError;
      break;
    }
    const Tag gpuTag = tag;
    Attrs g(gpuTag, reader, "<gpu>");
    int64_t id = 0, ic = 0, oc = 0, sc = 0;
    if (Status s = g.integer("id", id, std::nullopt, 0, ngpus - 1); !s)
      return s;
    if (seen[size_t(id)])
      return g.error("gpu " + std::to_string(id) + " appears twice");
    seen[size_t(id)] = true;
    algo.elementLocations[{uint32_t(id), UINT32_MAX}] = {gpuTag.line, gpuTag.col};
    if (Status s = g.integer("i_chunks", ic, 0, 0, maxChunks); !s)
      return s;
    if (Status s = g.integer("o_chunks", oc, 0, 0, maxChunks); !s)
      return s;
    if (Status s = g.integer("s_chunks", sc, 0, 0, maxChunks); !s)
      return s;
    if (auto bad = sizesFrom(ic, oc))
      return g.error("gpu " + std::to_string(id) + ": " + *bad);
    RankPlan &rp = plan.ranks[size_t(id)];
    rp.scratchChunks = uint32_t(sc);
    std::map<int64_t, Threadblock> tbs;
    // Per threadblock: each step's hasdep and where it is, for the warnings.
    std::map<int64_t, std::vector<std::pair<bool, std::pair<unsigned, unsigned>>>> stepFacts;
    const std::string gpuName = "gpu " + std::to_string(id);
    while (!gpuTag.selfClosing) {
      Status gpuError = Status::success();
      if (!nextChild(reader, gpuTag, "tb", gpuName, tag, gpuError)) {
        if (!gpuError)
          return gpuError;
        break;
      }
      const Tag tbTag = tag;
      Attrs t(tbTag, reader, gpuName + " <tb>");
      int64_t tbId = 0, send = -1, recv = -1, chan = 0;
      if (Status s = t.integer("id", tbId, std::nullopt, 0, PlanLimits::maxThreadblocksPerRank - 1);
          !s)
        return s;
      const std::string tbName = gpuName + " tb " + std::to_string(tbId);
      Attrs tn(tbTag, reader, tbName);
      if (tbs.count(tbId))
        return tn.error("the threadblock id appears twice");
      algo.elementLocations[{uint32_t(id), uint32_t(tbId)}] = {tbTag.line, tbTag.col};
      if (Status s = tn.integer("send", send, -1, -1, ngpus - 1); !s)
        return s;
      if (Status s = tn.integer("recv", recv, -1, -1, ngpus - 1); !s)
        return s;
      if (Status s = tn.integer("chan", chan, 0, 0, PlanLimits::maxChannels - 1); !s)
        return s;
      if (send == id || recv == id)
        return tn.error("a threadblock cannot send to or receive from its own gpu");
      Threadblock &tb = tbs[tbId];
      tb.sendPeer = int32_t(send);
      tb.recvPeer = int32_t(recv);
      tb.channel = uint32_t(chan);
      while (!tbTag.selfClosing) {
        Status tbError = Status::success();
        if (!nextChild(reader, tbTag, "step", tbName, tag, tbError)) {
          if (!tbError)
            return tbError;
          break;
        }
        const Tag stepTag = tag;
        const size_t index = tb.steps.size();
        const std::string stepName = tbName + " step " + std::to_string(index);
        Attrs st(stepTag, reader, stepName);
        if (!stepTag.selfClosing) {
          ev = reader.next(tag);
          if (ev == XmlReader::Event::Error)
            return readErr();
          if (ev != XmlReader::Event::End || tag.name != "step")
            return st.error("<step> holds nothing and must end at once");
        }
        if (tb.steps.size() >= PlanLimits::maxStepsPerThreadblock)
          return st.error("more than " + std::to_string(PlanLimits::maxStepsPerThreadblock) +
                          " steps in a threadblock");
        int64_t s = 0;
        if (Status e = st.integer("s", s, int64_t(index), 0); !e)
          return e;
        if (s != int64_t(index))
          return st.error("s=\"" + std::to_string(s) +
                          "\": steps must be numbered 0, 1, 2, ... in "
                          "order (this is step " +
                          std::to_string(index) + ")");
        const std::string *type = st.find("type");
        if (!type)
          return st.error("attribute 'type' is missing");
        std::optional<Opcode> op = opcodeNamed(*type);
        if (!op)
          return st.error("type=\"" + *type +
                          "\" is not a step type (s, r, rcs, rrc, rrs, rrcs, cpy, re, nop)");
        const OpcodeInfo &oi = opcodeInfo(*op);
        if (oi.send && tb.sendPeer < 0)
          return st.error(std::string("a '") + oi.mnemonic +
                          "' step in a threadblock with no send peer");
        if (oi.recv && tb.recvPeer < 0)
          return st.error(std::string("a '") + oi.mnemonic +
                          "' step in a threadblock with no receive peer");
        Instruction in;
        in.op = *op;
        int64_t srcoff = 0, dstoff = 0, cnt = 0, depid = -1, deps = -1;
        auto buffer = [&](const char *attr, bool used, BufferKind &out) -> Status {
          const std::string *v = st.find(attr);
          if (!used)
            return Status::success();
          if (!v)
            return st.error("attribute '" + std::string(attr) + "' is missing");
          std::optional<BufferKind> b = bufferNamed(*v);
          if (!b)
            return st.error(std::string(attr) + "=\"" + *v + "\" is not i, o or s");
          out = *b;
          return Status::success();
        };
        if (Status e = buffer("srcbuf", oi.readSrc, in.srcBuf); !e)
          return e;
        if (Status e = buffer("dstbuf", oi.writeDst, in.dstBuf); !e)
          return e;
        if (Status e =
                st.integer("srcoff", srcoff, oi.readSrc ? std::nullopt : std::optional<int64_t>(0),
                           oi.readSrc ? 0 : INT64_MIN, maxChunks);
            !e)
          return e;
        if (Status e =
                st.integer("dstoff", dstoff, oi.writeDst ? std::nullopt : std::optional<int64_t>(0),
                           oi.writeDst ? 0 : INT64_MIN, maxChunks);
            !e)
          return e;
        if (Status e = st.integer("cnt", cnt,
                                  *op == Opcode::Nop ? std::optional<int64_t>(0) : std::nullopt,
                                  *op == Opcode::Nop ? INT64_MIN : 1, maxChunks);
            !e)
          return e;
        if (Status e = st.integer("depid", depid, -1, -1, PlanLimits::maxThreadblocksPerRank - 1);
            !e)
          return e;
        if (Status e = st.integer("deps", deps, -1, -1, PlanLimits::maxStepsPerThreadblock - 1); !e)
          return e;
        // As the MSCCL executors' parsers do: an offset within the chunks
        // this gpu declares for the buffer.
        auto declared = [&](const char *attr, BufferKind b, int64_t off) -> Status {
          const int64_t chunks = b == BufferKind::Input ? ic : b == BufferKind::Output ? oc : sc;
          if (off < chunks)
            return Status::success();
          const char *decl = b == BufferKind::Input    ? "i_chunks"
                             : b == BufferKind::Output ? "o_chunks"
                                                       : "s_chunks";
          return st.error(std::string(attr) + "=\"" + std::to_string(off) + "\" is beyond the " +
                          std::to_string(chunks) + " chunks " + gpuName + " declares (" + decl +
                          ")");
        };
        if (oi.readSrc)
          if (Status e = declared("srcoff", in.srcBuf, srcoff); !e)
            return e;
        if (oi.writeDst)
          if (Status e = declared("dstoff", in.dstBuf, dstoff); !e)
            return e;
        if (oi.readSrc)
          in.srcOff = uint32_t(srcoff);
        else
          in.srcBuf = BufferKind::Input;
        if (oi.writeDst)
          in.dstOff = uint32_t(dstoff);
        else
          in.dstBuf = BufferKind::Input;
        in.count = *op == Opcode::Nop ? 0 : uint32_t(cnt);
        int64_t hasdep = 0;
        if (Status e = st.integer("hasdep", hasdep, 0, 0, 1); !e)
          return e;
        stepFacts[tbId].push_back({hasdep == 1 && *op != Opcode::Nop, {stepTag.line, stepTag.col}});
        {
          auto &gpuSteps = algo.stepLocations;
          if (gpuSteps.size() <= size_t(id))
            gpuSteps.resize(size_t(id) + 1);
          if (gpuSteps[size_t(id)].size() <= size_t(tbId))
            gpuSteps[size_t(id)].resize(size_t(tbId) + 1);
          gpuSteps[size_t(id)][size_t(tbId)].emplace_back(stepTag.line, stepTag.col);
        }
        if (depid >= 0) {
          if (deps < 0)
            return st.error("depid=\"" + std::to_string(depid) + "\" without a step in 'deps'");
          if (depid == tbId) {
            // The executors accept a wait on an earlier step of the same
            // threadblock (it has run: nothing to wait for, as long as
            // its progress is published); one on itself or a later step
            // never ends.
            if (deps >= int64_t(index))
              return st.error("deps=\"" + std::to_string(deps) +
                              "\" of its own threadblock: a step cannot wait for itself or a "
                              "later step of its threadblock");
            if (!stepFacts[tbId][size_t(deps)].first)
              algo.warnings.push_back(
                  fileName + ":" + std::to_string(stepTag.line) + ":" +
                  std::to_string(stepTag.col) + ": warning: " + stepName + " depends on step " +
                  std::to_string(deps) +
                  " of its own threadblock, which does not have hasdep=\"1\" (or is a nop): "
                  "the MSCCL executors would not see it finish");
          } else {
            in.depBegin = uint32_t(tb.deps.size());
            in.depCount = 1;
            tb.deps.push_back(Dependency{uint32_t(depid), uint32_t(deps)});
          }
        }
        tb.steps.push_back(in);
      }
    }
    // Threadblocks in the order of their ids, which must be 0, 1, 2, ...
    int64_t expect = 0;
    for (auto &[tbId, tb] : tbs) {
      if (tbId != expect)
        return g.error(gpuName + " has no tb " + std::to_string(expect) +
                       " (threadblock ids must be 0, 1, 2, ...)");
      ++expect;
      rp.threadblocks.push_back(std::move(tb));
    }
    // Dependencies name existing steps.
    for (size_t t = 0; t < rp.threadblocks.size(); ++t)
      for (size_t k = 0; k < rp.threadblocks[t].steps.size(); ++k) {
        const Instruction &in = rp.threadblocks[t].steps[k];
        for (uint32_t d = 0; d < in.depCount; ++d) {
          const Dependency &dep = rp.threadblocks[t].deps[in.depBegin + d];
          if (dep.tb >= rp.threadblocks.size() || dep.step >= rp.threadblocks[dep.tb].steps.size())
            return g.error(gpuName + " tb " + std::to_string(t) + " step " + std::to_string(k) +
                           " depends on tb " + std::to_string(dep.tb) + " step " +
                           std::to_string(dep.step) + ", which does not exist");
          // The executors publish a threadblock's progress only after
          // steps with hasdep="1": a wait on another step lasts until a
          // later such step, or forever.
          const auto &facts = stepFacts[int64_t(t)][k];
          if (!stepFacts[int64_t(dep.tb)][dep.step].first)
            algo.warnings.push_back(
                fileName + ":" + std::to_string(facts.second.first) + ":" +
                std::to_string(facts.second.second) + ": warning: " + gpuName + " tb " +
                std::to_string(t) + " step " + std::to_string(k) + " depends on tb " +
                std::to_string(dep.tb) + " step " + std::to_string(dep.step) +
                ", which does not have hasdep=\"1\" (or is a nop): the MSCCL executors would not "
                "see it finish");
        }
      }
  }
  ev = reader.next(tag);
  if (ev == XmlReader::Event::Error)
    return readErr();
  if (ev != XmlReader::Event::Eof)
    return Status::error(reader.at(tag.line, tag.col) + "content after </algo>");
  for (int64_t r = 0; r < ngpus; ++r)
    if (!seen[size_t(r)])
      return Status::error(reader.at(algoTag.line, algoTag.col) + "<algo> has no <gpu id=\"" +
                           std::to_string(r) + "\"> (ngpus=\"" + std::to_string(ngpus) + "\")");
  if (custom && (inChunks <= 0 || outChunks <= 0))
    return Status::error(reader.at(algoTag.line, algoTag.col) + "no gpu has " +
                         (inChunks <= 0 ? "input" : "output") +
                         " chunks (i_chunks, o_chunks): a custom collective needs both");
  plan.info.inputChunks = uint32_t(inChunks);
  plan.info.outputChunks = uint32_t(outChunks);
  // The executors cut a call into nchunksperloop chunks (of the larger
  // buffer, as allgather, reducescatter and alltoall count): another number
  // moves other bytes there than the chunks this plan checks.
  if (nchunks != std::max(inChunks, outChunks))
    algo.warnings.push_back(fileName + ":" + std::to_string(algoTag.line) + ":" +
                            std::to_string(algoTag.col) + ": warning: nchunksperloop=\"" +
                            std::to_string(nchunks) + "\" is not the " +
                            std::to_string(std::max(inChunks, outChunks)) +
                            " chunks of the larger buffer: the MSCCL executors would cut a call "
                            "into " +
                            std::to_string(nchunks) + " chunks, and move other bytes than Collc");
  // Checked with the file's own steps first (nops too), so that what a
  // problem names is the file's numbering (a dependency cycle, a step out
  // of range), then once more with the nops folded.
  if (Status s = validatePlan(plan); !s)
    return Status::error(mscclProblem(algo, fileName, s.message()));
  for (int64_t r = 0; r < ngpus; ++r)
    foldNops(plan.ranks[size_t(r)], algo.positions[size_t(r)]);
  if (Status s = validatePlan(plan); !s)
    return Status::error(mscclProblem(algo, fileName, s.message(), /*folded=*/true));
  if (algoOut)
    *algoOut = algo;
  return plan;
}

} // namespace coll::compiler

namespace coll::compiler {

const MscclLimits *MscclLimits::named(const std::string &runtime) {
  // MSCCL_MAX_NUM_STEPS, MSCCL_MAX_NUM_THREAD_BLOCKS, MAXCHANNELS,
  // MSCCL_MAX_COUNT (exclusive), the int8 dependency threadblock, the
  // int16 offsets.
  // MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL.
  static const MscclLimits table[] = {
      {"executor", 64, 1024, 32, 71, 127, 32767, 32},
      {"rccl", 64, 64, 128, 71, 63, 32767, 32},
      {"legacy", 256, 216, 32, 71, 127, 32767, 32},
      {"none", UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX},
  };
  for (const MscclLimits &l : table)
    if (runtime == l.runtime)
      return &l;
  return nullptr;
}

Status exportMscclXml(const Plan &plan, const MscclLimits &limits, std::string &out) {
  const PlanInfo &info = plan.info;
  const CollectiveKind kind = info.collective;
  const char *coll = nullptr;
  switch (kind) {
  case CollectiveKind::AllReduce:
    coll = "allreduce";
    break;
  case CollectiveKind::AllGather:
    coll = "allgather";
    break;
  case CollectiveKind::ReduceScatter:
    coll = "reducescatter";
    break;
  case CollectiveKind::AllToAll:
    coll = "alltoall";
    break;
  case CollectiveKind::Custom:
    // What it computes is not written: an import derives it again.
    coll = "custom";
    break;
  default:
    return Status::error("MSCCL-IR has no " + std::string(collectiveName(kind)) +
                         " (it has no root): plan '" + info.name +
                         "' cannot be written as MSCCL-IR");
  }
  if (plan.loadedRank >= 0)
    return Status::error("the plan holds one rank only");
  const uint32_t n = info.nranks;
  // The chunk MSCCL-IR counts in: count * (ngpus for allgather,
  // reducescatter, alltoall) / nchunksperloop elements.
  const uint32_t nchunks = kind == CollectiveKind::AllGather ? info.outputChunks
                           : kind == CollectiveKind::Custom
                               ? std::max(info.inputChunks, info.outputChunks)
                               : info.inputChunks;
  // In place, msccl-tools names one buffer, as the alias makes it: the
  // input for allreduce and reducescatter, the output for allgather.
  uint32_t iChunks = info.inputChunks, oChunks = info.outputChunks;
  if (info.inplace) {
    if (collectiveInfo(kind).inPlace == InPlaceAlias::InputInOutput)
      iChunks = 0;
    else
      oChunks = 0;
  }
  uint32_t nchannels = 1;
  size_t nthreadblocks = 0;
  for (uint32_t r = 0; r < plan.ranks.size(); ++r) {
    const RankPlan &rp = plan.ranks[r];
    nthreadblocks = std::max(nthreadblocks, rp.threadblocks.size());
    std::map<uint32_t, std::pair<uint32_t, uint32_t>> perChannel; // senders, receivers
    for (const Threadblock &tb : rp.threadblocks) {
      nchannels = std::max(nchannels, tb.channel + 1);
      auto &[senders, receivers] = perChannel[tb.channel];
      senders += tb.sendPeer >= 0;
      receivers += tb.recvPeer >= 0;
      if (std::max(senders, receivers) > limits.maxPerChannel)
        return Status::error(
            "rank " + std::to_string(r) + " has more than " + std::to_string(limits.maxPerChannel) +
            " threadblocks that send (or receive) on channel " + std::to_string(tb.channel) + "; " +
            limits.runtime + " runs at most " + std::to_string(limits.maxPerChannel));
    }
  }
  if (nchannels > limits.maxChannels)
    return Status::error("the plan uses " + std::to_string(nchannels) + " channels; " +
                         limits.runtime + " runs at most " + std::to_string(limits.maxChannels));

  std::string xml;
  auto attr = [&](const char *name, const std::string &v) {
    xml += ' ';
    xml += name;
    xml += "=\"";
    for (char c : v) {
      if (c == '&')
        xml += "&amp;";
      else if (c == '<')
        xml += "&lt;";
      else if (c == '>')
        xml += "&gt;";
      else if (c == '"')
        xml += "&quot;";
      else
        xml += c;
    }
    xml += '"';
  };
  auto num = [&](const char *name, int64_t v) { attr(name, std::to_string(v)); };
  xml += "<algo";
  // XML holds neither control characters nor bytes that are not UTF-8: a
  // name with them is written as printablePlanName() spells it.
  attr("name", wellFormedText(info.name) ? info.name : printablePlanName(info.name));
  attr("proto", info.protocol == ProtocolKind::LL      ? "LL"
                : info.protocol == ProtocolKind::LL128 ? "LL128"
                                                       : "Simple");
  num("nchannels", nchannels);
  num("nchunksperloop", nchunks);
  num("ngpus", n);
  attr("coll", coll);
  num("inplace", info.inplace ? 1 : 0);
  num("outofplace", info.inplace ? 0 : 1);
  num("minBytes", 0);
  num("maxBytes", 0);
  num("nthreadblocks", int64_t(nthreadblocks));
  xml += ">\n";
  for (uint32_t r = 0; r < n; ++r) {
    const RankPlan &rp = plan.ranks[r];
    if (rp.threadblocks.size() > limits.maxThreadblocks)
      return Status::error("rank " + std::to_string(r) + " has " +
                           std::to_string(rp.threadblocks.size()) + " threadblocks; " +
                           limits.runtime + " runs at most " +
                           std::to_string(limits.maxThreadblocks) + " per gpu");
    // Each step's position in the file: after a nop for every dependency
    // but its last.
    std::vector<std::vector<uint32_t>> position(rp.threadblocks.size());
    std::vector<std::vector<bool>> waitedFor(rp.threadblocks.size());
    for (size_t t = 0; t < rp.threadblocks.size(); ++t) {
      const Threadblock &tb = rp.threadblocks[t];
      uint32_t at = 0;
      for (const Instruction &in : tb.steps) {
        if (in.op == Opcode::Nop)
          return Status::error("rank " + std::to_string(r) + " tb " + std::to_string(t) +
                               " has a nop step, which MSCCL-IR cannot express alone");
        at += in.depCount > 1 ? in.depCount - 1 : 0;
        position[t].push_back(at++);
      }
      waitedFor[t].assign(tb.steps.size(), false);
    }
    for (const Threadblock &tb : rp.threadblocks)
      for (const Dependency &d : tb.deps)
        waitedFor[d.tb][d.step] = true;
    xml += "  <gpu";
    num("id", r);
    num("i_chunks", iChunks);
    num("o_chunks", oChunks);
    num("s_chunks", rp.scratchChunks);
    xml += ">\n";
    for (size_t t = 0; t < rp.threadblocks.size(); ++t) {
      const Threadblock &tb = rp.threadblocks[t];
      const std::string where = "rank " + std::to_string(r) + " tb " + std::to_string(t);
      const uint32_t total = tb.steps.empty() ? 0 : position[t].back() + 1;
      if (total > limits.maxSteps)
        return Status::error(where + " has " + std::to_string(total) +
                             " steps (nops for extra dependencies included); " + limits.runtime +
                             " runs at most " + std::to_string(limits.maxSteps) +
                             " per threadblock");
      xml += "    <tb";
      num("id", int64_t(t));
      num("send", tb.sendPeer);
      num("recv", tb.recvPeer);
      num("chan", tb.channel);
      xml += ">\n";
      for (size_t k = 0; k < tb.steps.size(); ++k) {
        const Instruction &in = tb.steps[k];
        const OpcodeInfo &oi = opcodeInfo(in.op);
        if (in.count > limits.maxCount)
          return Status::error(where + " step " + std::to_string(k) + " moves " +
                               std::to_string(in.count) + " chunks; " + limits.runtime +
                               " moves at most " + std::to_string(limits.maxCount) + " per step");
        auto [sb, so] = aliasedChunk(info, r, in.srcBuf, in.srcOff);
        auto [db, dof] = aliasedChunk(info, r, in.dstBuf, in.dstOff);
        // Fields a type does not use repeat the ones it does.
        if (!oi.readSrc) {
          sb = db;
          so = dof;
        }
        if (!oi.writeDst) {
          db = sb;
          dof = so;
        }
        if (so + in.count - 1 > limits.maxOffset || dof + in.count - 1 > limits.maxOffset)
          return Status::error(where + " step " + std::to_string(k) + " addresses chunk " +
                               std::to_string(std::max(so, dof) + in.count - 1) + "; " +
                               limits.runtime + " offsets go up to " +
                               std::to_string(limits.maxOffset));
        const char letters[3] = {'i', 'o', 's'};
        for (uint32_t d = 0; d < in.depCount; ++d) {
          const Dependency &dep = tb.deps[in.depBegin + d];
          if (dep.tb > limits.maxDepTb)
            return Status::error(where + " step " + std::to_string(k) + " depends on tb " +
                                 std::to_string(dep.tb) + "; " + limits.runtime +
                                 " stores the threadblock of a dependency in a byte (at most " +
                                 std::to_string(limits.maxDepTb) + ")");
          const bool last = d + 1 == in.depCount;
          xml += "      <step";
          num("s", int64_t(position[t][k]) - int64_t(in.depCount - 1 - d));
          attr("type", last ? oi.mnemonic : "nop");
          attr("srcbuf", std::string(1, letters[unsigned(sb)]));
          num("srcoff", so);
          attr("dstbuf", std::string(1, letters[unsigned(db)]));
          num("dstoff", dof);
          num("cnt", last ? in.count : 0);
          num("depid", dep.tb);
          num("deps", position[dep.tb][dep.step]);
          num("hasdep", last && waitedFor[t][k] ? 1 : 0);
          xml += "/>\n";
        }
        if (in.depCount == 0) {
          xml += "      <step";
          num("s", position[t][k]);
          attr("type", oi.mnemonic);
          attr("srcbuf", std::string(1, letters[unsigned(sb)]));
          num("srcoff", so);
          attr("dstbuf", std::string(1, letters[unsigned(db)]));
          num("dstoff", dof);
          num("cnt", in.count);
          num("depid", -1);
          num("deps", -1);
          num("hasdep", waitedFor[t][k] ? 1 : 0);
          xml += "/>\n";
        }
      }
      xml += "    </tb>\n";
    }
    xml += "  </gpu>\n";
  }
  xml += "</algo>\n";
  out = std::move(xml);
  return Status::success();
}

} // namespace coll::compiler
