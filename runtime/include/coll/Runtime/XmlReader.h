//===- XmlReader.h - A streaming reader of plain XML ------------*- C++ -*-===//
/// \file
/// The XML subset of MSCCL-IR and of NCCL's topology files: elements and
/// attributes, comments, declarations; no text between elements. Every
/// error names its line and column ("file:3:7: error: ...").
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_XMLREADER_H
#define COLL_RUNTIME_XMLREADER_H

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace coll {

/// One start tag, its attributes and where it is.
struct XmlTag {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  bool selfClosing = false;
  unsigned line = 0, col = 0;
};

/// Start and end tags, one at a time.
class XmlReader {
public:
  /// Reads \p text, named \p fileName in errors; \p dialect names the
  /// format in the error for text between elements ("MSCCL-IR").
  XmlReader(const std::string &text, std::string fileName, std::string dialect)
      : text(text), fileName(std::move(fileName)), dialect(std::move(dialect)) {
    // A UTF-8 byte order mark is no text: XML allows one before the root.
    if (text.compare(0, 3, "\xEF\xBB\xBF") == 0)
      pos = 3;
    nulAt = text.find('\0', pos);
  }

  /// Attributes one element may have: the formats read here use a dozen at
  /// most, and the check for repeats compares each with the others.
  static constexpr size_t maxAttributes = 256;

  enum class Event { Start, End, Eof, Error };

  /// The next start tag (in `tag`) or end tag (name in `tag.name`).
  Event next(XmlTag &tag) {
    // XML has no NUL character; one in a value would cut it short.
    if (nulAt != std::string::npos) {
      advanceTo(nulAt);
      nulAt = std::string::npos;
      return fail("a NUL byte (XML has none)");
    }
    for (;;) {
      skipSpace();
      if (pos >= text.size())
        return Event::Eof;
      if (text[pos] != '<') {
        std::string excerpt = text.substr(pos, std::min<size_t>(20, text.size() - pos));
        excerpt = excerpt.substr(0, excerpt.find_first_of("\r\n<"));
        return fail("unexpected text '" + excerpt + "' (" + dialect +
                    " has elements and attributes only)");
      }
      if (startsWith("<!--")) {
        size_t end = text.find("-->", pos + 4);
        if (end == std::string::npos)
          return fail("a comment that does not end");
        advanceTo(end + 3);
        continue;
      }
      if (startsWith("<?")) {
        size_t end = text.find("?>", pos + 2);
        if (end == std::string::npos)
          return fail("a declaration that does not end");
        advanceTo(end + 2);
        continue;
      }
      if (startsWith("<!")) {
        size_t end = text.find('>', pos + 2);
        if (end == std::string::npos)
          return fail("a declaration that does not end");
        advanceTo(end + 1);
        continue;
      }
      tag = XmlTag();
      tag.line = line;
      tag.col = col;
      advance(1);
      bool closing = false;
      if (pos < text.size() && text[pos] == '/') {
        closing = true;
        advance(1);
      }
      tag.name = readName();
      if (tag.name.empty())
        return fail("expected an element name after '<'");
      if (closing) {
        skipSpace();
        if (pos >= text.size() || text[pos] != '>')
          return fail("expected '>' to end </" + tag.name + ">");
        advance(1);
        return Event::End;
      }
      for (;;) {
        skipSpace();
        if (pos >= text.size())
          return fail("<" + tag.name + "> does not end");
        if (text[pos] == '>') {
          advance(1);
          return Event::Start;
        }
        if (startsWith("/>")) {
          advance(2);
          tag.selfClosing = true;
          return Event::Start;
        }
        const unsigned aLine = line, aCol = col;
        std::string name = readName();
        if (name.empty())
          return fail("expected an attribute name in <" + tag.name + ">");
        skipSpace();
        if (pos >= text.size() || text[pos] != '=')
          return failAt(aLine, aCol, "attribute '" + name + "' of <" + tag.name + "> has no value");
        advance(1);
        skipSpace();
        if (pos >= text.size() || (text[pos] != '"' && text[pos] != '\''))
          return failAt(aLine, aCol, "the value of '" + name + "' must be quoted");
        const char quote = text[pos];
        advance(1);
        size_t end = text.find(quote, pos);
        if (end == std::string::npos)
          return failAt(aLine, aCol, "the value of '" + name + "' does not end");
        std::string raw = text.substr(pos, end - pos);
        advanceTo(end + 1);
        std::string value;
        if (!unescape(raw, value))
          return failAt(aLine, aCol, "the value of '" + name + "' has a bad entity: '" + raw + "'");
        if (tag.attrs.size() >= maxAttributes)
          return failAt(aLine, aCol,
                        "<" + tag.name + "> has more than " + std::to_string(maxAttributes) +
                            " attributes");
        for (const auto &a : tag.attrs)
          if (a.first == name)
            return failAt(aLine, aCol,
                          "attribute '" + name + "' given twice in <" + tag.name + ">");
        tag.attrs.emplace_back(std::move(name), std::move(value));
      }
    }
  }

  std::string at(unsigned l, unsigned c) const {
    return fileName + ":" + std::to_string(l) + ":" + std::to_string(c) + ": error: ";
  }
  const std::string &error() const { return err; }

private:
  Event fail(const std::string &msg) { return failAt(line, col, msg); }
  Event failAt(unsigned l, unsigned c, const std::string &msg) {
    err = at(l, c) + msg;
    return Event::Error;
  }
  bool startsWith(const char *s) const { return text.compare(pos, std::strlen(s), s) == 0; }
  void advance(size_t n) { advanceTo(pos + n); }
  void advanceTo(size_t to) {
    for (; pos < to && pos < text.size(); ++pos) {
      // A line ends at LF, CR LF, or a lone CR (as XML reads them).
      const bool lineEnd = text[pos] == '\n' ||
                           (text[pos] == '\r' && (pos + 1 >= text.size() || text[pos + 1] != '\n'));
      if (lineEnd) {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
  }
  void skipSpace() {
    while (pos < text.size() &&
           (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r'))
      advance(1);
  }
  std::string readName() {
    size_t start = pos;
    while (pos < text.size() && (std::isalnum((unsigned char)text[pos]) || text[pos] == '_' ||
                                 text[pos] == '-' || text[pos] == ':' || text[pos] == '.'))
      ++pos, ++col;
    return text.substr(start, pos - start);
  }
  static bool unescape(const std::string &raw, std::string &out) {
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '&') {
        out += raw[i];
        continue;
      }
      size_t semi = raw.find(';', i);
      if (semi == std::string::npos)
        return false;
      std::string ent = raw.substr(i + 1, semi - i - 1);
      if (ent == "lt")
        out += '<';
      else if (ent == "gt")
        out += '>';
      else if (ent == "amp")
        out += '&';
      else if (ent == "quot")
        out += '"';
      else if (ent == "apos")
        out += '\'';
      else
        return false;
      i = semi;
    }
    return true;
  }

  const std::string &text;
  std::string fileName;
  std::string dialect;
  size_t pos = 0;
  unsigned line = 1, col = 1;
  std::string err;
  size_t nulAt = std::string::npos; ///< The first NUL byte, refused at once.
};

} // namespace coll

#endif // COLL_RUNTIME_XMLREADER_H
