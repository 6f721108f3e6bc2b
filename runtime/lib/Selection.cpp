//===- Selection.cpp - Which program runs a call --------------------------===//

#include "coll/Runtime/Selection.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace coll {

bool parseByteSize(const std::string &text, uint64_t &out) {
  if (text.empty() || text[0] < '0' || text[0] > '9')
    return false;
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || errno)
    return false;
  uint64_t mult = 1;
  std::string suffix = end;
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b'))
    suffix.pop_back();
  if (suffix.size() == 2 && (suffix[1] == 'i' || suffix[1] == 'I'))
    suffix.pop_back(); // KiB, MiB, GiB: the same binary multiples.
  if (suffix == "K" || suffix == "k")
    mult = 1ull << 10;
  else if (suffix == "M" || suffix == "m")
    mult = 1ull << 20;
  else if (suffix == "G" || suffix == "g")
    mult = 1ull << 30;
  else if (!suffix.empty())
    return false;
  if (v > UINT64_MAX / mult)
    return false;
  out = v * mult;
  return true;
}

std::string formatByteSize(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  unsigned u = 0;
  while (u < 5 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + " " + units[u];
}

bool SelectionRow::isProgram() const {
  return program.size() >= 5 && program.compare(program.size() - 5, 5, ".coll") == 0;
}

namespace {

bool parseCount(const std::string &text, uint32_t &out) {
  if (text.empty() || text.size() > 9)
    return false;
  uint32_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    v = v * 10 + uint32_t(c - '0');
  }
  out = v;
  return true;
}

/// "N", "A-B", "A-" or "any".
bool parseRanks(const std::string &text, uint32_t &lo, uint32_t &hi) {
  if (text == "any") {
    lo = 1;
    hi = SelectionRow::anyRanks;
    return true;
  }
  size_t dash = text.find('-');
  if (dash == std::string::npos) {
    if (!parseCount(text, lo) || lo == 0)
      return false;
    hi = lo;
    return true;
  }
  if (!parseCount(text.substr(0, dash), lo) || lo == 0)
    return false;
  std::string rest = text.substr(dash + 1);
  if (rest.empty()) {
    hi = SelectionRow::anyRanks;
    return true;
  }
  return parseCount(rest, hi) && hi >= lo;
}

bool validName(const std::string &name) {
  if (name.empty() || !(std::isalpha((unsigned char)name[0]) || name[0] == '_'))
    return false;
  for (char c : name)
    if (!(std::isalnum((unsigned char)c) || c == '_'))
      return false;
  return true;
}

} // namespace

Result<SelectionTable> SelectionTable::parse(const std::string &text, const std::string &name,
                                             const std::string &baseDir) {
  SelectionTable table;
  std::istringstream in(text);
  std::string line;
  unsigned lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (size_t hash = line.find('#'); hash != std::string::npos)
      line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;)
      w.push_back(word);
    if (w.empty())
      continue;
    const std::string where = name + ":" + std::to_string(lineNo);
    auto error = [&](const std::string &what) { return Status::error(where + ": error: " + what); };
    if (w.size() < 4)
      return error("expected 'collective ranks max-bytes program [NAME=VALUE ...]', found " +
                   std::to_string(w.size()) + " word" + (w.size() == 1 ? "" : "s"));
    SelectionRow row;
    row.where = where;
    row.collective = w[0];
    if (!validName(row.collective))
      return error("'" + w[0] + "' is not a collective's name");
    if (!parseRanks(w[1], row.minRanks, row.maxRanks))
      return error("ranks '" + w[1] + "' is not N, A-B, A- or any");
    if (w[2] != "any" && !parseByteSize(w[2], row.maxBytes))
      return error("max-bytes '" + w[2] + "' is not a size (4096, 64K, 16M, 1G) or any");
    row.program = w[3];
    const bool plan =
        row.program.size() >= 4 && row.program.compare(row.program.size() - 4, 4, ".bin") == 0;
    if (!row.isProgram() && !plan)
      return error("program '" + row.program + "' is neither a .coll program nor a .bin plan");
    row.path = row.program[0] == '/' || baseDir.empty() ? row.program : baseDir + "/" + row.program;
    for (size_t i = 4; i < w.size(); ++i) {
      size_t eq = w[i].find('=');
      if (eq == std::string::npos || !validName(w[i].substr(0, eq)) || eq + 1 == w[i].size())
        return error("'" + w[i] + "' is not a parameter NAME=VALUE");
      if (plan)
        return error("parameter '" + w[i] + "' given to a compiled plan");
      row.defines.push_back(w[i]);
    }
    table.theRows.push_back(std::move(row));
  }
  return table;
}

Result<SelectionTable> SelectionTable::load(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot read the selection table " + path);
  std::ostringstream text;
  text << in.rdbuf();
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  return parse(text.str(), path, dir);
}

std::vector<const SelectionRow *> SelectionTable::candidates(const std::string &collective,
                                                             uint32_t nranks) const {
  std::vector<const SelectionRow *> out;
  for (const SelectionRow &row : theRows)
    if (row.collective == collective && row.admits(nranks))
      out.push_back(&row);
  return out;
}

std::vector<std::string> SelectionTable::collectives() const {
  std::vector<std::string> out;
  for (const SelectionRow &row : theRows) {
    bool seen = false;
    for (const std::string &c : out)
      seen |= c == row.collective;
    if (!seen)
      out.push_back(row.collective);
  }
  return out;
}

void SelectionTable::prepend(const SelectionTable &first) {
  theRows.insert(theRows.begin(), first.theRows.begin(), first.theRows.end());
}

size_t SelectionTable::removeRows(const std::string &collective) {
  const size_t before = theRows.size();
  theRows.erase(std::remove_if(theRows.begin(), theRows.end(),
                               [&](const SelectionRow &r) {
                                 return collective.empty() || r.collective == collective;
                               }),
                theRows.end());
  return before - theRows.size();
}

} // namespace coll
