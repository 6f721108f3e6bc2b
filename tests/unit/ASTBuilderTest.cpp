//===- ASTBuilderTest.cpp - Parse tree to AST -----------------------------===//

#include "TestUtil.h"

#include <gtest/gtest.h>

using namespace coll;
using namespace coll::ast;
using coll::test::FrontendRun;

namespace {

/// Line and column of \p loc in \p run's source.
std::pair<unsigned, unsigned> lineCol(FrontendRun &run, llvm::SMLoc loc) {
  return run.srcMgr.getLineAndColumn(loc);
}

/// The statements of the first algorithm's body.
std::vector<StmtPtr> &body(FrontendRun &run) {
  return run.module->algorithms().at(0)->body->body;
}

TEST(ASTBuilder, TopLevelDeclarationsInSourceOrder) {
  FrontendRun run(
      "param a = 1;\n"
      "collective shift(chunks = 1) { input[chunks]; output[chunks];\n"
      "  post output[(r + 1) % N][i] == input[r][i] for r in 0 .. N, i in 0 .. chunks; }\n"
      "algorithm x implements shift(chunks = 2) { }\n"
      "param b = a + 1;\n",
      /*analyze=*/false);
  ASSERT_TRUE(run.module) << run.printed;
  ASSERT_EQ(run.module->decls.size(), 4u);
  EXPECT_TRUE(llvm::isa<ParamDecl>(run.module->decls[0].get()));
  EXPECT_TRUE(llvm::isa<CollectiveDecl>(run.module->decls[1].get()));
  EXPECT_TRUE(llvm::isa<AlgorithmDecl>(run.module->decls[2].get()));
  EXPECT_TRUE(llvm::isa<ParamDecl>(run.module->decls[3].get()));
  EXPECT_EQ(run.module->params().size(), 2u);
  EXPECT_EQ(run.module->params()[1]->name, "b");

  CollectiveDecl *c = run.module->collectives()[0];
  ASSERT_EQ(c->params.size(), 1u);
  EXPECT_EQ(c->params[0]->name, "chunks");
  ASSERT_EQ(c->items.size(), 3u);
  auto *post = llvm::dyn_cast<PostStmt>(c->items[2].get());
  ASSERT_TRUE(post);
  // The '==' is split into the target and the value.
  auto *target = llvm::dyn_cast<ChunkRefExpr>(post->target.get());
  ASSERT_TRUE(target);
  EXPECT_EQ(target->bufferName, "output");
  ASSERT_TRUE(post->clause);
  ASSERT_EQ(post->clause->binders.size(), 2u);
  EXPECT_EQ(post->clause->binders[1].var->name, "i");
}

TEST(ASTBuilder, PrecedenceFollowsC) {
  FrontendRun run("algorithm x implements allreduce() { let v = 1 + 2 * 3 << 1 == 14 && !0; }",
                  false);
  ASSERT_TRUE(run.module) << run.printed;
  auto *let = llvm::dyn_cast<LetStmt>(body(run)[0].get());
  ASSERT_TRUE(let);
  // ((((1 + (2 * 3)) << 1) == 14) && (!0))
  auto *andExpr = llvm::dyn_cast<BinaryExpr>(let->value.get());
  ASSERT_TRUE(andExpr);
  EXPECT_EQ(andExpr->op, BinaryOp::And);
  auto *eq = llvm::dyn_cast<BinaryExpr>(andExpr->lhs.get());
  ASSERT_TRUE(eq);
  EXPECT_EQ(eq->op, BinaryOp::Eq);
  auto *shl = llvm::dyn_cast<BinaryExpr>(eq->lhs.get());
  ASSERT_TRUE(shl);
  EXPECT_EQ(shl->op, BinaryOp::Shl);
  auto *add = llvm::dyn_cast<BinaryExpr>(shl->lhs.get());
  ASSERT_TRUE(add);
  EXPECT_EQ(add->op, BinaryOp::Add);
  auto *mul = llvm::dyn_cast<BinaryExpr>(add->rhs.get());
  ASSERT_TRUE(mul);
  EXPECT_EQ(mul->op, BinaryOp::Mul);
  EXPECT_TRUE(llvm::isa<UnaryExpr>(andExpr->rhs.get()));
}

TEST(ASTBuilder, SubtractionIsLeftAssociativeAndConditionalRightAssociative) {
  FrontendRun run(
      "algorithm x implements allreduce() { let a = 10 - 3 - 2; let b = 1 ? 2 : 0 ? 3 : 4; }",
      false);
  ASSERT_TRUE(run.module) << run.printed;
  auto *a = llvm::dyn_cast<BinaryExpr>(llvm::cast<LetStmt>(body(run)[0].get())->value.get());
  ASSERT_TRUE(a);
  EXPECT_TRUE(llvm::isa<BinaryExpr>(a->lhs.get())); // (10 - 3) - 2
  EXPECT_TRUE(llvm::isa<IntLitExpr>(a->rhs.get()));
  auto *b = llvm::dyn_cast<CondExpr>(llvm::cast<LetStmt>(body(run)[1].get())->value.get());
  ASSERT_TRUE(b);
  EXPECT_TRUE(llvm::isa<CondExpr>(b->elseExpr.get())); // 1 ? 2 : (0 ? 3 : 4)
}

TEST(ASTBuilder, SourceRangesAreOneBasedLineAndColumn) {
  FrontendRun run("algorithm x implements allreduce() {\n"
                  "  copy(input[0][1 .. 3], to: output[2][0 .. 2], channel: 1, tb: 4);\n"
                  "}\n",
                  false);
  ASSERT_TRUE(run.module) << run.printed;
  auto *stmt = llvm::dyn_cast<ExprStmt>(body(run)[0].get());
  ASSERT_TRUE(stmt);
  auto *copy = llvm::dyn_cast<CopyExpr>(stmt->expr.get());
  ASSERT_TRUE(copy);
  EXPECT_EQ(lineCol(run, copy->getRange().Start), std::make_pair(2u, 3u));
  EXPECT_EQ(lineCol(run, copy->getRange().End), std::make_pair(2u, 67u));
  auto *src = llvm::dyn_cast<ChunkRefExpr>(copy->src.get());
  ASSERT_TRUE(src);
  EXPECT_EQ(src->bufferName, "input");
  ASSERT_TRUE(src->hi);
  EXPECT_EQ(llvm::cast<IntLitExpr>(src->lo.get())->value, 1);
  EXPECT_EQ(llvm::cast<IntLitExpr>(src->hi.get())->value, 3);
  EXPECT_EQ(lineCol(run, src->getRange().Start), std::make_pair(2u, 8u));
  ASSERT_TRUE(copy->hints.channel);
  ASSERT_TRUE(copy->hints.sendTb);
  EXPECT_TRUE(copy->hints.tbShared);
  EXPECT_FALSE(copy->hints.recvTb);
}

TEST(ASTBuilder, ParenthesesLeaveNoNodeAndLiteralsParse) {
  FrontendRun run("algorithm x implements allreduce() { let a = ((0x1F)); let b = 1_000_000; "
                  "let c = true; }",
                  false);
  ASSERT_TRUE(run.module) << run.printed;
  auto value = [&](int i) {
    return llvm::cast<IntLitExpr>(llvm::cast<LetStmt>(body(run)[i].get())->value.get())->value;
  };
  EXPECT_EQ(value(0), 31);
  EXPECT_EQ(value(1), 1000000);
  EXPECT_EQ(value(2), 1);
}

TEST(ASTBuilder, ContextualKeywordsAreNames) {
  FrontendRun run("algorithm x implements allreduce() {\n"
                  "  for step in 0 .. 4 step 2 { let pre = step; let post = pre; }\n"
                  "}\n",
                  false);
  ASSERT_TRUE(run.module) << run.printed;
  auto *f = llvm::dyn_cast<ForStmt>(body(run)[0].get());
  ASSERT_TRUE(f);
  EXPECT_EQ(f->var->name, "step");
  ASSERT_TRUE(f->step);
  EXPECT_EQ(llvm::cast<IntLitExpr>(f->step.get())->value, 2);
}

TEST(ASTBuilder, IfElseChainsAndRequireMessages) {
  FrontendRun run("algorithm x implements allreduce() {\n"
                  "  require N > 1 : \"needs \\\"two\\\"\\n\";\n"
                  "  if N == 2 { } else if N == 3 { } else { }\n"
                  "}\n",
                  false);
  ASSERT_TRUE(run.module) << run.printed;
  auto *req = llvm::dyn_cast<RequireStmt>(body(run)[0].get());
  ASSERT_TRUE(req);
  ASSERT_TRUE(req->message);
  EXPECT_EQ(*req->message, "needs \"two\"\n");
  auto *i = llvm::dyn_cast<IfStmt>(body(run)[1].get());
  ASSERT_TRUE(i);
  auto *elseIf = llvm::dyn_cast<IfStmt>(i->elseStmt.get());
  ASSERT_TRUE(elseIf);
  EXPECT_TRUE(llvm::isa<BlockStmt>(elseIf->elseStmt.get()));
}

TEST(ASTBuilder, AlgorithmHeader) {
  FrontendRun run("algorithm bcast implements broadcast(root = 3, chunks = N)\n"
                  "    with nranks = 16, protocol = LL, instances = 2 { }\n",
                  false);
  ASSERT_TRUE(run.module) << run.printed;
  AlgorithmDecl *a = run.module->algorithms()[0];
  EXPECT_EQ(a->name, "bcast");
  EXPECT_EQ(a->collectiveName, "broadcast");
  ASSERT_EQ(a->collArgs.size(), 2u);
  EXPECT_EQ(a->collArgs[0].name, "root");
  ASSERT_EQ(a->options.size(), 3u);
  EXPECT_EQ(a->options[1].name, "protocol");
  EXPECT_EQ(lineCol(run, a->options[2].nameRange.Start), std::make_pair(2u, 38u));
}

TEST(ASTBuilder, BadCallsAreReportedByTheBuilder) {
  struct Case {
    const char *body;
    const char *error;
  } cases[] = {
      {"frob(1);", "unknown function 'frob'"},
      {"copy(input[0][0]);", "'copy' needs a destination; expected copy(src, to: dst)"},
      {"copy(input[0][0], into: output[0][0]);", "unknown argument 'into' to 'copy'"},
      {"reduce(input[0][0], into: output[0][0], channel: 1, channel: 2);",
       "argument 'channel' given twice"},
      {"copy(input[0][0], to: output[0][0], tb: 1, sendtb: 2);",
       "'tb' sets both threadblocks; do not combine it with 'sendtb' or 'recvtb'"},
      {"copy(input[0][0], output[0][0]);",
       "unexpected positional argument to 'copy'; expected copy(src, to: dst)"},
      {"let x = min(1);", "'min' takes at least 2 arguments, 1 given"},
      {"let x = log2(1, 2);", "'log2' takes 1 argument, 2 given"},
      {"let x = 99999999999999999999;",
       "integer literal '99999999999999999999' does not fit in 64 bits"},
  };
  for (const Case &c : cases) {
    FrontendRun run(std::string("algorithm x implements allreduce() {\n  ") + c.body + "\n}\n",
                    false);
    EXPECT_EQ(run.firstError(), c.error) << c.body;
    const Diagnostic *d = run.firstErrorDiag();
    ASSERT_TRUE(d) << c.body;
    EXPECT_EQ(d->line, 2u) << c.body;
  }
}

TEST(ASTBuilder, DeepNestingIsAnErrorNotACrash) {
  std::string parens(10000, '(');
  std::string close(10000, ')');
  FrontendRun run("algorithm x implements allreduce() { let a = " + parens + "1" + close + "; }",
                  false);
  EXPECT_FALSE(run.module);
  EXPECT_EQ(run.firstError(), "bracket nesting level exceeded maximum of 256");

  std::string minus;
  for (int i = 0; i < 5000; ++i)
    minus += "- ";
  FrontendRun unary("algorithm x implements allreduce() { let a = " + minus + "1; }", false);
  EXPECT_FALSE(unary.module);
  EXPECT_NE(unary.firstError().find("nests too deeply"), std::string::npos) << unary.printed;

  std::string sum = "1";
  for (int i = 0; i < 100000; ++i)
    sum += "+1";
  FrontendRun chain("algorithm x implements allreduce() { let a = " + sum + "; }", false);
  EXPECT_FALSE(chain.module);
  EXPECT_NE(chain.firstError().find("nests too deeply"), std::string::npos);
}

TEST(ASTBuilder, LongButShallowProgramsParse) {
  std::string sum = "1";
  for (int i = 0; i < 500; ++i)
    sum += " + 1";
  FrontendRun run("algorithm x implements allreduce() { let a = " + sum + "; }");
  ASSERT_TRUE(run.ok()) << run.printed;
  auto *let = llvm::cast<LetStmt>(body(run)[0].get());
  EXPECT_EQ(let->value->getConstant(), 501);
}

} // namespace
