//===- DiagnosticsTest.cpp - The diagnostic engine ------------------------===//

#include "coll/Lang/Diagnostics.h"

#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

using namespace coll;

namespace {

struct Engine {
  llvm::SourceMgr srcMgr;
  std::string out;
  llvm::raw_string_ostream os{out};
  DiagnosticEngine diag{srcMgr, os};
  const char *buf;

  explicit Engine(llvm::StringRef text) {
    srcMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, "f.coll"), llvm::SMLoc());
    buf = srcMgr.getMemoryBuffer(1)->getBufferStart();
  }
  llvm::SMLoc at(size_t offset) const { return llvm::SMLoc::getFromPointer(buf + offset); }
  std::string text() {
    os.flush();
    return out;
  }
};

TEST(Diagnostics, ErrorPrintsFileLineColumnSourceAndCaret) {
  Engine e("let x = 1;\nlet y = oops;\n");
  e.diag.error(e.at(19), "use of undeclared identifier 'oops'");
  EXPECT_EQ(e.text(), "f.coll:2:9: error: use of undeclared identifier 'oops'\n"
                      "let y = oops;\n"
                      "        ^\n");
  EXPECT_EQ(e.diag.errorCount(), 1u);
  ASSERT_EQ(e.diag.diagnostics().size(), 1u);
  EXPECT_EQ(e.diag.diagnostics()[0].line, 2u);
  EXPECT_EQ(e.diag.diagnostics()[0].column, 9u);
}

TEST(Diagnostics, RangeIsUnderlined) {
  Engine e("let y = oops;\n");
  e.diag.error(llvm::SMRange(e.at(8), e.at(12)), "bad");
  EXPECT_EQ(e.text(), "f.coll:1:9: error: bad\nlet y = oops;\n        ^~~~\n");
}

TEST(Diagnostics, NotesFollowTheirErrorAndDoNotCount) {
  Engine e("a\nb\n");
  e.diag.error(e.at(2), "second");
  e.diag.note(e.at(0), "first is here");
  EXPECT_EQ(e.diag.errorCount(), 1u);
  std::string t = e.text();
  EXPECT_NE(t.find("f.coll:2:1: error: second"), std::string::npos);
  EXPECT_NE(t.find("f.coll:1:1: note: first is here"), std::string::npos);
  EXPECT_LT(t.find("error:"), t.find("note:"));
}

TEST(Diagnostics, WarningsDoNotCountAsErrors) {
  Engine e("x\n");
  e.diag.warning(e.at(0), "unused");
  EXPECT_FALSE(e.diag.hasErrors());
  EXPECT_EQ(e.diag.warningCount(), 1u);
  EXPECT_NE(e.text().find("f.coll:1:1: warning: unused"), std::string::npos);
}

TEST(Diagnostics, ErrorWithoutLocationNamesTheProgram) {
  Engine e("");
  e.diag.errorNoLoc("cannot open 'x.coll': No such file or directory");
  EXPECT_EQ(e.text(), "collc: error: cannot open 'x.coll': No such file or directory\n");
}

TEST(Diagnostics, ErrorLimitStopsPrintingButKeepsCounting) {
  Engine e("abcdef\n");
  e.diag.setErrorLimit(2);
  for (int i = 0; i < 5; ++i) {
    e.diag.error(e.at(i), "error " + llvm::Twine(i));
    e.diag.note(e.at(i), "note " + llvm::Twine(i));
  }
  std::string t = e.text();
  EXPECT_NE(t.find("error 1"), std::string::npos);
  EXPECT_EQ(t.find("error 2"), std::string::npos);
  EXPECT_NE(t.find("note 1"), std::string::npos);
  EXPECT_EQ(t.find("note 2"), std::string::npos); // a dropped error's note is dropped too
  EXPECT_NE(t.find("too many errors emitted"), std::string::npos);
  EXPECT_EQ(e.diag.errorCount(), 5u);
  EXPECT_TRUE(e.diag.shouldStop());
}

} // namespace
