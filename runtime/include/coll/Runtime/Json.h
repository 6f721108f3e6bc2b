//===- Json.h - JSON text ---------------------------------------*- C++ -*-===//
/// \file
/// What the runtime's and the compiler's JSON writers (the chrome trace of a
/// run, the page of a plan) share.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_JSON_H
#define COLL_RUNTIME_JSON_H

#include <cstdio>
#include <string>

namespace coll {

/// \p text as a JSON string literal, quotes included. Control characters
/// and '<' are escaped (so that the literal may sit inside an HTML
/// <script>); other bytes, UTF-8 included, pass as they are.
inline std::string jsonQuoted(const std::string &text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c == '<') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

} // namespace coll

#endif // COLL_RUNTIME_JSON_H
