//===- Parser.cpp - The parser driver -------------------------------------===//
//
// Source bytes -> checked tokens -> ANTLR parse tree -> AST.
//
// ANTLR's lexer and parser never see a character or token they would have to
// complain about in their own words: the lexer has a catch-all BAD_CHAR rule
// whose tokens this driver reports and drops, and the parser's error strategy
// below phrases syntax errors the way a compiler does ("expected ';' after
// expression") and reports them through the DiagnosticEngine.
//
//===----------------------------------------------------------------------===//

#include "coll/Lang/Parser.h"

#include "CollLexer.h"
#include "ParserImpl.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <antlr4-runtime.h>
#include <set>

using namespace coll;
using namespace collgrammar;
using detail::SourceMap;

namespace {

/// Whether the token literal \p lit (quoted, as ANTLR spells it) is a
/// contextual keyword: one the grammar also accepts as a name (Coll.g4,
/// `ident`).
bool isContextualKeyword(const std::string &lit) {
  return lit == "'step'" || lit == "'width'" || lit == "'fence'" || lit == "'pre'" ||
         lit == "'post'" || lit == "'with'" || lit == "'implements'" || lit == "'def'";
}

/// An input stream holding one code point per source byte, so ANTLR's
/// character indices are byte offsets and no UTF-8 decoding can fail on
/// binary input. Non-ASCII bytes (0x80-0xFF) reach the lexer as code points
/// it accepts only inside comments and strings.
class ByteInputStream : public antlr4::ANTLRInputStream {
public:
  ByteInputStream(llvm::StringRef bytes, const std::string &sourceName) {
    _data.reserve(bytes.size());
    for (char c : bytes)
      _data.push_back(static_cast<char32_t>(static_cast<unsigned char>(c)));
    p = 0;
    name = sourceName;
  }
};

/// Thrown by the depth guard to abandon a parse that nests too deeply.
struct NestingTooDeep {
  antlr4::Token *at;
};

/// Keeps the parse tree (and so every recursive walk over it) shallow enough
/// for the stack: long operator chains deepen the tree without recursion in
/// ANTLR itself, but our builder and Sema recurse over it.
class DepthGuard : public antlr4::tree::ParseTreeListener {
public:
  DepthGuard(antlr4::Parser &parser, unsigned limit) : parser(parser), limit(limit) {}
  void enterEveryRule(antlr4::ParserRuleContext *) override {
    if (++depth > limit)
      throw NestingTooDeep{parser.getCurrentToken()};
  }
  void exitEveryRule(antlr4::ParserRuleContext *) override { --depth; }
  void visitTerminal(antlr4::tree::TerminalNode *) override {}
  void visitErrorNode(antlr4::tree::ErrorNode *) override {}

private:
  antlr4::Parser &parser;
  unsigned limit;
  unsigned depth = 0;
};

/// Whether \p type is an operator that could continue an expression; such
/// tokens are noise in an "expected ..." list.
bool isContinuationToken(antlr4::dfa::Vocabulary const &vocab, size_t type) {
  static const char *const ops[] = {"'*'",  "'/'",  "'%'",  "'+'",  "'-'",  "'<<'", "'>>'", "'<'",
                                    "'<='", "'>'",  "'>='", "'=='", "'!='", "'&'",  "'^'",  "'|'",
                                    "'&&'", "'||'", "'?'",  "'..'", "'['",  "'('",  "','"};
  std::string name = vocab.getLiteralName(type);
  for (const char *op : ops)
    if (name == op)
      return true;
  return false;
}

/// Syntax errors in a compiler's words, reported to the DiagnosticEngine.
class ErrorStrategy : public antlr4::DefaultErrorStrategy {
public:
  ErrorStrategy(DiagnosticEngine &diag, const SourceMap &map) : diag(diag), map(map) {}

  unsigned errors = 0;
  /// Lines that already have a lexical error: syntax errors there are most
  /// likely its echo and are not reported.
  std::set<unsigned> lexicalErrorLines;
  /// An unterminated comment swallowed the rest of the file.
  bool truncated = false;

protected:
  void reportNoViableAlternative(antlr4::Parser *parser,
                                 const antlr4::NoViableAltException &e) override {
    report(parser, e.getOffendingToken(), e.getExpectedTokens(), /*missing=*/false);
  }

  void reportInputMismatch(antlr4::Parser *parser,
                           const antlr4::InputMismatchException &e) override {
    report(parser, e.getOffendingToken(), e.getExpectedTokens(), /*missing=*/false);
  }

  void reportFailedPredicate(antlr4::Parser *parser,
                             const antlr4::FailedPredicateException &e) override {
    report(parser, e.getOffendingToken(), getExpectedTokens(parser), /*missing=*/false);
  }

  void reportUnwantedToken(antlr4::Parser *parser) override {
    if (inErrorRecoveryMode(parser))
      return;
    beginErrorCondition(parser);
    antlr4::Token *tok = parser->getCurrentToken();
    ++errors;
    if (suppressed(tok))
      return;
    if (tok->getType() == antlr4::Token::EOF) {
      std::string closer = closerAtEof(parser, getExpectedTokens(parser));
      diag.error(map.loc(tok->getStartIndex()), closer.empty()
                                                    ? "unexpected end of file"
                                                    : "expected " + closer + " at end of file");
      if (!closer.empty())
        noteOpener(parser, tok, closer);
      return;
    }
    std::string expected = describeExpected(parser, getExpectedTokens(parser));
    if (isCloser(expected)) {
      diag.error(map.range(tok), "expected " + expected);
      noteOpener(parser, tok, expected);
      return;
    }
    diag.error(map.range(tok), "unexpected " + describeToken(parser, tok) +
                                   (expected.empty() ? "" : "; expected " + expected));
  }

  void reportMissingToken(antlr4::Parser *parser) override {
    if (inErrorRecoveryMode(parser))
      return;
    beginErrorCondition(parser);
    antlr4::Token *prev = parser->getTokenStream()->LT(-1);
    if (prev && lexicalErrorLines.count(prev->getLine())) {
      ++errors;
      return;
    }
    report(parser, parser->getCurrentToken(), getExpectedTokens(parser), /*missing=*/true);
  }

private:
  bool suppressed(antlr4::Token *tok) {
    if (tok->getType() == antlr4::Token::EOF && truncated)
      return true;
    return lexicalErrorLines.count(tok->getLine()) != 0;
  }

  /// At the end of the file, the bracket the parser still waits for, if any:
  /// an unclosed block matters more than what else could have come.
  std::string closerAtEof(antlr4::Parser *parser, const antlr4::misc::IntervalSet &set) {
    for (size_t t : set.toList()) {
      std::string lit = parser->getVocabulary().getLiteralName(t);
      if (lit == "'}'" || lit == "')'" || lit == "']'")
        return lit;
    }
    return "";
  }

  static bool isCloser(const std::string &expected) {
    return expected == "')'" || expected == "']'" || expected == "'}'";
  }

  void noteOpener(antlr4::Parser *parser, antlr4::Token *at, const std::string &expected) {
    if (antlr4::Token *open = findOpener(parser, at, expected.substr(1, 1)))
      diag.note(map.range(open), "to match this '" + map.text(open) + "'");
  }

  /// "';'", "identifier 'foo'", "end of file".
  std::string describeToken(antlr4::Parser *parser, antlr4::Token *tok) {
    if (tok->getType() == antlr4::Token::EOF)
      return "end of file";
    std::string text = map.text(tok).str();
    if (tok->getType() == CollParser::ID)
      return "identifier '" + text + "'";
    if (tok->getType() == CollParser::INT)
      return "number '" + text + "'";
    if (tok->getType() == CollParser::STRING)
      return "string";
    std::string lit = parser->getVocabulary().getLiteralName(tok->getType());
    if (!lit.empty() && std::isalpha(static_cast<unsigned char>(lit[1])))
      return "keyword " + lit;
    return "'" + text + "'";
  }

  /// Names a set of expected tokens as a reader would: "expression",
  /// "statement", "identifier", "';'", "'{' or 'with'".
  std::string describeExpected(antlr4::Parser *parser, const antlr4::misc::IntervalSet &set) {
    const antlr4::dfa::Vocabulary &vocab = parser->getVocabulary();
    auto has = [&](const char *literal) {
      for (size_t t : set.toList())
        if (vocab.getLiteralName(t) == literal)
          return true;
      return false;
    };
    bool exprStart =
        set.contains(size_t(CollParser::INT)) && set.contains(size_t(CollParser::ID)) && has("'('");
    if (has("'let'") && has("'for'") && exprStart)
      return "statement";
    if (has("'param'") && has("'algorithm'"))
      return "'param', 'collective' or 'algorithm' declaration";
    if (has("'require'") && has("'post'") && !exprStart)
      return "'input', 'output', 'pre', 'post', 'require' or 'let'";
    if (exprStart)
      return "expression";

    std::vector<std::string> names;
    bool identifier = false;
    for (size_t t : set.toList()) {
      if (t == CollParser::ID) {
        identifier = true;
        continue;
      }
      std::string lit = vocab.getLiteralName(t);
      if (t == antlr4::Token::EOF)
        names.push_back("end of file");
      else if (!lit.empty())
        names.push_back(lit);
    }
    // Keywords that are also identifiers would only repeat "identifier".
    if (identifier) {
      names.erase(std::remove_if(names.begin(), names.end(), isContextualKeyword), names.end());
      names.insert(names.begin(), "identifier");
    }
    // Drop operators that could continue an expression when something else
    // is possible: "expected ')'" rather than a list of every operator.
    std::vector<std::string> closers;
    for (const std::string &n : names) {
      bool isOp = false;
      for (size_t t : set.toList())
        if (vocab.getLiteralName(t) == n && isContinuationToken(vocab, t))
          isOp = true;
      if (!isOp)
        closers.push_back(n);
    }
    if (!closers.empty())
      names = closers;
    if (names.empty())
      return "";
    if (names.size() > 4)
      names.resize(4);
    std::string out = names[0];
    for (size_t i = 1; i < names.size(); ++i)
      out += (i + 1 == names.size() ? " or " : ", ") + names[i];
    return out;
  }

  /// The construct a missing ';' ends, for "expected ';' after ...".
  static const char *constructBefore(antlr4::ParserRuleContext *ctx) {
    for (; ctx; ctx = dynamic_cast<antlr4::ParserRuleContext *>(ctx->parent)) {
      switch (ctx->getRuleIndex()) {
      case CollParser::RuleLetStmt:
      case CollParser::RuleAssignStmt:
      case CollParser::RuleExprStmt:
        return "expression";
      case CollParser::RuleRequireStmt:
        return "'require'";
      case CollParser::RuleScratchDecl:
        return "scratch declaration";
      case CollParser::RuleParamDecl:
        return "parameter declaration";
      case CollParser::RuleFuncDecl:
        return "function definition";
      case CollParser::RuleCollectiveItem:
        return "collective item";
      default:
        break;
      }
    }
    return nullptr;
  }

  /// The opening bracket that \p closer would close, scanning back from the
  /// token before \p at.
  antlr4::Token *findOpener(antlr4::Parser *parser, antlr4::Token *at, const std::string &closer) {
    std::string opener = closer == ")" ? "(" : closer == "]" ? "[" : "{";
    auto *stream = dynamic_cast<antlr4::BufferedTokenStream *>(parser->getTokenStream());
    int depth = 0;
    for (ssize_t i = static_cast<ssize_t>(at->getTokenIndex()) - 1; i >= 0; --i) {
      antlr4::Token *t = stream->get(static_cast<size_t>(i));
      std::string text = t->getType() == antlr4::Token::EOF ? "" : map.text(t).str();
      if (text == closer)
        ++depth;
      else if (text == opener && depth-- == 0)
        return t;
    }
    return nullptr;
  }

  void report(antlr4::Parser *parser, antlr4::Token *offending,
              const antlr4::misc::IntervalSet &expectedSet, bool missing) {
    ++errors;
    if (suppressed(offending))
      return;
    std::string expected = describeExpected(parser, expectedSet);
    if (offending->getType() == antlr4::Token::EOF) {
      std::string closer = closerAtEof(parser, expectedSet);
      if (!closer.empty())
        expected = closer;
    }
    antlr4::Token *prev = parser->getTokenStream()->LT(-1);
    bool single = expected.size() == 3 && expected[0] == '\'';

    std::string msg = expected.empty() ? "syntax error" : "expected " + expected;
    llvm::SMLoc loc = map.loc(offending->getStartIndex());
    // `fence` is a name too, so a fence without its ';' reads as neither a
    // fence statement nor an expression: say what is missing, where.
    if (expected == "statement" && offending->getTokenIndex() > 0) {
      auto *stream = dynamic_cast<antlr4::BufferedTokenStream *>(parser->getTokenStream());
      antlr4::Token *before = stream ? stream->get(offending->getTokenIndex() - 1) : nullptr;
      if (before && before->getType() != antlr4::Token::EOF && map.text(before) == "fence") {
        diag.error(map.after(before), "expected ';' after 'fence'");
        return;
      }
    }
    if (single && expected == "';'") {
      // A missing ';' belongs right after the construct it ends.
      if (const char *what = constructBefore(parser->getContext()))
        msg += std::string(" after ") + what;
      if (prev)
        loc = map.after(prev);
    } else if (missing && prev) {
      loc = map.after(prev);
    } else if (!missing && offending->getType() != antlr4::Token::EOF && !single &&
               expected != "statement") {
      msg += ", found " + describeToken(parser, offending);
    }
    if (offending->getType() == antlr4::Token::EOF && !single && !missing)
      msg += " at end of file";

    if (offending->getType() == antlr4::Token::EOF ||
        loc.getPointer() != map.loc(offending->getStartIndex()).getPointer())
      diag.error(loc, msg);
    else
      diag.error(map.range(offending), msg);

    if (isCloser(expected))
      noteOpener(parser, offending, expected);
    if (offending->getType() == CollParser::ID || offending->getType() == antlr4::Token::EOF)
      return;
    // A keyword where a name was expected.
    std::string lit = parser->getVocabulary().getLiteralName(offending->getType());
    if (expectedSet.contains(size_t(CollParser::ID)) && lit.size() > 2 &&
        std::isalpha(static_cast<unsigned char>(lit[1])) && !isContextualKeyword(lit))
      diag.note(map.range(offending), lit + " is a keyword and cannot be used as a name");
  }

  DiagnosticEngine &diag;
  const SourceMap &map;
};

/// What the token check found beyond its diagnostics.
struct TokenCheck {
  std::vector<std::unique_ptr<antlr4::Token>> tokens; ///< What the parser sees.
  std::set<unsigned> errorLines;                      ///< Lines with lexical errors.
  bool truncated = false;                             ///< An unterminated comment.
};

/// Reports characters and tokens the lexer could not make sense of, and
/// returns the tokens the parser should see. A run of non-ASCII bytes
/// becomes (part of) an identifier, so `let caf\u00e9 = 1;` gives one error,
/// not a cascade; other bad characters are dropped.
TokenCheck checkTokens(std::vector<std::unique_ptr<antlr4::Token>> all, const SourceMap &map,
                       llvm::StringRef source, DiagnosticEngine &diag) {
  TokenCheck out;
  auto adjacent = [](const antlr4::Token *a, const antlr4::Token *b) {
    return a->getStopIndex() + 1 == b->getStartIndex();
  };
  for (size_t i = 0; i < all.size(); ++i) {
    antlr4::Token *tok = all[i].get();
    size_t type = tok->getType();
    if (type == CollLexer::BAD_CHAR) {
      // One diagnostic per run of adjacent bad characters of one sort.
      unsigned char c = static_cast<unsigned char>(source[tok->getStartIndex()]);
      bool nonAscii = c >= 0x80;
      size_t j = i;
      while (j + 1 < all.size() && all[j + 1]->getType() == CollLexer::BAD_CHAR &&
             adjacent(all[j].get(), all[j + 1].get()) &&
             (static_cast<unsigned char>(source[all[j + 1]->getStartIndex()]) >= 0x80) == nonAscii)
        ++j;
      size_t begin = tok->getStartIndex(), end = all[j]->getStopIndex() + 1;
      llvm::SMRange r(map.loc(begin), map.loc(end));
      out.errorLines.insert(tok->getLine());
      if (!nonAscii) {
        if (std::isprint(c))
          diag.error(r, "invalid character '" + llvm::Twine(static_cast<char>(c)) + "'");
        else
          diag.error(r, "invalid character '\\x" + llvm::Twine("0123456789ABCDEF"[c >> 4]) +
                            llvm::Twine("0123456789ABCDEF"[c & 15]) + "'");
        i = j;
      } else {
        // Merge with identifier characters on either side into one ID.
        bool prevIdent = !out.tokens.empty() && out.tokens.back()->getType() == CollLexer::ID &&
                         adjacent(out.tokens.back().get(), tok);
        size_t k = j;
        while (k + 1 < all.size() && adjacent(all[k].get(), all[k + 1].get()) &&
               (all[k + 1]->getType() == CollLexer::ID ||
                (all[k + 1]->getType() == CollLexer::BAD_CHAR &&
                 static_cast<unsigned char>(source[all[k + 1]->getStartIndex()]) >= 0x80)))
          ++k;
        bool inIdent = prevIdent || k > j;
        diag.error(r, inIdent ? "non-ASCII character in identifier; identifiers are ASCII "
                                "letters, digits and '_'"
                              : "non-ASCII character outside a comment or string");
        size_t stop = all[k]->getStopIndex();
        if (prevIdent) {
          auto *merged = static_cast<antlr4::CommonToken *>(out.tokens.back().get());
          merged->setStopIndex(stop);
        } else {
          auto *ident = static_cast<antlr4::CommonToken *>(tok);
          ident->setType(CollLexer::ID);
          ident->setStopIndex(stop);
          out.tokens.push_back(std::move(all[i]));
        }
        i = k;
      }
      if (diag.shouldStop())
        break;
      continue;
    }
    if (type == CollLexer::UNTERMINATED_STRING) {
      diag.error(map.loc(tok->getStartIndex()), "missing terminating '\"' character");
      out.errorLines.insert(tok->getLine());
      // Parse on as if the string ended at the end of the line.
      static_cast<antlr4::CommonToken *>(tok)->setType(CollLexer::STRING);
    } else if (type == CollLexer::BLOCK_COMMENT && !map.text(tok).endswith("*/")) {
      diag.error(map.loc(tok->getStartIndex()), "unterminated /* comment");
      out.truncated = true;
      continue;
    } else if (tok->getChannel() != antlr4::Token::DEFAULT_CHANNEL) {
      continue;
    }
    out.tokens.push_back(std::move(all[i]));
  }
  return out;
}

/// Rejects bracket nesting deeper than \p limit before the recursive-descent
/// parser sees it.
bool checkBracketDepth(const std::vector<std::unique_ptr<antlr4::Token>> &tokens,
                       const SourceMap &map, unsigned limit, DiagnosticEngine &diag) {
  unsigned depth = 0;
  for (const auto &tok : tokens) {
    if (tok->getType() == antlr4::Token::EOF)
      break;
    llvm::StringRef text = map.text(tok.get());
    if (text == "(" || text == "[" || text == "{") {
      if (++depth > limit) {
        diag.error(map.range(tok.get()),
                   "bracket nesting level exceeded maximum of " + llvm::Twine(limit));
        return false;
      }
    } else if ((text == ")" || text == "]" || text == "}") && depth > 0) {
      --depth;
    }
  }
  return true;
}

/// The first node deeper than \p limit in \p root, found without recursion.
antlr4::tree::ParseTree *firstTooDeep(antlr4::tree::ParseTree *root, unsigned limit) {
  std::vector<std::pair<antlr4::tree::ParseTree *, unsigned>> stack = {{root, 1}};
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    if (depth > limit)
      return node;
    for (antlr4::tree::ParseTree *child : node->children)
      stack.emplace_back(child, depth + 1);
  }
  return nullptr;
}

} // namespace

std::unique_ptr<ast::Module> coll::parseModule(unsigned bufferId, DiagnosticEngine &diag,
                                               const ParserLimits &limits) {
  const llvm::MemoryBuffer *buffer = diag.getSourceMgr().getMemoryBuffer(bufferId);
  llvm::StringRef source = buffer->getBuffer();
  std::string name = buffer->getBufferIdentifier().str();
  SourceMap map(source.data());

  if (source.size() > limits.maxSourceBytes) {
    diag.errorNoLoc("'" + name + "' is too large: " + llvm::Twine(source.size()) +
                    " bytes; the limit is " + llvm::Twine(limits.maxSourceBytes) + " bytes");
    return nullptr;
  }

  ByteInputStream input(source, name);
  CollLexer lexer(&input);
  lexer.removeErrorListeners();
  // Every token, the end-of-file token included (the parser needs one even
  // for an empty file).
  std::vector<std::unique_ptr<antlr4::Token>> all;
  for (;;) {
    std::unique_ptr<antlr4::Token> tok = lexer.nextToken();
    bool eof = tok->getType() == antlr4::Token::EOF;
    all.push_back(std::move(tok));
    if (eof)
      break;
  }
  TokenCheck checked = checkTokens(std::move(all), map, source, diag);
  if (checked.tokens.empty() || checked.tokens.back()->getType() != antlr4::Token::EOF) {
    // The error limit stopped the check early; nothing more to parse.
    return nullptr;
  }
  if (diag.shouldStop())
    return nullptr;
  if (!checkBracketDepth(checked.tokens, map, limits.maxBracketDepth, diag))
    return nullptr;

  antlr4::ListTokenSource tokenSource(std::move(checked.tokens));
  antlr4::CommonTokenStream stream(&tokenSource);
  CollParser parser(&stream);
  parser.removeErrorListeners();
  auto strategy = std::make_shared<ErrorStrategy>(diag, map);
  strategy->lexicalErrorLines = std::move(checked.errorLines);
  strategy->truncated = checked.truncated;
  parser.setErrorHandler(strategy);
  DepthGuard guard(parser, limits.maxTreeDepth);
  parser.addParseListener(&guard);

  CollParser::ProgramContext *program = nullptr;
  try {
    program = parser.program();
  } catch (const NestingTooDeep &e) {
    diag.error(map.loc(e.at->getStartIndex()), "program nests too deeply (more than " +
                                                   llvm::Twine(limits.maxTreeDepth) +
                                                   " levels); split long expressions with 'let'");
    return nullptr;
  }
  parser.removeParseListeners();
  // Left-recursive operator chains grow the tree without recursion in the
  // parser (and without listener events), so measure the finished tree.
  if (antlr4::tree::ParseTree *deep = firstTooDeep(program, limits.maxTreeDepth)) {
    antlr4::Token *at = program->getStart();
    if (auto *ctx = dynamic_cast<antlr4::ParserRuleContext *>(deep))
      at = ctx->getStart();
    else if (auto *term = dynamic_cast<antlr4::tree::TerminalNode *>(deep))
      at = term->getSymbol();
    diag.error(map.loc(at->getStartIndex()), "program nests too deeply (more than " +
                                                 llvm::Twine(limits.maxTreeDepth) +
                                                 " levels); split long expressions with 'let'");
    return nullptr;
  }
  // Lexical errors were repaired in the token stream; only a syntax error
  // leaves a parse tree the builder cannot trust.
  if (strategy->errors != 0)
    return nullptr;

  auto module = detail::buildModule(*program, map, diag);
  module->fileName = name;
  return module;
}
