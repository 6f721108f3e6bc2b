//===- SemaTest.cpp - Semantic analysis -----------------------------------===//

#include "TestUtil.h"

#include <gtest/gtest.h>

using namespace coll;
using namespace coll::ast;
using coll::test::FrontendRun;

namespace {

std::string wrap(llvm::StringRef body) {
  return ("algorithm x implements allreduce(chunks = N) {\n" + body + "\n}\n").str();
}

TEST(Sema, ResolvesNamesToDeclarationsAndSlots) {
  FrontendRun run(wrap("  for c in 0 .. N {\n"
                       "    let acc = input[c][c];\n"
                       "    acc = reduce(acc, into: input[(c + 1) % N][c]);\n"
                       "  }"));
  ASSERT_TRUE(run.ok()) << run.printed;
  AlgorithmDecl *a = run.module->algorithms()[0];
  EXPECT_EQ(a->numSlots, 2u);
  auto *f = llvm::cast<ForStmt>(a->body->body[0].get());
  EXPECT_EQ(f->var->slot, 0u);
  EXPECT_EQ(f->var->valueKind, ValueKind::Int);
  auto *let = llvm::cast<LetStmt>(f->body->body[0].get());
  EXPECT_EQ(let->var->valueKind, ValueKind::Chunk);
  EXPECT_EQ(let->var->slot, 1u);
  auto *ref = llvm::cast<ChunkRefExpr>(let->value.get());
  EXPECT_EQ(ref->buffer, &a->input);
  EXPECT_EQ(llvm::cast<NameExpr>(ref->rank.get())->decl, f->var.get());
  auto *assign = llvm::cast<AssignStmt>(f->body->body[1].get());
  EXPECT_EQ(assign->target, let->var.get());
  auto *red = llvm::cast<ReduceExpr>(assign->value.get());
  EXPECT_EQ(red->getValueKind(), ValueKind::Chunk);
  auto *n = llvm::cast<NameExpr>(
      llvm::cast<BinaryExpr>(llvm::cast<ChunkRefExpr>(red->dst.get())->rank.get())->rhs.get());
  EXPECT_EQ(n->decl, &run.module->nranks);
}

TEST(Sema, FoldsConstantsWithFlooredSemantics) {
  FrontendRun run(
      wrap("  let a = (0 - 1) % 8;\n  let b = -7 / 2;\n  let c = log2(64) + min(3, 1, 2);\n"
           "  let d = 1 << 40;\n  let e = is_pow2(48) ? 10 : 20;\n  let f = N + 1;"));
  ASSERT_TRUE(run.ok()) << run.printed;
  auto &body = run.module->algorithms()[0]->body->body;
  auto constant = [&](int i) { return llvm::cast<LetStmt>(body[i].get())->value->getConstant(); };
  EXPECT_EQ(constant(0), 7);
  EXPECT_EQ(constant(1), -4);
  EXPECT_EQ(constant(2), 7);
  EXPECT_EQ(constant(3), int64_t(1) << 40);
  EXPECT_EQ(constant(4), 20);
  EXPECT_EQ(constant(5), std::nullopt); // N is known only per instantiation
}

TEST(Sema, ScratchBuffersAndScopes) {
  FrontendRun run(wrap("  scratch tmp[2 * N];\n"
                       "  for r in 0 .. N { copy(input[r][0], to: tmp[(r + 1) % N][1]); }\n"
                       "  for r in 0 .. N { let r2 = r; }"));
  ASSERT_TRUE(run.ok()) << run.printed;
  AlgorithmDecl *a = run.module->algorithms()[0];
  ASSERT_EQ(a->scratch.size(), 1u);
  EXPECT_EQ(a->scratch[0]->buffer->name, "tmp");
}

TEST(Sema, CollectiveArgumentsAndOptions) {
  FrontendRun run("param root = 2;\n"
                  "algorithm b implements broadcast(root = root) with nranks = 4, protocol = LL128,"
                  " instances = 2, inplace = true { }\n");
  ASSERT_TRUE(run.ok()) << run.printed;
  AlgorithmDecl *a = run.module->algorithms()[0];
  ASSERT_TRUE(a->builtin);
  EXPECT_STREQ(a->builtin->name, "broadcast");
  ASSERT_EQ(a->collParamNames.size(), 2u);
  EXPECT_EQ(a->collParamNames[0], "root");
  EXPECT_EQ(a->collParamNames[1], "chunks");
  EXPECT_NE(a->collParamValues[0], nullptr);
  EXPECT_EQ(a->collParamValues[1], nullptr); // the built-in default, 1
  EXPECT_EQ(a->protocol, Protocol::LL128);
  EXPECT_TRUE(a->inplace);
  EXPECT_EQ(a->nranksDefault->getConstant(), 4);
}

TEST(Sema, UserCollective) {
  FrontendRun run(
      "collective shift(chunks = 1) {\n"
      "  input[chunks];\n  output[chunks];\n"
      "  pre input[r][i] for r in 0 .. N, i in 0 .. chunks;\n"
      "  post output[(r + 1) % N][i] == input[r][i] for r in 0 .. N, i in 0 .. chunks;\n"
      "}\n"
      "collective total() { input[1]; output[1];\n"
      "  post output[r][0] == reduce(input[j][0] for j in 0 .. N if j != r)"
      " for r in 0 .. N; }\n"
      "algorithm s implements shift(chunks = 2) {\n"
      "  for r in 0 .. N { copy(input[r][0 .. 2], to: output[(r + 1) % N][0 .. 2]); }\n"
      "}\n");
  ASSERT_TRUE(run.ok()) << run.printed;
  AlgorithmDecl *a = run.module->algorithms()[0];
  ASSERT_TRUE(a->userCollective);
  EXPECT_EQ(a->userCollective->name, "shift");
  EXPECT_NE(a->userCollective->inputSize, nullptr);
}

struct ErrorCase {
  const char *name;
  const char *source;
  const char *error;
  unsigned line;
  unsigned column;
};

void PrintTo(const ErrorCase &c, std::ostream *os) {
  *os << c.name;
}

class SemaErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(SemaErrors, ReportsAtTheRightPlace) {
  const ErrorCase &c = GetParam();
  FrontendRun run(c.source);
  EXPECT_FALSE(run.ok());
  const Diagnostic *d = run.firstErrorDiag();
  ASSERT_TRUE(d) << c.source;
  EXPECT_EQ(d->message, c.error) << run.printed;
  EXPECT_EQ(d->line, c.line) << run.printed;
  EXPECT_EQ(d->column, c.column) << run.printed;
}

INSTANTIATE_TEST_SUITE_P(
    All, SemaErrors,
    ::testing::Values(
        ErrorCase{"UndeclaredIdentifier", "algorithm x implements allreduce() { let y = z; }",
                  "use of undeclared identifier 'z'", 1, 46},
        ErrorCase{"LetRedeclared", "algorithm x implements allreduce() { let y = 1; let y = 2; }",
                  "'y' is already declared", 1, 53},
        ErrorCase{"LoopVariableRedeclared",
                  "algorithm x implements allreduce() { for i in 0 .. N { for i in 0 .. 2 { } } }",
                  "'i' is already declared", 1, 60},
        ErrorCase{"NCannotBeRedeclared", "algorithm x implements allreduce() { let N = 1; }",
                  "'N' is the number of ranks and cannot be redeclared", 1, 42},
        ErrorCase{"NCannotBeAssigned", "algorithm x implements allreduce() { N = 1; }",
                  "cannot assign to 'N', the number of ranks", 1, 38},
        ErrorCase{"ArithmeticOnAChunk",
                  "algorithm x implements allreduce() { let a = input[0][0] + 1; }",
                  "expected an integer for the operands of '+', found a chunk reference", 1, 46},
        ErrorCase{"VariableHoldingABuffer",
                  "algorithm x implements allreduce() { scratch s[1]; let a = s; }",
                  "a variable cannot hold a whole buffer; refer to its chunks as "
                  "buffer[rank][index]",
                  1, 60},
        ErrorCase{"CopyFromAnInteger",
                  "algorithm x implements allreduce() { copy(1, to: output[0][0]); }",
                  "expected a chunk reference for the source of 'copy', found an integer", 1, 43},
        ErrorCase{
            "IndexingANonBuffer",
            "algorithm x implements allreduce() { let t = 1; copy(input[0][0], to: t[0][0]); }",
            "'t' is not a buffer; chunk references index 'input', 'output' or a scratch "
            "buffer",
            1, 71},
        ErrorCase{"ChannelOutOfRange",
                  "algorithm x implements allreduce() { copy(input[0][0], to: output[0][0], "
                  "channel: 32); }",
                  "channel 32 is out of range [0, 31]", 1, 83},
        ErrorCase{"ThreadblockOutOfRange",
                  "algorithm x implements allreduce() { copy(input[0][0], to: output[0][0], "
                  "tb: -1); }",
                  "tb -1 is out of range [0, 1023]", 1, 78},
        ErrorCase{"EmptyChunkRange",
                  "algorithm x implements allreduce() { let a = input[0][3 .. 3]; }",
                  "empty chunk range 3 .. 3", 1, 55},
        ErrorCase{"NegativeRank", "algorithm x implements allreduce() { let a = input[-1][0]; }",
                  "rank -1 is negative", 1, 52},
        ErrorCase{"ModuloByZero", "algorithm x implements allreduce() { let a = N % 0; }",
                  "modulo by zero", 1, 50},
        ErrorCase{"ShiftOutOfRange", "algorithm x implements allreduce() { let a = 1 << 64; }",
                  "shift amount 64 is out of range [0, 63]", 1, 51},
        ErrorCase{"ConstantOverflow",
                  "algorithm x implements allreduce() { let a = 4611686018427387904 * 2; }",
                  "integer overflow in constant expression", 1, 46},
        ErrorCase{"Log2OfZero", "algorithm x implements allreduce() { let a = log2(0); }",
                  "log2 of 0; the argument must be positive", 1, 46},
        ErrorCase{"ZeroLoopStep",
                  "algorithm x implements allreduce() { for i in 0 .. N step 1 - 1 { } }",
                  "loop step is zero", 1, 59},
        ErrorCase{"ScratchNotAtTopLevel",
                  "algorithm x implements allreduce() { if 1 { scratch s[1]; } }",
                  "scratch buffers are declared at the top level of an algorithm", 1, 53},
        ErrorCase{"MissingCollectiveArgument", "algorithm x implements broadcast() { }",
                  "missing argument 'root' for collective 'broadcast'", 1, 24},
        ErrorCase{"UnknownCollectiveParameter", "algorithm x implements allreduce(root = 1) { }",
                  "'allreduce' has no parameter 'root'", 1, 34},
        ErrorCase{"ZeroChunks", "algorithm x implements allreduce(chunks = 0) { }",
                  "chunks must be at least 1, not 0", 1, 43},
        ErrorCase{"ArgumentGivenTwice",
                  "algorithm x implements allreduce(chunks = 1, chunks = 2) { }",
                  "argument 'chunks' given twice", 1, 46},
        ErrorCase{"UnknownCollective", "algorithm x implements allreducee() { }",
                  "unknown collective 'allreducee'", 1, 24},
        ErrorCase{"NonConstantNranks", "algorithm x implements allreduce() with nranks = N { }",
                  "option 'nranks' must be a constant", 1, 50},
        ErrorCase{"UnknownProtocol", "algorithm x implements allreduce() with protocol = Fast { }",
                  "unknown protocol; expected Simple, LL or LL128", 1, 52},
        ErrorCase{"InstancesOutOfRange",
                  "algorithm x implements allreduce() with instances = 0 { }",
                  "instances 0 is out of range [1, 32]", 1, 53},
        ErrorCase{"UnknownOption", "algorithm x implements allreduce() with speed = 1 { }",
                  "unknown option 'speed'", 1, 41},
        ErrorCase{"AlgorithmRedeclared",
                  "algorithm x implements allreduce() { }\nalgorithm x implements allgather() { }",
                  "algorithm 'x' is already declared", 2, 11},
        ErrorCase{
            "BuiltinCollectiveRedeclared",
            "collective allreduce() { input[1]; output[1]; post output[0][0] == input[0][0]; }",
            "collective 'allreduce' is built in; choose another name", 1, 12},
        ErrorCase{"CollectiveWithoutOutputSize",
                  "collective c() { input[1]; post output[0][0] == input[0][0]; }",
                  "collective 'c' does not declare its output size; add 'output[chunks];'", 1, 12},
        ErrorCase{"CollectiveWithoutPostCondition", "collective c() { input[1]; output[1]; }",
                  "collective 'c' has no post-condition; add 'post output[r][i] == ...;'", 1, 12},
        ErrorCase{"PostConditionWithoutOutputOnTheLeft",
                  "collective c() { input[1]; output[1]; post input[0][0] == input[0][0]; }",
                  "a post-condition states what an output chunk holds; expected "
                  "output[rank][index] on the left of '=='",
                  1, 44},
        ErrorCase{
            "ReduceForOutsidePostCondition",
            "algorithm x implements allreduce() { let a = reduce(input[j][0] for j in 0 .. N); }",
            "'reduce(... for ...)' describes a result and is allowed only as the value of a "
            "post-condition",
            1, 46},
        ErrorCase{"ParamRedeclared", "param p = 1;\nparam p = 2;", "'p' is already declared", 2, 7},
        ErrorCase{"ChunkAssignedToAnInteger",
                  "algorithm x implements allreduce() { let a = 1; a = input[0][0]; }",
                  "cannot assign a chunk reference to 'a', which holds an integer", 1, 53}),
    coll::test::CaseName());

TEST(Sema, FunctionsResolveAndFoldConstantCalls) {
  FrontendRun run("def parent(v) = (v - 1) / 2;\n"
                  "def grand(v) = parent(parent(v));\n"
                  "algorithm x implements broadcast(root = 1, chunks = 4) {\n"
                  "  def up(v) = parent(v) + root;\n"
                  "  let a = grand(7);\n"
                  "  let b = up(5);\n"
                  "  let c = chunks;\n"
                  "}\n");
  ASSERT_TRUE(run.ok()) << run.printed;
  auto funcs = run.module->functions();
  ASSERT_EQ(funcs.size(), 2u);
  AlgorithmDecl *a = run.module->algorithms()[0];
  auto &body = a->body->body;
  auto *def = llvm::cast<DefStmt>(body[0].get());
  EXPECT_EQ(def->func->name, "up");
  auto *callA = llvm::cast<UserCallExpr>(llvm::cast<LetStmt>(body[1].get())->value.get());
  EXPECT_EQ(callA->func, funcs[1]);
  EXPECT_EQ(callA->getConstant(), 1); // parent(parent(7)) = parent(3) = 1
  auto *callB = llvm::cast<UserCallExpr>(llvm::cast<LetStmt>(body[2].get())->value.get());
  EXPECT_EQ(callB->func, def->func.get());
  EXPECT_EQ(callB->getConstant(), std::nullopt); // reads the argument 'root'
  auto *c = llvm::cast<NameExpr>(llvm::cast<LetStmt>(body[3].get())->value.get());
  auto *chunks = llvm::dyn_cast<CollParamDecl>(c->decl);
  ASSERT_NE(chunks, nullptr);
  EXPECT_EQ(chunks->name, "chunks");
  EXPECT_EQ(chunks->index, 1u); // root, chunks
  EXPECT_EQ(a->collParamValues[chunks->index]->getConstant(), 4);
}

TEST(Sema, FunctionErrors) {
  FrontendRun run("def f(x) = f(x);\n"
                  "def g(a, b) = a + b;\n"
                  "param p = g(1);\n");
  EXPECT_FALSE(run.ok());
  EXPECT_EQ(run.diag.errorCount(), 2u) << run.printed;
  EXPECT_NE(run.printed.find("function 'f' calls itself; recursion is not allowed"),
            std::string::npos)
      << run.printed;
  EXPECT_NE(run.printed.find("'g' takes 2 arguments, 1 given"), std::string::npos) << run.printed;
}

TEST(Sema, InplaceOverParameters) {
  FrontendRun run("param m = 1;\n"
                  "algorithm x implements allreduce() with inplace = m { }\n"
                  "algorithm y implements allreduce() with inplace = 2 > 1 { }\n");
  ASSERT_TRUE(run.ok()) << run.printed;
  auto algos = run.module->algorithms();
  EXPECT_FALSE(algos[0]->inplace);
  EXPECT_NE(algos[0]->inplaceExpr, nullptr);
  EXPECT_TRUE(algos[1]->inplace);
  EXPECT_EQ(algos[1]->inplaceExpr, nullptr);
}

TEST(Sema, UnusedExpressionIsAWarning) {
  FrontendRun run(wrap("  N + 1;"));
  EXPECT_TRUE(run.ok()) << run.printed;
  EXPECT_EQ(run.diag.warningCount(), 1u);
}

TEST(Sema, SeveralErrorsInOneFile) {
  FrontendRun run(wrap("  let a = b;\n  let c = d;\n  copy(1, to: 2);"));
  EXPECT_FALSE(run.ok());
  EXPECT_EQ(run.diag.errorCount(), 4u) << run.printed;
}

} // namespace
