//===- ElementwiseTest.cpp - Conversions, operators, layout, reference ----===//

#include "coll/Runtime/Elementwise.h"

#include "HostKernels.h"
#include "coll/Runtime/ChunkLayout.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>
#include <set>
#include <vector>

using namespace coll;

namespace {

//===----------------------------------------------------------------------===//
// 16-bit floats
//===----------------------------------------------------------------------===//

TEST(Half, EveryValueRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = halfToFloat(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(f)))) << h;
      continue;
    }
    EXPECT_EQ(floatToHalf(f), h) << "half 0x" << std::hex << h << " = " << f;
  }
}

TEST(Half, KnownValues) {
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfToFloat(0xc000), -2.0f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfToFloat(0x0400), std::ldexp(1.0f, -14));
  EXPECT_TRUE(std::isinf(halfToFloat(0x7c00)));
  EXPECT_EQ(floatToHalf(2048.0f), 0x6800);
}

TEST(Half, RoundsToNearestEven) {
  // Near 1 the spacing is 2^-10: halfway cases go to the even neighbour.
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  // Overflow: 65519 rounds down to 65504, 65520 (the halfway point) up to inf.
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(floatToHalf(-1e10f), 0xfc00);
  // Subnormals: 2^-25 is halfway between 0 and 2^-24 and goes to 0.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(floatToHalf(1.5f * std::ldexp(1.0f, -25)), 0x0001);
  EXPECT_EQ(floatToHalf(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(floatToHalf(-std::ldexp(1.0f, -30)), 0x8000);
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)), 0x0400);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(BFloat16, RoundTripsAndRoundsToNearestEven) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    float f = bf16ToFloat(uint16_t(b));
    if (std::isnan(f))
      EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(f)))) << b;
    else
      EXPECT_EQ(floatToBf16(f), b) << b;
  }
  // Spacing near 1 is 2^-7.
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(floatToBf16(256.0f), 0x4380);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80);
}

//===----------------------------------------------------------------------===//
// Operators and kernels
//===----------------------------------------------------------------------===//

TEST(Combine, IntegersWrapAndOrderHolds) {
  EXPECT_EQ((combine<RedOp::Sum, int8_t>(127, 1)), -128);
  EXPECT_EQ((combine<RedOp::Prod, uint8_t>(200, 2)), 144);
  EXPECT_EQ((combine<RedOp::Prod, int32_t>(1 << 30, 4)), 0);
  EXPECT_EQ((combine<RedOp::Sum, int64_t>(std::numeric_limits<int64_t>::max(), 1)),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ((combine<RedOp::Max, int32_t>(-3, 2)), 2);
  EXPECT_EQ((combine<RedOp::Min, uint64_t>(7, 9)), 7u);
  EXPECT_EQ((combine<RedOp::Avg, float>(1.5f, 2.0f)), 3.5f);
  EXPECT_EQ(divideByRanks<int32_t>(-7, 3), -2);
  EXPECT_EQ(divideByRanks<uint8_t>(250, 4), 62);
  EXPECT_EQ(divideByRanks<double>(1.0, 4), 0.25);
}

TEST(Kernels, Fp16ReduceRoundsOncePerOperation) {
  uint16_t in[3] = {floatToHalf(1.0f), floatToHalf(2048.0f), floatToHalf(-3.0f)};
  uint16_t local[3] = {floatToHalf(std::ldexp(1.0f, -11)), floatToHalf(1.0f), floatToHalf(0.5f)};
  uint16_t out[3], copy[3];
  reduce2Range<DataType::Float16, RedOp::Sum>(out, copy, in, local, 3);
  EXPECT_EQ(halfToFloat(out[0]), 1.0f);    // 1 + 2^-11 rounds to even
  EXPECT_EQ(halfToFloat(out[1]), 2048.0f); // 2049 is not a half; rounds to even
  EXPECT_EQ(halfToFloat(out[2]), -2.5f);
  EXPECT_EQ(std::vector<uint16_t>(out, out + 3), std::vector<uint16_t>(copy, copy + 3));
  divideRange<DataType::Float16>(out, 3, 2);
  EXPECT_EQ(halfToFloat(out[2]), -1.25f);
}

TEST(Names, ParseAndPrint) {
  for (unsigned i = 0; i < numDataTypes(); ++i) {
    DataType t;
    ASSERT_TRUE(parseDataType(dataTypeName(DataType(i)), t));
    EXPECT_EQ(t, DataType(i));
  }
  DataType t;
  EXPECT_TRUE(parseDataType("f32", t));
  EXPECT_EQ(t, DataType::Float32);
  EXPECT_TRUE(parseDataType("bf16", t));
  EXPECT_EQ(t, DataType::BFloat16);
  EXPECT_FALSE(parseDataType("f128", t));
  EXPECT_EQ(dataTypeSize(DataType::BFloat16), 2u);
  EXPECT_EQ(dataTypeSize(DataType::Uint64), 8u);
  RedOp op;
  EXPECT_TRUE(parseRedOp("avg", op));
  EXPECT_EQ(op, RedOp::Avg);
  EXPECT_FALSE(parseRedOp("xor", op));
}

//===----------------------------------------------------------------------===//
// Chunk layout
//===----------------------------------------------------------------------===//

TEST(ChunkLayout, ChunksCoverEveryCount) {
  for (uint64_t c = 1; c <= 9; ++c)
    for (uint64_t u = 0; u <= 50; ++u)
      for (uint64_t s : {1u, 2u, 3u, 100u}) {
        ChunkLayout l = ChunkLayout::make(u, c, s);
        uint64_t next = 0;
        for (uint64_t j = 0; j < 3 * c; ++j) {
          // Consecutive, sizes within one of each other, block structure.
          ASSERT_EQ(l.chunkBegin(j), next);
          uint64_t size = l.chunkSize(j);
          ASSERT_TRUE(size == u / c || size == u / c + 1) << u << " " << c << " " << j;
          ASSERT_EQ(size, l.chunkSize(j % c));
          ASSERT_LE(size, l.maxChunk);
          // The slices tile the chunk.
          uint64_t covered = 0;
          for (uint64_t sl = 0; sl < l.numSlices; ++sl) {
            PieceRange p = l.userPiece(j, sl);
            if (p.length) {
              ASSERT_EQ(p.begin, l.chunkBegin(j) + covered);
            }
            covered += p.length;
          }
          ASSERT_EQ(covered, size);
          next += size;
        }
        ASSERT_EQ(l.bufferElements(c), u);
        ASSERT_EQ(l.bufferElements(3 * c), 3 * u);
        ASSERT_EQ(l.numSlices, (l.maxChunk + s - 1) / s);
      }
}

TEST(ChunkLayout, LargeCountsDoNotOverflow) {
  uint64_t u = (uint64_t(1) << 40) + 12345, c = (uint64_t(1) << 28) - 3;
  ChunkLayout l = ChunkLayout::make(u, c, 1 << 20);
  EXPECT_EQ(l.chunkBegin(c), u);
  EXPECT_EQ(l.chunkBegin(c - 1) + l.chunkSize(c - 1), u);
}

TEST(ChunkLayout, ScratchChunksHaveTheLargestSize) {
  ChunkLayout l = ChunkLayout::make(10, 4, 2); // chunks 2, 3, 2, 3
  EXPECT_EQ(l.maxChunk, 3u);
  EXPECT_EQ(l.scratchElements(5), 15u);
  PieceRange p = l.scratchPiece(2, 1);
  EXPECT_EQ(p.begin, 8u);
  EXPECT_EQ(p.length, 1u);
}

//===----------------------------------------------------------------------===//
// Reference and test data
//===----------------------------------------------------------------------===//

TEST(Reference, SmallExamples) {
  // allreduce sum over 3 ranks.
  std::vector<int32_t> a = {1, 2}, b = {10, 20}, c = {100, 200}, x(2), y(2), z(2);
  ASSERT_TRUE(referenceCollective(CollectiveKind::AllReduce, 3, 0, 2, DataType::Int32, RedOp::Sum,
                                  {a.data(), b.data(), c.data()}, {x.data(), y.data(), z.data()})
                  .ok());
  EXPECT_EQ(x, (std::vector<int32_t>{111, 222}));
  EXPECT_EQ(z, x);
  // alltoall: out[r][j] = in[j][r].
  std::vector<int32_t> p = {1, 2}, q = {3, 4}, u(2), v(2);
  ASSERT_TRUE(referenceCollective(CollectiveKind::AllToAll, 2, 0, 1, DataType::Int32, RedOp::Sum,
                                  {p.data(), q.data()}, {u.data(), v.data()})
                  .ok());
  EXPECT_EQ(u, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(v, (std::vector<int32_t>{2, 4}));
  // reducescatter max, then scatter from root 1.
  std::vector<int32_t> r0 = {5, -1}, r1 = {2, 7}, o0(1), o1(1);
  ASSERT_TRUE(referenceCollective(CollectiveKind::ReduceScatter, 2, 0, 1, DataType::Int32,
                                  RedOp::Max, {r0.data(), r1.data()}, {o0.data(), o1.data()})
                  .ok());
  EXPECT_EQ(o0[0], 5);
  EXPECT_EQ(o1[0], 7);
  ASSERT_TRUE(referenceCollective(CollectiveKind::Scatter, 2, 1, 1, DataType::Int32, RedOp::Sum,
                                  {r0.data(), r1.data()}, {o0.data(), o1.data()})
                  .ok());
  EXPECT_EQ(o0[0], 2);
  EXPECT_EQ(o1[0], 7);
  EXPECT_FALSE(referenceCollective(CollectiveKind::Custom, 2, 0, 1, DataType::Int32, RedOp::Sum,
                                   {r0.data(), r1.data()}, {o0.data(), o1.data()})
                   .ok());
}

TEST(TestData, IntegersAreDistinctPerRankAndElement) {
  std::set<int32_t> seen;
  std::vector<int32_t> buf(5000);
  for (uint32_t r = 0; r < 8; ++r) {
    fillTestInput(DataType::Int32, RedOp::Sum, 8, r, buf.size(), buf.data());
    seen.insert(buf.begin(), buf.end());
  }
  EXPECT_EQ(seen.size(), 8 * buf.size());
}

TEST(TestData, FloatSumsAreExactInAnyOrder) {
  // Every partial sum of 8 ranks stays within the exactly representable
  // integers: bf16 up to 256, fp16 up to 2048.
  for (DataType t : {DataType::Float16, DataType::BFloat16}) {
    std::vector<uint16_t> buf(1000);
    float limit = t == DataType::Float16 ? 2048.0f / 8 : 256.0f / 8;
    bool sawNegative = false, sawPositive = false;
    for (uint32_t r = 0; r < 8; ++r) {
      fillTestInput(t, RedOp::Sum, 8, r, buf.size(), buf.data());
      for (uint16_t v : buf) {
        float f = t == DataType::Float16 ? halfToFloat(v) : bf16ToFloat(v);
        ASSERT_LE(std::fabs(f), limit);
        ASSERT_EQ(f, std::floor(f));
        sawNegative |= f < 0;
        sawPositive |= f > 0;
      }
    }
    EXPECT_TRUE(sawNegative && sawPositive);
  }
  std::vector<float> prod(100);
  fillTestInput(DataType::Float32, RedOp::Prod, 8, 3, prod.size(), prod.data());
  for (float f : prod)
    EXPECT_TRUE(std::fabs(f) == 0.5f || std::fabs(f) == 1.0f || std::fabs(f) == 2.0f) << f;
}

TEST(TestData, BoundsFollowTheLargestReduction) {
  // A user-declared collective whose post-condition reduces 2N chunks on 2
  // ranks: the values leave room for 4 operands, not 2.
  Plan plan;
  plan.info.nranks = 2;
  EXPECT_EQ(testInputOperands(plan), 2u);
  PlanContract c;
  c.termBegin = {0, 1, 5};
  c.operands = {{0, 0}, {0, 0}, {0, 1}, {1, 0}, {1, 1}};
  plan.contract = c;
  EXPECT_EQ(testInputOperands(plan), 4u);
  std::vector<uint16_t> buf(4000);
  float most = 0;
  for (uint32_t r = 0; r < 2; ++r) {
    fillTestInput(DataType::Float16, RedOp::Sum, 2, r, buf.size(), buf.data(),
                  testInputOperands(plan));
    for (uint16_t v : buf)
      most = std::max(most, std::fabs(halfToFloat(v)));
  }
  EXPECT_LE(most, 2048.0f / 4);
  EXPECT_GT(most, 2048.0f / 8); // Still as large as the bound allows.
}

TEST(TestData, MismatchesCountByValue) {
  std::vector<float> a = {1, 2, NAN, 4}, b = {1, 3, NAN, 5};
  uint64_t first = 99;
  EXPECT_EQ(countMismatches(DataType::Float32, a.data(), b.data(), 4, &first), 2u);
  EXPECT_EQ(first, 1u);
  EXPECT_EQ(formatElement(DataType::Float32, a.data(), 1), "2");
  std::vector<int8_t> i = {-5};
  EXPECT_EQ(formatElement(DataType::Int8, i.data(), 0), "-5");
}

TEST(Collectives, BufferSizesAndUnits) {
  BufferElements e = collectiveBufferElements(CollectiveKind::AllGather, 4, 10);
  EXPECT_EQ(e.input, 10u);
  EXPECT_EQ(e.output, 40u);
  e = collectiveBufferElements(CollectiveKind::AllToAll, 4, 10);
  EXPECT_EQ(e.input, 40u);
  EXPECT_EQ(e.output, 40u);
  PlanInfo info;
  info.collective = CollectiveKind::ReduceScatter;
  info.nranks = 4;
  info.inputChunks = 8;
  info.outputChunks = 2;
  Result<uint32_t> c = planChunksPerUnit(info);
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(*c, 2u);
  info.outputChunks = 3;
  EXPECT_FALSE(planChunksPerUnit(info).ok());
  EXPECT_TRUE(collectiveDefinesOutput(CollectiveKind::Gather, 2, 2));
  EXPECT_FALSE(collectiveDefinesOutput(CollectiveKind::Reduce, 2, 1));
  EXPECT_TRUE(collectiveReduces(CollectiveKind::ReduceScatter));
  EXPECT_FALSE(collectiveReduces(CollectiveKind::Broadcast));
}

} // namespace

/// moveBytes is memmove: every byte where memmove puts it, for copies that
/// take its backward path (1 to 63 bytes apart modulo a page, 2 KiB up),
/// overlapping ones among them, and those that do not.
TEST(HostKernels, MoveBytesIsMemmoveAtEveryDistance) {
  const size_t span = 4 * 65536;
  std::vector<unsigned char> base(span), mine, theirs;
  for (size_t i = 0; i < span; ++i)
    base[i] = static_cast<unsigned char>(i * 7 + i / 251 + 3);
  for (size_t n : {size_t(0), size_t(1), size_t(63), size_t(2047), size_t(2048), size_t(2049),
                   size_t(4096 + 17), size_t(65536 + 5)}) {
    for (long apart : {1L, 8L, 16L, 31L, 63L, 64L, 4080L, 4096L + 8, -8L, -4088L, 65536L + 16}) {
      const size_t src = 70000;
      const size_t dst = size_t(long(src) + apart);
      ASSERT_LE(dst + n, span);
      mine = base;
      theirs = base;
      coll::detail::moveBytes(mine.data() + dst, mine.data() + src, n);
      std::memmove(theirs.data() + dst, theirs.data() + src, n);
      ASSERT_EQ(mine, theirs) << n << " bytes, destination " << apart << " bytes from the source";
    }
  }
}

/// streamBytes is memmove too: disjoint copies stream (every alignment of
/// the destination, tails of every length), overlapping ones take
/// moveBytes.
TEST(HostKernels, StreamBytesIsMemmove) {
  const size_t span = 16 * 65536;
  std::vector<unsigned char> base(span), mine, theirs;
  for (size_t i = 0; i < span; ++i)
    base[i] = static_cast<unsigned char>(i * 13 + i / 241 + 5);
  for (size_t n : {size_t(0), size_t(1), size_t(4095), size_t(4096), size_t(4096 + 63),
                   size_t(65536 + 1), size_t(3 * 65536 + 37)}) {
    for (long apart : {-200000L, -4096L, -8L, 1L, 15L, 16L, 63L, 4096L, 4096L + 9, 200000L + 3}) {
      const size_t src = 210000;
      const size_t dst = size_t(long(src) + apart);
      ASSERT_LE(dst + n, span);
      ASSERT_LE(src + n, span);
      mine = base;
      theirs = base;
      coll::detail::streamBytes(mine.data() + dst, mine.data() + src, n);
      std::memmove(theirs.data() + dst, theirs.data() + src, n);
      ASSERT_EQ(mine, theirs) << n << " bytes, destination " << apart << " bytes from the source";
    }
  }
}

/// Calls stream their stores from the threshold given, or from the size
/// of the last-level cache; never with noStreamingStores.
TEST(HostKernels, StreamsStoresFromTheThreshold) {
  using coll::detail::streamsStores;
  EXPECT_FALSE(streamsStores(4095, 4096));
  EXPECT_TRUE(streamsStores(4096, 4096));
  EXPECT_FALSE(streamsStores(~uint64_t(0), coll::noStreamingStores));
  const uint64_t llc = coll::detail::lastLevelCacheBytes();
  const uint64_t from = llc ? llc : uint64_t(32) << 20;
  EXPECT_FALSE(streamsStores(from - 1, 0));
  EXPECT_TRUE(streamsStores(from, 0));
}
