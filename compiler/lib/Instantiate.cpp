//===- Instantiate.cpp - Unroll a program for one rank count --------------===//
//
// Pass 1: evaluate the algorithm for N ranks and the parameters, producing a
// trace of chunk operations in program order. Every run-time check of the
// language happens here, reported at the expression that failed: a failed
// `require`, ranks and chunk indices out of range, division by zero and
// overflow, hints out of range, and limits on the program's size.
//
//===----------------------------------------------------------------------===//

#include "coll/Compiler/Passes.h"
#include "coll/Lang/ConstEval.h"
#include "coll/Lang/Sema.h"
#include "coll/Runtime/Plan.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <cstdint>
#include <functional>

using namespace coll;
using namespace coll::ast;
using namespace coll::compiler;
using llvm::Twine;

namespace {

/// The chunks a chunk expression names, all of one rank and buffer, in
/// order: one range, or the runs of a strided range.
using Chunks = llvm::SmallVector<SlotRange, 1>;

/// No buffer: hiddenScratch() failed.
constexpr uint16_t NoBuffer = UINT16_MAX;

/// Chunks in all of \p c.
uint64_t chunkCount(const Chunks &c) {
  uint64_t n = 0;
  for (const SlotRange &r : c)
    n += r.count;
  return n;
}

/// A value of the evaluator: an integer or chunks, as Sema typed it.
struct Value {
  int64_t i = 0;
  Chunks c;
};

class Instantiator {
public:
  Instantiator(const Module &module, const AlgorithmDecl &algo, const InstantiateOptions &opts,
               DiagnosticEngine &diag, Trace &trace)
      : module(module), algo(algo), opts(opts), diag(diag), t(trace) {}

  bool run();

private:
  bool fail(llvm::SMRange where, const Twine &msg) {
    if (!failed)
      diag.error(where, msg);
    failed = true;
    return false;
  }
  std::string forN() const { return " for N = " + std::to_string(t.nranks); }

  bool evalInt(const Expr &e, int64_t &out);
  bool evalChunk(const Expr &e, Chunks &out);
  /// evalChunk() for an expression Sema allows one range only (the
  /// conditions of a collective).
  bool evalRange(const Expr &e, SlotRange &out);
  bool evalRef(const ChunkRefExpr &e, Chunks &out);
  bool evalTransfer(const TransferExpr &e, Chunks &out);
  /// Appends \p op to the trace (one chunk at a time with instances).
  void pushOp(ChunkOp op);
  /// The hidden scratch buffer \p name ("$pack", "$unpack"), created on
  /// first use and grown to at least \p chunks per rank; NoBuffer when
  /// that exceeds a limit (reported at \p where).
  uint16_t hiddenScratch(const char *name, uint64_t chunks, llvm::SMRange where);
  bool arith(ArithResult r, const Expr &where, int64_t &out);
  bool exec(const Stmt &s);
  bool execBlock(const BlockStmt &b);
  bool bindCollective();
  bool evalUserCollective(const CollectiveDecl &c);
  bool forEachBinding(const ForClause *clause, size_t binder, const std::function<bool()> &body);
  bool checkHint(const Expr *e, int64_t limit, const char *what, int16_t &out);
  /// Checks that every buffer of every rank together, with \p more chunks
  /// per rank added, stays within opts.maxTotalChunks; \p what names the
  /// buffers the error blames.
  bool checkTotalChunks(llvm::SMRange where, uint64_t more, const Twine &what);
  /// Maps a reference to the physical buffer of an in-place program.
  void alias(SlotRange &r) const;

  const Module &module;
  const AlgorithmDecl &algo;
  const InstantiateOptions &opts;
  DiagnosticEngine &diag;
  Trace &t;
  std::vector<int64_t> params;
  std::vector<int64_t> collParams;
  std::vector<Value> frame;
  /// The arguments of the function call being evaluated.
  const std::vector<int64_t> *funcArgs = nullptr;
  uint64_t iterations = 0;
  uint64_t userCalls = 0; ///< Calls of user functions so far.
  /// evalInt() calls being evaluated: the parser bounds an expression's
  /// depth, calls of functions add their bodies' (each level takes stack).
  uint32_t evalDepth = 0;
  /// "in this call of" notes written for the error, at most maxCallNotes.
  uint32_t callNotes = 0;
  static constexpr uint32_t maxCallNotes = 8;
  uint32_t phase = 0; ///< Fences executed so far.
  bool failed = false;
  uint16_t physical = InputBuffer; ///< In-place: the buffer both names mean.
  llvm::DenseMap<const TransferExpr *, uint32_t> siteIndex;
};

} // namespace

bool Instantiator::arith(ArithResult r, const Expr &where, int64_t &out) {
  switch (r.error) {
  case ArithError::None:
    out = r.value;
    return true;
  case ArithError::Overflow:
    return fail(where.getRange(), "integer overflow" + forN());
  case ArithError::DivByZero:
    return fail(where.getRange(), "division by zero" + forN());
  case ArithError::BadShift:
    return fail(where.getRange(), "shift amount out of range [0, 63]" + forN());
  case ArithError::Domain:
    return fail(where.getRange(), "argument out of the function's domain" + forN());
  }
  return false;
}

bool Instantiator::evalInt(const Expr &e, int64_t &out) {
  if (std::optional<int64_t> c = e.getConstant()) {
    out = *c;
    return true;
  }
  struct Level {
    uint32_t &depth;
    explicit Level(uint32_t &depth) : depth(depth) { ++depth; }
    ~Level() { --depth; }
  } level(evalDepth);
  switch (e.getKind()) {
  case NodeKind::Name: {
    const Decl *d = llvm::cast<NameExpr>(e).decl;
    if (auto *v = llvm::dyn_cast<VarDecl>(d))
      out = v->varKind == VarKind::FuncParam ? (*funcArgs)[v->slot] : frame[v->slot].i;
    else if (auto *p = llvm::dyn_cast<ParamDecl>(d))
      out = params[p->index];
    else if (auto *cp = llvm::dyn_cast<CollParamDecl>(d))
      out = collParams[cp->index];
    else
      out = t.nranks; // NRanksDecl
    return true;
  }
  case NodeKind::Unary: {
    auto &u = llvm::cast<UnaryExpr>(e);
    int64_t v;
    if (!evalInt(*u.operand, v))
      return false;
    return arith(evalUnaryOp(u.op, v), e, out);
  }
  case NodeKind::Binary: {
    auto &b = llvm::cast<BinaryExpr>(e);
    int64_t l, r;
    if (!evalInt(*b.lhs, l))
      return false;
    // && and || evaluate their right side only when needed.
    if (b.op == BinaryOp::And && l == 0) {
      out = 0;
      return true;
    }
    if (b.op == BinaryOp::Or && l != 0) {
      out = 1;
      return true;
    }
    if (!evalInt(*b.rhs, r))
      return false;
    // Division and modulo errors belong to the divisor.
    bool divides = b.op == BinaryOp::Div || b.op == BinaryOp::Mod;
    return arith(evalBinaryOp(b.op, l, r), divides ? *b.rhs : e, out);
  }
  case NodeKind::Cond: {
    auto &c = llvm::cast<CondExpr>(e);
    int64_t v;
    if (!evalInt(*c.cond, v))
      return false;
    return evalInt(v ? *c.thenExpr : *c.elseExpr, out);
  }
  case NodeKind::Call: {
    auto &c = llvm::cast<CallExpr>(e);
    std::vector<int64_t> args(c.args.size());
    for (size_t k = 0; k < args.size(); ++k)
      if (!evalInt(*c.args[k], args[k]))
        return false;
    if (c.fn == IntFunction::DivCeil && args[1] <= 0)
      return fail(c.args[1]->getRange(),
                  "div_ceil by " + Twine(args[1]) + forN() + "; the divisor must be positive");
    ArithResult r = evalIntFunction(c.fn, args);
    if (r.error == ArithError::Domain) {
      std::string msg = intFunctionDomainMessage(c.fn, args, forN());
      if (!msg.empty())
        return fail(e.getRange(), msg);
    }
    return arith(r, e, out);
  }
  case NodeKind::UserCall: {
    auto &c = llvm::cast<UserCallExpr>(e);
    // Functions cannot recurse, but a chain of them can nest deeply (one
    // stack frame per level) and calls can multiply (f(x) = g(x) + g(x)
    // doubles at each level): both are bounded.
    if (evalDepth > opts.maxEvalDepth)
      return fail(c.getRange(), "function calls nest more than " + Twine(opts.maxEvalDepth) +
                                    " expression levels deep" + forN() +
                                    "; that is the compiler's limit");
    if (++userCalls > opts.maxFunctionCalls)
      return fail(c.getRange(), "the program makes more than " + Twine(opts.maxFunctionCalls) +
                                    " function calls" + forN() + "; that is the compiler's limit");
    std::vector<int64_t> args(c.args.size());
    for (size_t k = 0; k < args.size(); ++k)
      if (!evalInt(*c.args[k], args[k]))
        return false;
    // The body sees its own arguments; the frame of local variables stays
    // the caller's, since a function defined in a body reads its variables.
    const std::vector<int64_t> *outer = funcArgs;
    funcArgs = &args;
    bool ok = evalInt(*c.func->body, out);
    funcArgs = outer;
    // A note for each call that led to the error, the innermost first; a
    // few are enough to follow a long chain.
    if (!ok && callNotes < maxCallNotes) {
      ++callNotes;
      diag.note(c.getRange(), "in this call of '" + c.callee + "'");
    }
    return ok;
  }
  default:
    return fail(e.getRange(), "expected an integer");
  }
}

void Instantiator::alias(SlotRange &r) const {
  if (!t.inplace || r.buffer == physical || r.buffer >= FirstScratchBuffer)
    return;
  // The collective's alias: allgather's input[r] is output[r][r*C ..],
  // reducescatter's output[r] is input[r][r*C ..], the others alias index
  // for index.
  r.index += t.inPlaceOffset(r.rank);
  r.buffer = physical;
}

bool Instantiator::evalRef(const ChunkRefExpr &e, Chunks &out) {
  int64_t rank, lo, hi;
  if (!evalInt(*e.rank, rank))
    return false;
  if (rank < 0 || rank >= t.nranks)
    return fail(e.rank->getRange(), "rank " + Twine(rank) + " is out of range" + forN() +
                                        " (ranks are 0 .. " + Twine(t.nranks - 1) + ")");
  uint16_t buffer = e.buffer->bufferKind == BufferKind::Scratch
                        ? uint16_t(FirstScratchBuffer + e.buffer->index)
                        : uint16_t(e.buffer->bufferKind);
  int64_t size = t.bufferChunks(buffer);
  if (!evalInt(*e.lo, lo))
    return false;
  // (An index of INT64_MAX is out of range below; its end must not wrap.)
  hi = lo < INT64_MAX ? lo + 1 : lo;
  if (e.hi && !evalInt(*e.hi, hi))
    return false;
  int64_t step = 0, width = 1;
  if (e.step && !evalInt(*e.step, step))
    return false;
  if (e.width && !evalInt(*e.width, width))
    return false;
  const Expr &where = e.hi ? static_cast<const Expr &>(e) : *e.lo;
  if (lo < 0 || hi > size || lo >= hi) {
    const char *chunks = size == 1 ? " chunk per rank" : " chunks per rank";
    if (e.hi && lo < hi && lo >= 0)
      return fail(where.getRange(), "chunk range " + Twine(lo) + " .. " + Twine(hi) + " exceeds " +
                                        e.bufferName + ", which has " + Twine(size) + chunks +
                                        forN());
    if (e.hi && lo >= hi)
      return fail(where.getRange(), "empty chunk range " + Twine(lo) + " .. " + Twine(hi) + forN());
    return fail(where.getRange(), "chunk index " + Twine(lo) + " is out of range: " + e.bufferName +
                                      " has " + Twine(size) + chunks + forN());
  }
  out.clear();
  if (!e.step) {
    out.push_back(SlotRange{static_cast<uint32_t>(rank), buffer, static_cast<uint32_t>(lo),
                            static_cast<uint32_t>(hi - lo)});
    alias(out.back());
    return true;
  }
  if (step <= 0)
    return fail(e.step->getRange(),
                "chunk range step " + Twine(step) + forN() + " must be positive");
  if (width <= 0 || width > step)
    return fail(e.width->getRange(),
                "chunk range width " + Twine(width) + forN() +
                    (width <= 0 ? " must be positive"
                                : " exceeds its step " + Twine(step) + ": the runs would overlap"));
  // Runs [a, min(a + width, hi)) for a = lo, lo + step, ... below hi; one
  // run when they touch (width == step). Each run may become an operation:
  // more than the operation limit is refused before any is listed.
  const int64_t runs = width == step ? 1 : (hi - lo - 1) / step + 1; // lo < hi: no overflow
  if (uint64_t(runs) > opts.maxOps)
    return fail(e.getRange(), "strided chunk range of " + Twine(runs) + " runs" + forN() +
                                  " is more than the compiler's limit of " + Twine(opts.maxOps) +
                                  " chunk operations");
  for (int64_t a = lo; a < hi; a += step) {
    uint32_t n = uint32_t(std::min(width, hi - a));
    if (!out.empty() && width == step)
      out.back().count += n;
    else
      out.push_back(SlotRange{static_cast<uint32_t>(rank), buffer, static_cast<uint32_t>(a), n});
    if (hi - a <= step)
      break;
  }
  for (SlotRange &r : out)
    alias(r);
  return true;
}

bool Instantiator::checkHint(const Expr *e, int64_t limit, const char *what, int16_t &out) {
  if (!e)
    return true;
  int64_t v;
  if (!evalInt(*e, v))
    return false;
  if (v < 0 || v >= limit)
    return fail(e->getRange(), Twine(what) + " " + Twine(v) + " is out of range [0, " +
                                   Twine(limit - 1) + "]" + forN());
  out = static_cast<int16_t>(v);
  return true;
}

void Instantiator::pushOp(ChunkOp op) {
  op.phase = phase;
  if (t.instances > 1 && op.src.count > 1) {
    // Each instance moves one slice of every chunk, and one instance's
    // slices of consecutive chunks are not contiguous: move them one by one.
    for (uint32_t c = 0; c < op.src.count; ++c) {
      ChunkOp one = op;
      one.src.index += c;
      one.dst.index += c;
      one.src.count = one.dst.count = 1;
      t.ops.push_back(one);
    }
  } else {
    t.ops.push_back(op);
  }
}

uint16_t Instantiator::hiddenScratch(const char *name, uint64_t chunks, llvm::SMRange where) {
  size_t k = 0;
  while (k < t.scratchNames.size() && t.scratchNames[k] != name)
    ++k;
  if (k == t.scratchNames.size()) {
    t.scratchNames.push_back(name);
    t.scratchChunks.push_back(0);
  }
  uint32_t have = t.scratchChunks[k];
  if (chunks > have) {
    if (chunks > opts.maxChunksPerBuffer) {
      fail(where, "a strided transfer of " + Twine(chunks) + " chunks" + forN() +
                      " needs a packing buffer larger than the limit of " +
                      Twine(opts.maxChunksPerBuffer) + " chunks");
      return NoBuffer;
    }
    if (!checkTotalChunks(where, chunks - have,
                          "with the packing buffer of a strided transfer, the buffers"))
      return NoBuffer;
    t.scratchChunks[k] = uint32_t(chunks);
  }
  return uint16_t(FirstScratchBuffer + k);
}

bool Instantiator::evalTransfer(const TransferExpr &e, Chunks &out) {
  ChunkOp op;
  op.kind = llvm::isa<CopyExpr>(e) ? OpKind::Copy : OpKind::Reduce;
  Chunks src, dst;
  if (!evalChunk(*e.src, src) || !evalChunk(*e.dst, dst))
    return false;
  const char *name = op.kind == OpKind::Copy ? "copy" : "reduce";
  const uint64_t total = chunkCount(src);
  if (total != chunkCount(dst))
    return fail(e.getRange(), Twine(name) + " of " + Twine(total) + " chunk" +
                                  (total == 1 ? "" : "s") + " into " + Twine(chunkCount(dst)) +
                                  " chunk" + (chunkCount(dst) == 1 ? "" : "s") + forN());
  // Each side's runs are of one rank and buffer, in increasing order: one
  // merge over both finds any chunk they share.
  if (src[0].rank == dst[0].rank && src[0].buffer == dst[0].buffer)
    for (size_t i = 0, j = 0; i < src.size() && j < dst.size();) {
      const SlotRange &a = src[i], &b = dst[j];
      if (a.index < b.index + b.count && b.index < a.index + a.count)
        return fail(e.getRange(), Twine(name) + " source and destination overlap" + forN());
      if (a.index + a.count <= b.index + b.count)
        ++i;
      else
        ++j;
    }
  if (!checkHint(e.hints.channel.get(), LanguageLimits::maxChannels, "channel", op.channel) ||
      !checkHint(e.hints.sendTb.get(), LanguageLimits::maxThreadblocks,
                 e.hints.tbShared ? "tb" : "sendtb", op.sendTb) ||
      !checkHint(e.hints.recvTb.get(), LanguageLimits::maxThreadblocks, "recvtb", op.recvTb))
    return false;
  if (e.hints.tbShared)
    op.recvTb = op.sendTb;
  // A strided side moves as several operations: at most one per run of
  // either side, plus the packing copies.
  const uint64_t planned = src.size() + dst.size() + 1;
  if (t.ops.size() + planned > opts.maxOps)
    return fail(e.getRange(), "the program performs more than " + Twine(opts.maxOps) +
                                  " chunk operations" + forN() + "; that is the compiler's limit");
  auto [it, inserted] = siteIndex.try_emplace(&e, uint32_t(t.sites.size()));
  if (inserted)
    t.sites.push_back(&e);
  op.site = it->second;
  out = dst;

  // Pairs the chunks of \p from and \p to in order, one operation of
  // \p kind per piece where both are contiguous (and hinted as \p like).
  auto pairUp = [&](const Chunks &from, const Chunks &to, OpKind kind, const ChunkOp &like) {
    size_t i = 0, j = 0;
    uint32_t usedFrom = 0, usedTo = 0;
    while (i < from.size() && j < to.size()) {
      uint32_t n = std::min(from[i].count - usedFrom, to[j].count - usedTo);
      ChunkOp piece = like;
      piece.kind = kind;
      piece.src = SlotRange{from[i].rank, from[i].buffer, from[i].index + usedFrom, n};
      piece.dst = SlotRange{to[j].rank, to[j].buffer, to[j].index + usedTo, n};
      pushOp(piece);
      if ((usedFrom += n) == from[i].count) {
        ++i;
        usedFrom = 0;
      }
      if ((usedTo += n) == to[j].count) {
        ++j;
        usedTo = 0;
      }
    }
  };
  const bool remote = src[0].rank != dst[0].rank;
  if (!remote || (src.size() == 1 && dst.size() == 1)) {
    pairUp(src, dst, op.kind, op);
    return true;
  }
  // Between ranks, a strided side is packed into (or unpacked from) a
  // contiguous range of a hidden scratch buffer on its rank, so that the
  // data crosses as one message.
  ChunkOp local = op;
  local.channel = local.sendTb = local.recvTb = -1;
  Chunks packed = src;
  if (src.size() > 1) {
    uint16_t b = hiddenScratch("$pack", total, e.getRange());
    if (b == NoBuffer)
      return false;
    packed = {SlotRange{src[0].rank, b, 0, uint32_t(total)}};
    pairUp(src, packed, OpKind::Copy, local);
  }
  if (dst.size() == 1) {
    pairUp(packed, dst, op.kind, op);
    return true;
  }
  uint16_t b = hiddenScratch("$unpack", total, e.getRange());
  if (b == NoBuffer)
    return false;
  Chunks arrived = {SlotRange{dst[0].rank, b, 0, uint32_t(total)}};
  pairUp(packed, arrived, OpKind::Copy, op);
  pairUp(arrived, dst, op.kind, local);
  return true;
}

bool Instantiator::evalRange(const Expr &e, SlotRange &out) {
  Chunks c;
  if (!evalChunk(e, c))
    return false;
  out = c.front();
  return true;
}

bool Instantiator::evalChunk(const Expr &e, Chunks &out) {
  switch (e.getKind()) {
  case NodeKind::Name:
    out = frame[llvm::cast<VarDecl>(llvm::cast<NameExpr>(e).decl)->slot].c;
    return true;
  case NodeKind::ChunkRef:
    return evalRef(llvm::cast<ChunkRefExpr>(e), out);
  case NodeKind::Copy:
  case NodeKind::Reduce:
    return evalTransfer(llvm::cast<TransferExpr>(e), out);
  case NodeKind::Cond: {
    auto &c = llvm::cast<CondExpr>(e);
    int64_t v;
    if (!evalInt(*c.cond, v))
      return false;
    return evalChunk(v ? *c.thenExpr : *c.elseExpr, out);
  }
  default:
    return fail(e.getRange(), "expected a chunk reference");
  }
}

bool Instantiator::execBlock(const BlockStmt &b) {
  for (const auto &s : b.body)
    if (!exec(*s))
      return false;
  return true;
}

bool Instantiator::exec(const Stmt &s) {
  switch (s.getKind()) {
  case NodeKind::Block:
    return execBlock(llvm::cast<BlockStmt>(s));
  case NodeKind::Let: {
    auto &l = llvm::cast<LetStmt>(s);
    Value &slot = frame[l.var->slot];
    return l.var->valueKind == ValueKind::Int ? evalInt(*l.value, slot.i)
                                              : evalChunk(*l.value, slot.c);
  }
  case NodeKind::Assign: {
    auto &a = llvm::cast<AssignStmt>(s);
    Value v;
    bool isInt = a.target->valueKind == ValueKind::Int;
    if (!(isInt ? evalInt(*a.value, v.i) : evalChunk(*a.value, v.c)))
      return false;
    frame[a.target->slot] = v;
    return true;
  }
  case NodeKind::Expr: {
    auto &e = llvm::cast<ExprStmt>(s);
    if (e.expr->getValueKind() == ValueKind::Chunk) {
      Chunks ignored;
      return evalChunk(*e.expr, ignored);
    }
    int64_t ignored;
    return evalInt(*e.expr, ignored);
  }
  case NodeKind::For: {
    auto &f = llvm::cast<ForStmt>(s);
    int64_t lo, hi, step = 1;
    if (!evalInt(*f.lo, lo) || !evalInt(*f.hi, hi) || (f.step && !evalInt(*f.step, step)))
      return false;
    if (step == 0)
      return fail(f.step->getRange(), "loop step is zero" + forN());
    for (int64_t v = lo; step > 0 ? v < hi : v > hi;) {
      if (++iterations > opts.maxIterations)
        return fail(f.getRange(), "the program runs more than " + Twine(opts.maxIterations) +
                                      " loop iterations" + forN() +
                                      "; that is the compiler's limit");
      frame[f.var->slot].i = v;
      if (!execBlock(*f.body))
        return false;
      int64_t next;
      if (__builtin_add_overflow(v, step, &next))
        break;
      v = next;
    }
    return true;
  }
  case NodeKind::If: {
    auto &i = llvm::cast<IfStmt>(s);
    int64_t c;
    if (!evalInt(*i.cond, c))
      return false;
    if (c)
      return execBlock(*i.thenBlock);
    return i.elseStmt ? exec(*i.elseStmt) : true;
  }
  case NodeKind::Fence:
    if (phase == UINT32_MAX)
      return fail(s.getRange(),
                  "the program executes more than " + Twine(UINT32_MAX) + " fences" + forN());
    ++phase;
    return true;
  case NodeKind::Require: {
    auto &r = llvm::cast<RequireStmt>(s);
    int64_t c;
    if (!evalInt(*r.cond, c))
      return false;
    if (c)
      return true;
    if (r.message)
      return fail(r.getRange(), "requirement failed" + forN() + ": " + *r.message);
    return fail(r.cond->getRange(), "requirement failed" + forN());
  }
  case NodeKind::Scratch: {
    // Sized where it is declared, so that its size may use earlier `let`s.
    auto &sc = llvm::cast<ScratchStmt>(s);
    int64_t v;
    if (!evalInt(*sc.size, v))
      return false;
    if (v <= 0 || v > int64_t(opts.maxChunksPerBuffer))
      return fail(sc.size->getRange(), "scratch buffer '" + sc.buffer->name + "' size " + Twine(v) +
                                           forN() + " is out of range [1, " +
                                           Twine(opts.maxChunksPerBuffer) + "]");
    if (!checkTotalChunks(sc.size->getRange(), uint64_t(v),
                          "with scratch buffer '" + sc.buffer->name + "', the buffers"))
      return false;
    t.scratchChunks[sc.buffer->index] = uint32_t(v);
    return true;
  }
  default:
    return true;
  }
}

bool Instantiator::forEachBinding(const ForClause *clause, size_t binder,
                                  const std::function<bool()> &body) {
  if (!clause)
    return body();
  if (binder == clause->binders.size()) {
    int64_t c = 1;
    if (clause->cond && !evalInt(*clause->cond, c))
      return false;
    return c ? body() : true;
  }
  const Binder &b = clause->binders[binder];
  int64_t lo, hi;
  if (!evalInt(*b.lo, lo) || !evalInt(*b.hi, hi))
    return false;
  for (int64_t v = lo; v < hi; ++v) {
    if (++iterations > opts.maxIterations)
      return fail(clause->range, "the collective's conditions run more than " +
                                     Twine(opts.maxIterations) + " iterations" + forN());
    frame[b.var->slot].i = v;
    if (!forEachBinding(clause, binder + 1, body))
      return false;
  }
  return true;
}

bool Instantiator::checkTotalChunks(llvm::SMRange where, uint64_t more, const Twine &what) {
  uint64_t perRank = uint64_t(t.inputChunks) + t.outputChunks + more;
  for (uint32_t c : t.scratchChunks)
    perRank += c;
  // Every term is below 2^24 and there are at most 2^16 ranks and a few
  // thousand buffers: no overflow.
  uint64_t total = perRank * t.nranks;
  if (total <= opts.maxTotalChunks)
    return true;
  return fail(where, what + " of all ranks hold " + Twine(total) + " chunks" + forN() +
                         ", more than the compiler's limit of " + Twine(opts.maxTotalChunks) +
                         " (verification keeps about " + Twine(BytesPerChunkState) +
                         " bytes of state per chunk)");
}

bool Instantiator::evalUserCollective(const CollectiveDecl &c) {
  frame.assign(c.numSlots, Value());
  for (const auto &item : c.items) {
    if (auto *bs = llvm::dyn_cast<BufferSizeStmt>(item.get())) {
      int64_t v;
      if (!evalInt(*bs->size, v))
        return false;
      if (v <= 0 || v > int64_t(opts.maxChunksPerBuffer))
        return fail(bs->size->getRange(), Twine(bufferKindName(bs->which)) + " size " + Twine(v) +
                                              forN() + " is out of range [1, " +
                                              Twine(opts.maxChunksPerBuffer) + "]");
      (bs->which == ast::BufferKind::Input ? t.inputChunks : t.outputChunks) = uint32_t(v);
      if (!checkTotalChunks(bs->size->getRange(), 0, "the input and output buffers"))
        return false;
    } else if (auto *r = llvm::dyn_cast<RequireStmt>(item.get())) {
      if (!exec(*r))
        return false;
    } else if (auto *l = llvm::dyn_cast<LetStmt>(item.get())) {
      if (!exec(*l))
        return false;
    }
  }
  // Pre- and post-conditions, now that the sizes are known.
  for (const auto &item : c.items) {
    if (auto *p = llvm::dyn_cast<PreStmt>(item.get())) {
      t.hasUserPre = true;
      bool ok = forEachBinding(p->clause.get(), 0, [&] {
        SlotRange r;
        if (!evalRange(*p->ref, r))
          return false;
        for (uint32_t k = 0; k < r.count; ++k)
          t.userPre.emplace_back(r.rank, r.index + k);
        return true;
      });
      if (!ok)
        return false;
    } else if (auto *p = llvm::dyn_cast<PostStmt>(item.get())) {
      bool ok = forEachBinding(p->clause.get(), 0, [&] {
        SlotRange target;
        if (!evalRange(*p->target, target))
          return false;
        PostFact fact;
        fact.site = p;
        if (auto *all = llvm::dyn_cast<ReduceAllExpr>(p->value.get())) {
          if (target.count != 1)
            return fail(p->target->getRange(), "a reduction post-condition names one output "
                                               "chunk");
          fact.isReduction = true;
          bool inner = forEachBinding(all->clause.get(), 0, [&] {
            SlotRange in;
            if (!evalRange(*all->element, in))
              return false;
            for (uint32_t k = 0; k < in.count; ++k)
              fact.inputs.emplace_back(in.rank, in.index + k);
            return true;
          });
          if (!inner)
            return false;
          if (fact.inputs.empty())
            return fail(all->getRange(), "the reduction reduces no chunks" + forN() +
                                             "; a post-condition's reduction needs at least one");
          fact.rank = target.rank;
          fact.index = target.index;
          t.userPost.push_back(std::move(fact));
          return true;
        }
        SlotRange in;
        if (!evalRange(*p->value, in))
          return false;
        if (in.count != target.count)
          return fail(p->getRange(), "post-condition relates " + Twine(target.count) +
                                         " output chunks to " + Twine(in.count) + " input chunks");
        for (uint32_t k = 0; k < target.count; ++k) {
          PostFact f;
          f.site = p;
          f.rank = target.rank;
          f.index = target.index + k;
          f.inputs.emplace_back(in.rank, in.index + k);
          t.userPost.push_back(std::move(f));
        }
        return true;
      });
      if (!ok)
        return false;
    }
  }
  // Two post-conditions of one output chunk must agree: no algorithm could
  // meet both otherwise. A reduction's operands are a multiset.
  auto valueOf = [](const PostFact &f) {
    std::vector<std::pair<uint32_t, uint32_t>> in = f.inputs;
    if (f.isReduction)
      std::sort(in.begin(), in.end());
    return std::make_pair(f.isReduction && in.size() > 1, in);
  };
  auto describe = [](const PostFact &f) {
    std::string out = f.isReduction && f.inputs.size() > 1 ? "the reduction of " : "";
    for (size_t k = 0; k < f.inputs.size(); ++k)
      out += (k ? " + in[" : "in[") + std::to_string(f.inputs[k].first) + "][" +
             std::to_string(f.inputs[k].second) + "]";
    return out;
  };
  llvm::DenseMap<uint64_t, uint32_t> firstFact;
  for (uint32_t i = 0; i < t.userPost.size(); ++i) {
    const PostFact &f = t.userPost[i];
    auto [it, fresh] = firstFact.try_emplace((uint64_t(f.rank) << 32) | f.index, i);
    if (fresh)
      continue;
    const PostFact &g = t.userPost[it->second];
    if (valueOf(f) == valueOf(g))
      continue;
    fail(f.site->getRange(), "post-conditions contradict" + forN() + ": output[" + Twine(f.rank) +
                                 "][" + Twine(f.index) + "] must hold " + describe(f) +
                                 " here and " + describe(g) +
                                 " by an earlier one; no algorithm can meet both");
    diag.note(g.site->getRange(), "the earlier post-condition");
    return false;
  }
  return true;
}

bool Instantiator::bindCollective() {
  // Collective parameters: arguments or defaults, in declaration order.
  collParams.assign(algo.collParamValues.size(), 0);
  for (size_t k = 0; k < algo.collParamValues.size(); ++k) {
    const Expr *v = algo.collParamValues[k];
    if (!v) {
      collParams[k] = 1; // the built-in default of `chunks`
      continue;
    }
    if (!evalInt(*v, collParams[k]))
      return false;
  }
  auto param = [&](llvm::StringRef name) -> std::optional<int64_t> {
    for (size_t k = 0; k < algo.collParamNames.size(); ++k)
      if (algo.collParamNames[k] == name)
        return collParams[k];
    return std::nullopt;
  };
  auto argRange = [&](llvm::StringRef name) {
    for (const NamedArg &a : algo.collArgs)
      if (a.name == name)
        return a.value->getRange();
    return algo.collectiveRange;
  };
  t.builtin = algo.builtin;
  t.collectiveName = algo.collectiveName;
  if (algo.builtin) {
    int64_t chunks = *param("chunks");
    if (chunks < 1 || chunks > int64_t(opts.maxChunksPerBuffer))
      return fail(argRange("chunks"), "chunks = " + Twine(chunks) + forN() +
                                          " is out of range [1, " + Twine(opts.maxChunksPerBuffer) +
                                          "]");
    t.chunks = uint32_t(chunks);
    if (algo.builtin->rooted) {
      int64_t root = *param("root");
      if (root < 0 || root >= t.nranks)
        return fail(argRange("root"), "root " + Twine(root) + " is out of range" + forN());
      t.root = uint32_t(root);
    }
    uint64_t in = t.chunks * bufferUnits(algo.builtin->kind, /*output=*/false, t.nranks);
    uint64_t out = t.chunks * bufferUnits(algo.builtin->kind, /*output=*/true, t.nranks);
    if (std::max(in, out) > opts.maxChunksPerBuffer)
      return fail(argRange("chunks"), "buffers of " + Twine(std::max(in, out)) +
                                          " chunks per rank" + forN() + " exceed the limit of " +
                                          Twine(opts.maxChunksPerBuffer));
    t.inputChunks = uint32_t(in);
    t.outputChunks = uint32_t(out);
    if (!checkTotalChunks(argRange("chunks"), 0, "the input and output buffers"))
      return false;
  } else {
    // User collective: its parameters' defaults were taken above; its body
    // gives sizes and conditions.
    if (!evalUserCollective(*algo.userCollective))
      return false;
    if (std::optional<int64_t> c = param("chunks"); c && *c >= 1)
      t.chunks = uint32_t(*c);
  }

  bool inplace = algo.inplace;
  if (algo.inplaceExpr) {
    int64_t v;
    if (!evalInt(*algo.inplaceExpr, v))
      return false;
    if (v != 0 && v != 1)
      return fail(algo.inplaceExpr->getRange(),
                  "option 'inplace' is " + Twine(v) + forN() + "; it must be true or false");
    inplace = v == 1;
  }
  if (inplace) {
    if (!algo.builtin)
      return fail(algo.nameRange, "'" + algo.collectiveName + "' has no in-place form");
    t.inplace = true;
    if (!hasInPlaceForm(algo.builtin->kind))
      return fail(algo.nameRange, "'" + algo.collectiveName +
                                      "' has no in-place form; remove "
                                      "'inplace = true'");
    physical = t.inPlaceBuffer();
  }
  return true;
}

bool Instantiator::run() {
  t.algorithm = &algo;
  t.name = algo.name;
  t.protocol = algo.protocol;

  // File parameters, in order: -D overrides, else defaults.
  for (ParamDecl *p : module.params()) {
    auto it = opts.defines.find(p->name);
    int64_t v;
    if (it != opts.defines.end())
      v = it->second;
    else if (!evalInt(*p->defaultValue, v))
      return false;
    params.push_back(v);
  }
  if (!bindCollective())
    return false;

  frame.assign(algo.numSlots, Value());
  if (algo.instances) {
    int64_t k;
    if (!evalInt(*algo.instances, k))
      return false;
    if (k < 1 || k > LanguageLimits::maxInstances)
      return fail(algo.instances->getRange(), "instances " + Twine(k) + forN() +
                                                  " is out of range [1, " +
                                                  Twine(LanguageLimits::maxInstances) + "]");
    t.instances = uint32_t(k);
    // Each instance moves a slice of every chunk: the plan holds k times
    // as many chunks per buffer.
    uint64_t fine = uint64_t(std::max(t.inputChunks, t.outputChunks)) * t.instances;
    if (fine > PlanLimits::maxChunks)
      return fail(algo.instances->getRange(),
                  "instances " + Twine(k) + forN() + " make buffers of " + Twine(fine) +
                      " chunks per rank in the plan, more than its limit of " +
                      Twine(PlanLimits::maxChunks));
  }
  // Scratch buffers are sized when the body reaches their declarations.
  for (const ScratchStmt *s : algo.scratch) {
    t.scratchChunks.push_back(0);
    t.scratchNames.push_back(s->buffer->name);
  }
  return execBlock(*algo.body);
}

std::optional<Trace> compiler::instantiate(const Module &module, const AlgorithmDecl &algorithm,
                                           const InstantiateOptions &opts, DiagnosticEngine &diag) {
  if (opts.nranks < 1 || opts.nranks > opts.maxRanks) {
    diag.errorNoLoc("--nranks " + Twine(opts.nranks) + " is out of range [1, " +
                    Twine(opts.maxRanks) + "]");
    return std::nullopt;
  }
  Trace trace;
  trace.nranks = opts.nranks;
  if (!Instantiator(module, algorithm, opts, diag, trace).run())
    return std::nullopt;
  return trace;
}

void compiler::printSlotRange(const Trace &trace, const SlotRange &r, llvm::raw_ostream &os) {
  os << trace.bufferName(r.buffer) << "[" << r.rank << "][" << r.index;
  if (r.count != 1)
    os << " .. " << r.index + r.count;
  os << "]";
}

void compiler::printTrace(const Trace &trace, llvm::raw_ostream &os) {
  os << "trace " << trace.name << ": " << trace.collectiveName << ", N = " << trace.nranks
     << ", chunks = " << trace.chunks << ", input " << trace.inputChunks << ", output "
     << trace.outputChunks << (trace.inplace ? ", in-place" : "") << ", " << trace.ops.size()
     << " operations\n";
  for (size_t k = 0; k < trace.scratchChunks.size(); ++k)
    os << "  scratch " << trace.scratchNames[k] << "[" << trace.scratchChunks[k] << "]\n";
  for (size_t k = 0; k < trace.ops.size(); ++k) {
    const ChunkOp &op = trace.ops[k];
    os << "  " << k << ": " << (op.kind == OpKind::Copy ? "copy " : "reduce ");
    printSlotRange(trace, op.src, os);
    os << " -> ";
    printSlotRange(trace, op.dst, os);
    if (op.channel >= 0)
      os << " channel " << op.channel;
    if (op.sendTb >= 0)
      os << " sendtb " << op.sendTb;
    if (op.recvTb >= 0)
      os << " recvtb " << op.recvTb;
    if (op.phase > 0)
      os << " phase " << op.phase;
    os << "\n";
  }
}
