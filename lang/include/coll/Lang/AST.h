//===- AST.h - The owned AST of .coll programs ------------------*- C++ -*-===//
/// \file
/// The AST the parser builds and Sema annotates. Every node has a source
/// range; node kinds come from ASTNodes.def. Children are owned through
/// std::unique_ptr; references between nodes (a name to its declaration) are
/// plain pointers set by Sema. LLVM-style RTTI (isa/dyn_cast) works on every
/// node class.
//===----------------------------------------------------------------------===//
#ifndef COLL_LANG_AST_H
#define COLL_LANG_AST_H

#include "coll/Runtime/BufferKind.h"
#include "coll/Runtime/Collective.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Casting.h"
#include "llvm/Support/SMLoc.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace coll::ast {

/// Every node kind, from ASTNodes.def.
enum class NodeKind {
#define COLL_NODE(Name, Class) Name,
#include "coll/Lang/ASTNodes.def"
};

/// The node kind's name as printed by the AST dump ("ForStmt", ...).
llvm::StringRef nodeKindName(NodeKind kind);

/// Base of every AST node.
class Node {
public:
  virtual ~Node() = default;
  NodeKind getKind() const { return kind; }
  llvm::SMRange getRange() const { return range; }
  llvm::SMLoc getLoc() const { return range.Start; }
  void setRange(llvm::SMRange r) { range = r; }

protected:
  Node(NodeKind kind, llvm::SMRange range) : kind(kind), range(range) {}

private:
  NodeKind kind;
  llvm::SMRange range;
};

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

/// What an expression denotes, as Sema determines it.
enum class ValueKind {
  Unknown, ///< Not yet analysed, or erroneous (no further errors about it).
  Int,     ///< A 64-bit integer (conditions are integers too).
  Chunk,   ///< A reference to one chunk or a range of chunks of one rank.
  Buffer,  ///< A buffer name on its own (only valid under an index).
};

/// "an integer", "a chunk reference", ... for diagnostics.
llvm::StringRef valueKindPhrase(ValueKind kind);

class Decl;
class VarDecl;
class BufferDecl;

class Expr : public Node {
public:
  static bool classof(const Node *n) {
    return n->getKind() >= NodeKind::IntLit && n->getKind() <= NodeKind::ReduceAll;
  }
  ValueKind getValueKind() const { return valueKind; }
  void setValueKind(ValueKind k) { valueKind = k; }
  /// The folded value when Sema found the expression constant.
  std::optional<int64_t> getConstant() const { return constant; }
  void setConstant(std::optional<int64_t> v) { constant = v; }
  /// Marks a placeholder for an expression that was already diagnosed.
  void setInvalid() { invalid = true; }
  bool isInvalid() const { return invalid; }

protected:
  using Node::Node;

private:
  ValueKind valueKind = ValueKind::Unknown;
  std::optional<int64_t> constant;
  bool invalid = false;
};
using ExprPtr = std::unique_ptr<Expr>;

class IntLitExpr : public Expr {
public:
  IntLitExpr(llvm::SMRange r, int64_t value) : Expr(NodeKind::IntLit, r), value(value) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::IntLit; }
  int64_t value;
};

class NameExpr : public Expr {
public:
  NameExpr(llvm::SMRange r, std::string name) : Expr(NodeKind::Name, r), name(std::move(name)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Name; }
  std::string name;
  Decl *decl = nullptr; ///< Set by Sema.
};

/// Unary operators.
enum class UnaryOp { Neg, Not, BitNot };
llvm::StringRef unaryOpSpelling(UnaryOp op);

class UnaryExpr : public Expr {
public:
  UnaryExpr(llvm::SMRange r, UnaryOp op, ExprPtr operand)
      : Expr(NodeKind::Unary, r), op(op), operand(std::move(operand)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Unary; }
  UnaryOp op;
  ExprPtr operand;
};

/// Binary operators, in the grammar's precedence groups.
enum class BinaryOp {
  Mul,
  Div,
  Mod,
  Add,
  Sub,
  Shl,
  Shr,
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,
  BitAnd,
  BitXor,
  BitOr,
  And,
  Or
};
llvm::StringRef binaryOpSpelling(BinaryOp op);

class BinaryExpr : public Expr {
public:
  BinaryExpr(llvm::SMRange r, BinaryOp op, llvm::SMRange opRange, ExprPtr lhs, ExprPtr rhs)
      : Expr(NodeKind::Binary, r), op(op), opRange(opRange), lhs(std::move(lhs)),
        rhs(std::move(rhs)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Binary; }
  BinaryOp op;
  llvm::SMRange opRange;
  ExprPtr lhs, rhs;
};

class CondExpr : public Expr {
public:
  CondExpr(llvm::SMRange r, ExprPtr cond, ExprPtr thenExpr, ExprPtr elseExpr)
      : Expr(NodeKind::Cond, r), cond(std::move(cond)), thenExpr(std::move(thenExpr)),
        elseExpr(std::move(elseExpr)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Cond; }
  ExprPtr cond, thenExpr, elseExpr;
};

/// The built-in integer functions, from Builtins.def.
enum class IntFunction {
#define COLL_INT_FUNCTION(Id, Name, MinArgs, MaxArgs) Id,
#include "coll/Lang/Builtins.def"
};
llvm::StringRef intFunctionName(IntFunction f);

class CallExpr : public Expr {
public:
  CallExpr(llvm::SMRange r, IntFunction fn, llvm::SMRange calleeRange, std::vector<ExprPtr> args)
      : Expr(NodeKind::Call, r), fn(fn), calleeRange(calleeRange), args(std::move(args)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Call; }
  IntFunction fn;
  llvm::SMRange calleeRange;
  std::vector<ExprPtr> args;
};

class FuncDecl;

/// A call of a function declared with `def`.
class UserCallExpr : public Expr {
public:
  UserCallExpr(llvm::SMRange r, std::string callee, llvm::SMRange calleeRange,
               std::vector<ExprPtr> args)
      : Expr(NodeKind::UserCall, r), callee(std::move(callee)), calleeRange(calleeRange),
        args(std::move(args)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::UserCall; }
  std::string callee;
  llvm::SMRange calleeRange;
  std::vector<ExprPtr> args;
  const FuncDecl *func = nullptr; ///< Set by Sema.
};

/// `buffer[rank][lo]`, `buffer[rank][lo .. hi]` (half-open), or a strided
/// range `buffer[rank][lo .. hi step s]` (chunks lo, lo + s, ... below hi),
/// optionally `width w` (runs of w chunks every s chunks, the last one cut
/// at hi).
class ChunkRefExpr : public Expr {
public:
  ChunkRefExpr(llvm::SMRange r, std::string bufferName, llvm::SMRange bufferRange, ExprPtr rank,
               ExprPtr lo, ExprPtr hi, ExprPtr step = nullptr, ExprPtr width = nullptr)
      : Expr(NodeKind::ChunkRef, r), bufferName(std::move(bufferName)), bufferRange(bufferRange),
        rank(std::move(rank)), lo(std::move(lo)), hi(std::move(hi)), step(std::move(step)),
        width(std::move(width)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::ChunkRef; }
  std::string bufferName;
  llvm::SMRange bufferRange;
  ExprPtr rank;
  ExprPtr lo;
  ExprPtr hi;                   ///< Null for a single chunk.
  ExprPtr step;                 ///< Null for a contiguous range.
  ExprPtr width;                ///< Null: 1 (only with a step).
  BufferDecl *buffer = nullptr; ///< Set by Sema.
};

/// The optional placement hints of a copy or reduce.
struct TransferHints {
  ExprPtr channel;       ///< `channel:` connection channel.
  ExprPtr sendTb;        ///< `sendtb:` (or `tb:`) threadblock on the sending rank.
  ExprPtr recvTb;        ///< `recvtb:` (or `tb:`) threadblock on the receiving rank.
  bool tbShared = false; ///< Given as `tb:`: sendTb and recvTb are one expression.
};

/// Common base of copy and reduce: move `src` to `dst` (and combine there).
class TransferExpr : public Expr {
public:
  static bool classof(const Node *n) {
    return n->getKind() == NodeKind::Copy || n->getKind() == NodeKind::Reduce;
  }
  ExprPtr src;
  ExprPtr dst;
  TransferHints hints;

protected:
  TransferExpr(NodeKind k, llvm::SMRange r, ExprPtr src, ExprPtr dst)
      : Expr(k, r), src(std::move(src)), dst(std::move(dst)) {}
};

/// `copy(src, to: dst)`: dst := src; evaluates to dst.
class CopyExpr : public TransferExpr {
public:
  CopyExpr(llvm::SMRange r, ExprPtr src, ExprPtr dst)
      : TransferExpr(NodeKind::Copy, r, std::move(src), std::move(dst)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Copy; }
};

/// `reduce(src, into: dst)`: dst := src (op) dst; evaluates to dst.
class ReduceExpr : public TransferExpr {
public:
  ReduceExpr(llvm::SMRange r, ExprPtr src, ExprPtr dst)
      : TransferExpr(NodeKind::Reduce, r, std::move(src), std::move(dst)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Reduce; }
};

/// One `name in lo .. hi` of a for-clause.
struct Binder {
  std::unique_ptr<VarDecl> var;
  ExprPtr lo, hi;
};

/// `for a in x .. y, b in z .. w if cond` after pre/post items and inside
/// `reduce(... for ...)`.
struct ForClause {
  llvm::SMRange range;
  std::vector<Binder> binders;
  ExprPtr cond; ///< May be null.
};

/// `reduce(element for j in lo .. hi [if cond])`: the reduction of a set of
/// input chunks, in post-conditions only.
class ReduceAllExpr : public Expr {
public:
  ReduceAllExpr(llvm::SMRange r, ExprPtr element, std::unique_ptr<ForClause> clause)
      : Expr(NodeKind::ReduceAll, r), element(std::move(element)), clause(std::move(clause)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::ReduceAll; }
  ExprPtr element;
  std::unique_ptr<ForClause> clause;
};

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

class Decl : public Node {
public:
  static bool classof(const Node *n) {
    return n->getKind() >= NodeKind::Var && n->getKind() <= NodeKind::Algorithm;
  }
  std::string name;
  llvm::SMRange nameRange;

protected:
  Decl(NodeKind k, llvm::SMRange r, std::string name, llvm::SMRange nameRange)
      : Node(k, r), name(std::move(name)), nameRange(nameRange) {}
};

/// What introduced a variable.
enum class VarKind {
  Let,
  Loop,
  Binder,
  FuncParam, ///< A parameter of a `def` function; its slot is its position.
};

/// A local variable. Sema numbers the variables of each algorithm or
/// collective into frame slots so evaluation needs no name lookups.
class VarDecl : public Decl {
public:
  VarDecl(llvm::SMRange r, std::string name, llvm::SMRange nameRange, VarKind varKind)
      : Decl(NodeKind::Var, r, std::move(name), nameRange), varKind(varKind) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Var; }
  VarKind varKind;
  ValueKind valueKind = ValueKind::Unknown; ///< Int or Chunk, set by Sema.
  unsigned slot = 0;                        ///< Frame slot, set by Sema.
  bool isMutable() const { return varKind == VarKind::Let; }
};

/// `param name = default;` at file level.
class ParamDecl : public Decl {
public:
  ParamDecl(llvm::SMRange r, std::string name, llvm::SMRange nameRange, ExprPtr defaultValue)
      : Decl(NodeKind::Param, r, std::move(name), nameRange),
        defaultValue(std::move(defaultValue)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Param; }
  ExprPtr defaultValue;
  unsigned index = 0; ///< Position among the file's parameters.
};

/// `def name(a, b) = body;`: a named integer function, at file level or in
/// a body. Its parameters are VarDecls of kind FuncParam, numbered from 0.
class FuncDecl : public Decl {
public:
  FuncDecl(llvm::SMRange r, std::string name, llvm::SMRange nameRange)
      : Decl(NodeKind::Func, r, std::move(name), nameRange) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Func; }
  std::vector<std::unique_ptr<VarDecl>> params;
  ExprPtr body;
};

/// The built-in rank count `N`; one per module, with no source range.
class NRanksDecl : public Decl {
public:
  NRanksDecl() : Decl(NodeKind::NRanks, {}, "N", {}) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::NRanks; }
};

/// A parameter of a collective (`chunks`, `root`, or a user collective's).
class CollParamDecl : public Decl {
public:
  CollParamDecl(llvm::SMRange r, std::string name, llvm::SMRange nameRange, ExprPtr defaultValue)
      : Decl(NodeKind::CollParam, r, std::move(name), nameRange),
        defaultValue(std::move(defaultValue)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::CollParam; }
  ExprPtr defaultValue; ///< Null: the parameter must be given.
  unsigned index = 0;
};

/// Which buffer a chunk reference names (BufferKinds.def).
using coll::BufferKind;
using coll::bufferKindName;

class BufferDecl : public Decl {
public:
  BufferDecl(llvm::SMRange r, std::string name, llvm::SMRange nameRange, BufferKind bufferKind)
      : Decl(NodeKind::Buffer, r, std::move(name), nameRange), bufferKind(bufferKind) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Buffer; }
  BufferKind bufferKind;
  unsigned index = 0; ///< Scratch buffers: position in declaration order.
};

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

class Stmt : public Node {
public:
  static bool classof(const Node *n) {
    return n->getKind() >= NodeKind::Block && n->getKind() <= NodeKind::Post;
  }

protected:
  using Node::Node;
};
using StmtPtr = std::unique_ptr<Stmt>;

class BlockStmt : public Stmt {
public:
  explicit BlockStmt(llvm::SMRange r) : Stmt(NodeKind::Block, r) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Block; }
  std::vector<StmtPtr> body;
};

class LetStmt : public Stmt {
public:
  LetStmt(llvm::SMRange r, std::unique_ptr<VarDecl> var, ExprPtr value)
      : Stmt(NodeKind::Let, r), var(std::move(var)), value(std::move(value)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Let; }
  std::unique_ptr<VarDecl> var;
  ExprPtr value;
};

class AssignStmt : public Stmt {
public:
  AssignStmt(llvm::SMRange r, std::string name, llvm::SMRange nameRange, ExprPtr value)
      : Stmt(NodeKind::Assign, r), name(std::move(name)), nameRange(nameRange),
        value(std::move(value)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Assign; }
  std::string name;
  llvm::SMRange nameRange;
  ExprPtr value;
  VarDecl *target = nullptr; ///< Set by Sema.
};

class ExprStmt : public Stmt {
public:
  ExprStmt(llvm::SMRange r, ExprPtr expr) : Stmt(NodeKind::Expr, r), expr(std::move(expr)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Expr; }
  ExprPtr expr;
};

class ForStmt : public Stmt {
public:
  ForStmt(llvm::SMRange r, std::unique_ptr<VarDecl> var, ExprPtr lo, ExprPtr hi, ExprPtr step,
          std::unique_ptr<BlockStmt> body)
      : Stmt(NodeKind::For, r), var(std::move(var)), lo(std::move(lo)), hi(std::move(hi)),
        step(std::move(step)), body(std::move(body)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::For; }
  std::unique_ptr<VarDecl> var;
  ExprPtr lo, hi;
  ExprPtr step; ///< Null: step 1.
  std::unique_ptr<BlockStmt> body;
};

class IfStmt : public Stmt {
public:
  IfStmt(llvm::SMRange r, ExprPtr cond, std::unique_ptr<BlockStmt> thenBlock, StmtPtr elseStmt)
      : Stmt(NodeKind::If, r), cond(std::move(cond)), thenBlock(std::move(thenBlock)),
        elseStmt(std::move(elseStmt)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::If; }
  ExprPtr cond;
  std::unique_ptr<BlockStmt> thenBlock;
  StmtPtr elseStmt; ///< A BlockStmt, an IfStmt (else if) or null.
};

class RequireStmt : public Stmt {
public:
  RequireStmt(llvm::SMRange r, ExprPtr cond, std::optional<std::string> message)
      : Stmt(NodeKind::Require, r), cond(std::move(cond)), message(std::move(message)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Require; }
  ExprPtr cond;
  std::optional<std::string> message; ///< Unescaped.
};

/// `fence;`: on every rank, what the algorithm does before it (in program
/// order) finishes before what comes after it starts.
class FenceStmt : public Stmt {
public:
  explicit FenceStmt(llvm::SMRange r) : Stmt(NodeKind::Fence, r) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Fence; }
};

class ScratchStmt : public Stmt {
public:
  ScratchStmt(llvm::SMRange r, std::unique_ptr<BufferDecl> buffer, ExprPtr size)
      : Stmt(NodeKind::Scratch, r), buffer(std::move(buffer)), size(std::move(size)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Scratch; }
  std::unique_ptr<BufferDecl> buffer;
  ExprPtr size; ///< Chunks per rank.
};

/// `def f(a) = e;` as a statement of a body.
class DefStmt : public Stmt {
public:
  DefStmt(llvm::SMRange r, std::unique_ptr<FuncDecl> func)
      : Stmt(NodeKind::Def, r), func(std::move(func)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Def; }
  std::unique_ptr<FuncDecl> func;
};

/// `input[size];` or `output[size];` inside a collective.
class BufferSizeStmt : public Stmt {
public:
  BufferSizeStmt(llvm::SMRange r, BufferKind which, ExprPtr size)
      : Stmt(NodeKind::BufferSize, r), which(which), size(std::move(size)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::BufferSize; }
  BufferKind which;
  ExprPtr size;
};

/// `pre input[r][i] for ...;`: these input chunks hold data at the start.
class PreStmt : public Stmt {
public:
  PreStmt(llvm::SMRange r, ExprPtr ref, std::unique_ptr<ForClause> clause)
      : Stmt(NodeKind::Pre, r), ref(std::move(ref)), clause(std::move(clause)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Pre; }
  ExprPtr ref;
  std::unique_ptr<ForClause> clause; ///< May be null.
};

/// `post output[..][..] == value for ...;`: what the output must hold.
class PostStmt : public Stmt {
public:
  PostStmt(llvm::SMRange r, ExprPtr target, ExprPtr value, std::unique_ptr<ForClause> clause)
      : Stmt(NodeKind::Post, r), target(std::move(target)), value(std::move(value)),
        clause(std::move(clause)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Post; }
  ExprPtr target;
  ExprPtr value;                     ///< A ChunkRefExpr into input, or a ReduceAllExpr.
  std::unique_ptr<ForClause> clause; ///< May be null.
};

//===----------------------------------------------------------------------===//
// Top-level declarations
//===----------------------------------------------------------------------===//

/// `collective name(params) { input[..]; output[..]; pre ...; post ...; }`
class CollectiveDecl : public Decl {
public:
  CollectiveDecl(llvm::SMRange r, std::string name, llvm::SMRange nameRange)
      : Decl(NodeKind::Collective, r, std::move(name), nameRange) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Collective; }
  std::vector<std::unique_ptr<CollParamDecl>> params;
  std::vector<StmtPtr> items; ///< BufferSize, Pre, Post, Require and Let statements.
  BufferDecl input{{}, bufferKindName(BufferKind::Input), {}, BufferKind::Input};
  BufferDecl output{{}, bufferKindName(BufferKind::Output), {}, BufferKind::Output};
  /// The builder dropped a malformed item (already diagnosed).
  bool hasMalformedItems = false;
  // Set by Sema:
  BufferSizeStmt *inputSize = nullptr;
  BufferSizeStmt *outputSize = nullptr;
  unsigned numSlots = 0; ///< Frame slots for its variables.
};

/// `name = value` in an `implements` argument list or a `with` clause.
struct NamedArg {
  std::string name;
  llvm::SMRange nameRange;
  ExprPtr value;
};

/// Wire protocols (docs/plan-format.md).
enum class Protocol { Simple, LL, LL128 };
llvm::StringRef protocolName(Protocol p);

/// `algorithm name implements coll(args) with options { body }`
class AlgorithmDecl : public Decl {
public:
  AlgorithmDecl(llvm::SMRange r, std::string name, llvm::SMRange nameRange)
      : Decl(NodeKind::Algorithm, r, std::move(name), nameRange) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Algorithm; }
  std::string collectiveName;
  llvm::SMRange collectiveRange;
  std::vector<NamedArg> collArgs;
  std::vector<NamedArg> options;
  std::unique_ptr<BlockStmt> body;
  BufferDecl input{{}, bufferKindName(BufferKind::Input), {}, BufferKind::Input};
  BufferDecl output{{}, bufferKindName(BufferKind::Output), {}, BufferKind::Output};

  // Set by Sema:
  const CollectiveInfo *builtin = nullptr;  ///< The standard collective, or
  CollectiveDecl *userCollective = nullptr; ///< the user-declared one.
  /// The value of every collective parameter in declaration order (an
  /// argument's expression or the parameter's default).
  std::vector<const Expr *> collParamValues;
  std::vector<std::string> collParamNames;
  /// A built-in collective's parameters (`root`, `chunks`) as the body sees
  /// them; a user collective's are its own CollParamDecls.
  std::vector<std::unique_ptr<CollParamDecl>> builtinParams;
  const Expr *nranksDefault = nullptr; ///< `with nranks = ...`
  const Expr *instances = nullptr;     ///< `with instances = ...`
  Protocol protocol = Protocol::Simple;
  /// `with inplace = true`: `input` and `output` name the same memory, as the
  /// collective's in-place alias defines (docs/language.md, in-place programs).
  bool inplace = false;
  /// `with inplace = expr` whose value is known only at instantiation (then
  /// `inplace` is false until the instantiation evaluates it).
  const Expr *inplaceExpr = nullptr;
  std::vector<ScratchStmt *> scratch; ///< In declaration order.
  unsigned numSlots = 0;              ///< Frame slots for its variables.
};

/// A whole source file.
class Module {
public:
  std::string fileName;
  std::vector<std::unique_ptr<Decl>> decls; ///< In source order.
  NRanksDecl nranks;

  /// The file's parameters, functions, collectives and algorithms, in source
  /// order.
  std::vector<ParamDecl *> params() const;
  std::vector<FuncDecl *> functions() const;
  std::vector<CollectiveDecl *> collectives() const;
  std::vector<AlgorithmDecl *> algorithms() const;
};

} // namespace coll::ast

#endif // COLL_LANG_AST_H
