//===- SelectionTest.cpp - Selection tables -------------------------------===//

#include "coll/Runtime/Selection.h"

#include <gtest/gtest.h>

using namespace coll;

namespace {

SelectionTable parse(const std::string &text) {
  Result<SelectionTable> t = SelectionTable::parse(text, "t.select", "/plans");
  EXPECT_TRUE(t.ok()) << t.message();
  return t ? *t : SelectionTable();
}

std::string error(const std::string &text) {
  Result<SelectionTable> t = SelectionTable::parse(text, "t.select", "/plans");
  EXPECT_FALSE(t.ok());
  return t ? "" : t.message();
}

} // namespace

TEST(Selection, RowsRanksSizesAndParameters) {
  SelectionTable t = parse("# comment\n"
                           "allreduce 1-2 any a.coll\n"
                           "\n"
                           "allreduce 3- 16K b.coll nchunks=4 # trailing comment\n"
                           "allreduce any any /abs/c.bin\n"
                           "broadcast 8 1M d.coll\n");
  ASSERT_EQ(t.rows().size(), 4u);
  const SelectionRow &a = t.rows()[0];
  EXPECT_EQ(a.minRanks, 1u);
  EXPECT_EQ(a.maxRanks, 2u);
  EXPECT_EQ(a.maxBytes, SelectionRow::anyBytes);
  EXPECT_EQ(a.path, "/plans/a.coll");
  EXPECT_EQ(a.where, "t.select:2");
  EXPECT_TRUE(a.isProgram());
  const SelectionRow &b = t.rows()[1];
  EXPECT_EQ(b.minRanks, 3u);
  EXPECT_EQ(b.maxRanks, SelectionRow::anyRanks);
  EXPECT_EQ(b.maxBytes, 16u << 10);
  ASSERT_EQ(b.defines.size(), 1u);
  EXPECT_EQ(b.defines[0], "nchunks=4");
  EXPECT_EQ(t.rows()[2].path, "/abs/c.bin");
  EXPECT_FALSE(t.rows()[2].isProgram());
  EXPECT_EQ(t.rows()[3].minRanks, 8u);
  EXPECT_EQ(t.rows()[3].maxRanks, 8u);
  EXPECT_EQ(t.rows()[3].maxBytes, 1u << 20);

  // Candidates: in order, those that admit N.
  std::vector<const SelectionRow *> c2 = t.candidates("allreduce", 2);
  ASSERT_EQ(c2.size(), 2u);
  EXPECT_EQ(c2[0]->program, "a.coll");
  EXPECT_EQ(c2[1]->program, "/abs/c.bin");
  EXPECT_EQ(t.candidates("allreduce", 5).size(), 2u);
  EXPECT_TRUE(t.candidates("broadcast", 7).empty());
  EXPECT_TRUE(t.candidates("gather", 2).empty());
  EXPECT_EQ(t.collectives(), (std::vector<std::string>{"allreduce", "broadcast"}));

  // A user's rows go first.
  SelectionTable user = parse("allreduce any any mine.coll\n");
  t.prepend(user);
  EXPECT_EQ(t.candidates("allreduce", 5)[0]->program, "mine.coll");
}

TEST(Selection, ErrorsNameTheLine) {
  EXPECT_EQ(error("\nallreduce 2 any\n"),
            "t.select:2: error: expected 'collective ranks max-bytes program [NAME=VALUE ...]', "
            "found 3 words");
  EXPECT_EQ(error("allreduce 0 any a.coll"),
            "t.select:1: error: ranks '0' is not N, A-B, A- or any");
  EXPECT_EQ(error("allreduce 4-2 any a.coll"),
            "t.select:1: error: ranks '4-2' is not N, A-B, A- or any");
  EXPECT_EQ(error("allreduce 2 lots a.coll"),
            "t.select:1: error: max-bytes 'lots' is not a size (4096, 64K, 16M, 1G) or any");
  EXPECT_EQ(error("allreduce 2 -5 a.coll"),
            "t.select:1: error: max-bytes '-5' is not a size (4096, 64K, 16M, 1G) or any");
  EXPECT_EQ(error("allreduce 2 any a.txt"),
            "t.select:1: error: program 'a.txt' is neither a .coll program nor a .bin plan");
  EXPECT_EQ(error("allreduce 2 any a.coll root"),
            "t.select:1: error: 'root' is not a parameter NAME=VALUE");
  EXPECT_EQ(error("allreduce 2 any a.bin root=1"),
            "t.select:1: error: parameter 'root=1' given to a compiled plan");
  EXPECT_EQ(error("all-reduce 2 any a.coll"),
            "t.select:1: error: 'all-reduce' is not a collective's name");
}

TEST(Selection, Sizes) {
  uint64_t v = 0;
  EXPECT_TRUE(parseByteSize("4096", v));
  EXPECT_EQ(v, 4096u);
  EXPECT_TRUE(parseByteSize("64K", v));
  EXPECT_EQ(v, 64u << 10);
  EXPECT_TRUE(parseByteSize("16MB", v));
  EXPECT_EQ(v, 16u << 20);
  EXPECT_TRUE(parseByteSize("1g", v));
  EXPECT_EQ(v, 1u << 30);
  EXPECT_TRUE(parseByteSize("32MiB", v));
  EXPECT_EQ(v, 32u << 20);
  EXPECT_TRUE(parseByteSize("4Ki", v));
  EXPECT_EQ(v, 4u << 10);
  EXPECT_FALSE(parseByteSize("4Xi", v));
  EXPECT_EQ(formatByteSize(32u << 20), "32 MiB");
  EXPECT_EQ(formatByteSize(1536), "1536 B");
  EXPECT_EQ(formatByteSize(0), "0 B");
  EXPECT_FALSE(parseByteSize("", v));
  EXPECT_FALSE(parseByteSize("K", v));
  EXPECT_FALSE(parseByteSize("-1", v));
  EXPECT_FALSE(parseByteSize("1T", v));
  EXPECT_FALSE(parseByteSize("99999999999999999999", v));
  EXPECT_FALSE(parseByteSize("17179869184G", v)); // Overflows 64 bits.
}

TEST(Selection, TheStandardLibrarysTableLoads) {
  Result<SelectionTable> t = SelectionTable::load(COLL_STDLIB_DIR "/default.select");
  ASSERT_TRUE(t.ok()) << t.message();
  for (const char *c : {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "gather",
                        "scatter", "alltoall"})
    for (uint32_t n : {2u, 3u, 8u, 64u})
      EXPECT_FALSE(t->candidates(c, n).empty()) << c << " on " << n;
  EXPECT_FALSE(SelectionTable::load(COLL_STDLIB_DIR "/no-such.select").ok());
}
