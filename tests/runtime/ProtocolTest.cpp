//===- ProtocolTest.cpp - LL and LL128 on the CPU executors ---------------===//
//
// The protocol choice (parsing, thresholds, agreement between ranks), the
// line format itself (what a receiver accepts and what it refuses), and
// calls that reuse one set of connections many times, where a stale line
// of an earlier message must never pass for a new one. The sweep runs
// every stdlib program in every protocol; these tests pin what it cannot
// see.
//
//===----------------------------------------------------------------------===//

#include "HandPlans.h"
#include "LineProtocol.h"
#include "TestHelpers.h"
#include "coll/Runtime/PreparedCall.h"
#include "coll/Runtime/ProcessGroup.h"

#include <gtest/gtest.h>
#include <numeric>
#include <thread>
#include <unistd.h>

using namespace coll;
using namespace coll::detail;
using namespace coll::test;

namespace {

const ProtocolKind lineProtocols[] = {ProtocolKind::LL, ProtocolKind::LL128};

ProtocolChoice forced(ProtocolKind p) {
  ProtocolChoice c;
  c.force = true;
  c.forced = p;
  return c;
}

//===----------------------------------------------------------------------===//
// The choice
//===----------------------------------------------------------------------===//

TEST(ProtocolChoiceTest, ParsesEveryForm) {
  ProtocolChoice c;
  ASSERT_TRUE(parseProtocolChoice("LL", c));
  EXPECT_TRUE(c.force);
  EXPECT_EQ(c.forced, ProtocolKind::LL);
  ASSERT_TRUE(parseProtocolChoice("ll128", c));
  EXPECT_EQ(c.forced, ProtocolKind::LL128);
  ASSERT_TRUE(parseProtocolChoice("simple", c));
  EXPECT_EQ(c.forced, ProtocolKind::Simple);
  ASSERT_TRUE(parseProtocolChoice("auto", c));
  EXPECT_EQ(c, ProtocolChoice());
  ASSERT_TRUE(parseProtocolChoice("LL:4K,LL128:256K", c));
  EXPECT_FALSE(c.force);
  EXPECT_EQ(c.llMaxBytes, 4096u);
  EXPECT_EQ(c.ll128MaxBytes, 262144u);
  EXPECT_EQ(formatProtocolChoice(c), "LL:4096,LL128:262144");
  ProtocolChoice back;
  ASSERT_TRUE(parseProtocolChoice(formatProtocolChoice(c), back));
  EXPECT_EQ(back, c);
  EXPECT_EQ(formatProtocolChoice(forced(ProtocolKind::LL128)), "LL128");
  EXPECT_EQ(formatProtocolChoice(ProtocolChoice()), "auto");
}

TEST(ProtocolChoiceTest, RejectsWhatIsNotAChoice) {
  for (const char *bad :
       {"LL256", "LL:", "LL:0", "LL:x", "Simple:4K", "LL:4K,LL:8K", ":4K", "LL:4K,", "LL;4K"}) {
    ProtocolChoice c = forced(ProtocolKind::LL128);
    Status s = parseProtocolChoice(bad, c);
    EXPECT_FALSE(s) << bad;
    EXPECT_NE(s.message().find("bad protocol choice"), std::string::npos) << s.message();
    EXPECT_EQ(c, forced(ProtocolKind::LL128)) << bad << ": changed on an error";
  }
}

TEST(ProtocolChoiceTest, ThresholdsPickBySize) {
  ProtocolChoice c;
  c.llMaxBytes = 4096;
  c.ll128MaxBytes = 65536;
  EXPECT_EQ(chooseProtocol(ProtocolKind::Simple, c, 1), ProtocolKind::LL);
  EXPECT_EQ(chooseProtocol(ProtocolKind::Simple, c, 4096), ProtocolKind::LL);
  EXPECT_EQ(chooseProtocol(ProtocolKind::Simple, c, 4097), ProtocolKind::LL128);
  EXPECT_EQ(chooseProtocol(ProtocolKind::Simple, c, 65536), ProtocolKind::LL128);
  EXPECT_EQ(chooseProtocol(ProtocolKind::Simple, c, 65537), ProtocolKind::Simple);
  EXPECT_EQ(chooseProtocol(ProtocolKind::LL128, c, 1 << 20), ProtocolKind::LL128);
  // No thresholds: the plan's protocol.
  EXPECT_EQ(chooseProtocol(ProtocolKind::LL, ProtocolChoice(), 1 << 30), ProtocolKind::LL);
  EXPECT_EQ(chooseProtocol(ProtocolKind::LL, ProtocolChoice(), 0), ProtocolKind::LL);
  EXPECT_EQ(chooseProtocol(ProtocolKind::LL, forced(ProtocolKind::Simple), 8),
            ProtocolKind::Simple);
}

TEST(ProtocolChoiceTest, PreparedCallCarriesTheProtocol) {
  Plan plan = ringAllReduce(2, 2);
  plan.info.protocol = ProtocolKind::LL128;
  Result<ValidatedPlan> vp = ValidatedPlan::make(plan);
  ASSERT_TRUE(vp) << vp.message();
  std::vector<float> a(64), b(64);
  CallOptions o;
  o.protocol.llMaxBytes = 64 * 4;
  PreparedCall small = prepareCall(*vp, 0, {a.data(), b.data(), 64, DataType::Float32}, o);
  PreparedCall large = prepareCall(*vp, 0, {a.data(), b.data(), 65, DataType::Float32}, o);
  ASSERT_FALSE(small.error) << small.error.message;
  EXPECT_EQ(small.protocol, ProtocolKind::LL);
  EXPECT_EQ(large.protocol, ProtocolKind::LL128); // The plan's, above the threshold.
  // Ranks that chose differently do not agree.
  PreparedCall other = prepareCall(*vp, 1, {a.data(), b.data(), 64, DataType::Float32}, {});
  ASSERT_EQ(other.protocol, ProtocolKind::LL128);
  CallDescription both[2] = {small.description, other.description};
  CallError e = agree(both, 2, 0);
  EXPECT_EQ(e.kind, ErrorKind::Mismatch);
  EXPECT_NE(e.message.find("rank 0 LL, rank 1 LL128"), std::string::npos) << e.message;
}

//===----------------------------------------------------------------------===//
// Lines
//===----------------------------------------------------------------------===//

/// Bytes distinct by position and by \p salt.
std::vector<char> pattern(uint64_t n, uint32_t salt) {
  std::vector<char> v(n);
  for (uint64_t i = 0; i < n; ++i)
    v[i] = char((i * 131 + salt * 7 + (i >> 8)) & 0xff);
  return v;
}

TEST(LineFormatTest, RoundTripsEveryLength) {
  for (ProtocolKind p : lineProtocols)
    for (uint64_t bytes = 0; bytes <= 400; ++bytes) {
      const uint64_t lines = messageLines(p, bytes);
      ASSERT_EQ(slotBytesFor(p, bytes), lines * lineBytes(p));
      std::vector<char> slot(slotBytesFor(p, bytes) + 64, 0), out(bytes + 8, 'x');
      std::vector<char> in = pattern(bytes, uint32_t(bytes));
      // Not there yet: zeroed memory is no message.
      EXPECT_FALSE(unpackLines(p, out.data(), slot.data(), bytes, 0));
      packLines(p, slot.data(), in.data(), bytes, 0);
      ASSERT_TRUE(unpackLines(p, out.data(), slot.data(), bytes, 0))
          << protocolName(p) << " " << bytes;
      EXPECT_TRUE(std::equal(in.begin(), in.end(), out.begin())) << protocolName(p) << " " << bytes;
      // Nothing past the message is written, in the slot or the copy.
      EXPECT_TRUE(std::all_of(slot.begin() + lines * lineBytes(p), slot.end(),
                              [](char c) { return c == 0; }));
      EXPECT_TRUE(std::all_of(out.begin() + bytes, out.end(), [](char c) { return c == 'x'; }));
      // The next message in the slot is not there either.
      EXPECT_FALSE(unpackLines(p, out.data(), slot.data(), bytes, 1));
    }
}

TEST(LineFormatTest, EveryLineMustHaveArrived) {
  // A message of several lines whose any one line still holds the previous
  // message's flag is not there yet.
  for (ProtocolKind p : lineProtocols) {
    const uint64_t bytes = 5 * lineDataBytes(p) + 3, lines = messageLines(p, bytes);
    std::vector<char> slot(slotBytesFor(p, bytes)), out(bytes);
    std::vector<char> old = pattern(bytes, 1), now = pattern(bytes, 2);
    for (uint64_t missing = 0; missing < lines; ++missing) {
      packLines(p, slot.data(), old.data(), bytes, 6);
      std::vector<char> fresh(slot.size());
      packLines(p, fresh.data(), now.data(), bytes, 7);
      // Message 7 has arrived except line `missing` (message 6's there).
      for (uint64_t l = 0; l < lines; ++l)
        if (l != missing)
          std::memcpy(slot.data() + l * lineBytes(p), fresh.data() + l * lineBytes(p),
                      lineBytes(p));
      EXPECT_FALSE(unpackLines(p, out.data(), slot.data(), bytes, 7))
          << protocolName(p) << ": line " << missing << " of " << lines << " missing";
    }
    if (p == ProtocolKind::LL) {
      // LL vouches for each 8-byte word: half a line is not a line.
      packLines(p, slot.data(), old.data(), bytes, 6);
      std::vector<char> fresh(slot.size());
      packLines(p, fresh.data(), now.data(), bytes, 7);
      std::memcpy(slot.data(), fresh.data(), slot.size());
      std::memcpy(slot.data() + 16 * 2 + 8, std::vector<char>(8, 0).data(), 8);
      EXPECT_FALSE(unpackLines(p, out.data(), slot.data(), bytes, 7));
    }
  }
}

TEST(LineFormatTest, FlagsNeverRepeatNearByAndAreNeverZero) {
  // Message m's slot last held message m - depth; LL's 32-bit flags wrap
  // at 2^32 - 1 messages and skip 0 (the value of unwritten memory).
  EXPECT_EQ(llFlag(0), 1u);
  EXPECT_EQ(llFlag(0xfffffffeull), 0xffffffffu);
  EXPECT_EQ(llFlag(0xffffffffull), 1u);
  for (uint64_t m : {uint64_t(0), uint64_t(0xfffffff0u), uint64_t(0xffffffffu),
                     uint64_t(0x1fffffffdull), ~uint64_t(0) - 20})
    for (uint64_t k = 0; k < 20; ++k) {
      EXPECT_NE(llFlag(m + k), 0u);
      for (uint64_t depth = 1; depth <= 16; ++depth)
        EXPECT_NE(llFlag(m + k), llFlag(m + k + depth)) << m + k << " depth " << depth;
    }
  // Around the wrap: a message is not taken for the one 2^32 - 2 before.
  std::vector<char> slot(slotBytesFor(ProtocolKind::LL, 64)), out(64);
  std::vector<char> in = pattern(64, 3);
  packLines(ProtocolKind::LL, slot.data(), in.data(), 64, 0xfffffffeull);
  EXPECT_FALSE(unpackLines(ProtocolKind::LL, out.data(), slot.data(), 64, 0xffffffffull));
  EXPECT_TRUE(unpackLines(ProtocolKind::LL, out.data(), slot.data(), 64, 0xfffffffeull));
}

TEST(LineFormatTest, MessageBytesCoverEveryPieceOfTheSlice) {
  // 10 elements in 3 chunks (4, 3, 3), slices of 2: a message of k chunks
  // spans k - 1 strides and a scratch chunk's slice (the largest).
  ChunkLayout l = ChunkLayout::make(10, 3, 2);
  EXPECT_EQ(messageBytes(l, 1, 0, 8, 4), 8u);
  EXPECT_EQ(messageBytes(l, 3, 1, 8, 4), 2 * 8 + 8u);
  ChunkLayout odd = ChunkLayout::make(7, 2, 3); // Chunks of 4 and 3; scratch 4.
  EXPECT_EQ(messageBytes(odd, 1, 1, 6, 2), 2u); // The last slice holds 1 element.
  EXPECT_EQ(messageBytes(odd, 2, 0, 6, 2), 12u);
  EXPECT_EQ(messageBytes(odd, 0, 0, 6, 2), 0u);
}

//===----------------------------------------------------------------------===//
// Runs
//===----------------------------------------------------------------------===//

/// Element \p i of rank \p r's input in call \p call: distinct per
/// (call, rank, element), and exact in any sum of a few ranks.
float inputValue(uint32_t call, size_t r, size_t i) {
  return float((call * 7 + r * 3 + i) % 1024);
}

/// Fills every rank's input of call \p call.
void fillCall(std::vector<std::vector<float>> &in, uint32_t call) {
  for (size_t r = 0; r < in.size(); ++r)
    for (size_t i = 0; i < in[r].size(); ++i)
      in[r][i] = inputValue(call, r, i);
}

/// Checks a ring allreduce of \p in against \p out.
void expectSums(const std::vector<std::vector<float>> &in,
                const std::vector<std::vector<float>> &out, const std::string &what) {
  for (size_t i = 0; i < in[0].size(); ++i) {
    float sum = 0;
    for (const auto &v : in)
      sum += v[i];
    for (size_t r = 0; r < out.size(); ++r)
      ASSERT_EQ(out[r][i], sum) << what << ": rank " << r << " element " << i;
  }
}

TEST(ProtocolRunTest, ManyCallsOnOneWorldNeverReadAStaleLine) {
  // One LocalWorld keeps its connections from call to call: the same slots
  // carry message after message, so each call's lines must be told from
  // the last call's by their flags alone. Two configurations: 3 ranks with
  // slices of 3 elements, so that every slot turns over many times per
  // call; and 2 ranks with one slice, whose connections carry exactly as
  // many messages per call as they have slots, so that each slot's last
  // message of a call sits where the next call's first goes (a call that
  // started its counting over would take it for new).
  struct Config {
    uint32_t n;
    uint64_t slice;
  };
  for (Config cfg : {Config{3, 3}, Config{2, 1 << 20}})
    for (ProtocolKind p : lineProtocols)
      for (ExecMode mode : {ExecMode::Single, ExecMode::Threads}) {
        const uint32_t n = cfg.n;
        Plan plan = ringAllReduce(n, 2);
        LocalWorld world;
        ExecOptions o;
        o.mode = mode;
        o.sliceElements = cfg.slice;
        o.protocol = forced(p);
        Timeline timeline;
        for (uint32_t call = 0; call < 40; ++call) {
          const uint64_t count = 30;
          std::vector<std::vector<float>> in(n, std::vector<float>(count)),
              out(n, std::vector<float>(count, -1));
          fillCall(in, call);
          std::vector<const void *> send(n);
          std::vector<void *> recv(n);
          for (uint32_t r = 0; r < n; ++r) {
            send[r] = in[r].data();
            recv[r] = out[r].data();
          }
          o.timeline = call == 39 ? &timeline : nullptr;
          Status s = world.run(plan, send, recv, count, DataType::Float32, RedOp::Sum, o);
          ASSERT_TRUE(s) << s.message();
          expectSums(in, out,
                     std::string(protocolName(p)) + " n " + std::to_string(n) + " call " +
                         std::to_string(call));
        }
        EXPECT_EQ(timeline.protocol, p);
        EXPECT_FALSE(timeline.events.empty());
      }
}

TEST(ProtocolRunTest, ThresholdsChooseByCallSize) {
  Plan plan = ringAllReduce(2, 2);
  LocalWorld world;
  ExecOptions o;
  o.protocol.llMaxBytes = 64;
  o.protocol.ll128MaxBytes = 1024;
  for (auto [count, want] : {std::pair<uint64_t, ProtocolKind>{16, ProtocolKind::LL},
                             {17, ProtocolKind::LL128},
                             {256, ProtocolKind::LL128},
                             {257, ProtocolKind::Simple},
                             {16, ProtocolKind::LL}}) {
    std::vector<std::vector<float>> in(2, std::vector<float>(count)),
        out(2, std::vector<float>(count));
    fillCall(in, uint32_t(count));
    Timeline timeline;
    o.timeline = &timeline;
    Status s = world.run(plan, {in[0].data(), in[1].data()}, {out[0].data(), out[1].data()}, count,
                         DataType::Float32, RedOp::Sum, o);
    ASSERT_TRUE(s) << s.message();
    EXPECT_EQ(timeline.protocol, want) << count;
    expectSums(in, out, "count " + std::to_string(count));
    std::ostringstream trace;
    timeline.writeChromeTrace(trace, plan);
    EXPECT_NE(trace.str().find(std::string("\"protocol\":\"") + protocolName(want) + "\""),
              std::string::npos);
  }
}

TEST(ProtocolRunTest, LineSlotsCountAgainstTheMemoryCap) {
  // LL doubles a slot: a cap that Simple's FIFOs fit under refuses LL's,
  // and says which FIFO, in which protocol.
  Plan plan = ringAllReduce(2, 4);
  const uint64_t count = 1 << 16;
  std::vector<std::vector<float>> in(2, std::vector<float>(count)),
      out(2, std::vector<float>(count));
  ExecOptions o;
  o.sliceElements = count;
  // Per rank: 4 slots of a 32768-element chunk of 4 bytes (Simple).
  o.memoryLimitBytes = 2 * 4 * 32768 * 4 + 1024;
  Status simple =
      LocalWorld().run(plan, {in[0].data(), in[1].data()}, {out[0].data(), out[1].data()}, count,
                       DataType::Float32, RedOp::Sum, o);
  EXPECT_TRUE(simple) << simple.message();
  o.protocol = forced(ProtocolKind::LL);
  Status ll = LocalWorld().run(plan, {in[0].data(), in[1].data()}, {out[0].data(), out[1].data()},
                               count, DataType::Float32, RedOp::Sum, o);
  ASSERT_FALSE(ll);
  EXPECT_NE(ll.message().find("in LL lines"), std::string::npos) << ll.message();
}

TEST(ProtocolRunTest, ProcessGroupReusesItsSlotsAcrossCalls) {
  // Each rank keeps its data side (shared-memory FIFOs) from call to call:
  // 30 calls on the same slots, in each line protocol.
  const uint32_t n = 3;
  Plan plan = ringAllReduce(n, 2);
  for (ProtocolKind p : lineProtocols) {
    static std::atomic<int> jobs{0};
    const std::string job = "proto" + std::to_string(getpid()) + "_" + std::to_string(jobs++);
    const uint64_t count = 45;
    std::vector<std::vector<float>> in(n, std::vector<float>(count)),
        out(n, std::vector<float>(count));
    std::vector<std::string> errors(n);
    std::vector<std::thread> ranks;
    std::atomic<uint32_t> arrived{0};
    for (uint32_t r = 0; r < n; ++r)
      ranks.emplace_back([&, r] {
        ProcessGroupOptions o;
        o.sliceElements = 4;
        o.timeoutSeconds = 20;
        o.protocol = forced(p);
        auto group = ProcessGroup::create(job, int(r), int(n), o);
        if (!group) {
          errors[r] = group.message();
          return;
        }
        for (uint32_t call = 0; call < 30; ++call) {
          for (size_t i = 0; i < count; ++i)
            in[r][i] = inputValue(call, r, i);
          Status s = (*group)->execute(plan, in[r].data(), out[r].data(), count, DataType::Float32,
                                       RedOp::Sum);
          if (!s) {
            errors[r] = s.message();
            return;
          }
          for (size_t i = 0; i < count; ++i) {
            float sum = 0;
            for (uint32_t q = 0; q < n; ++q)
              sum += inputValue(call, q, i);
            if (out[r][i] != sum) {
              errors[r] = "call " + std::to_string(call) + " element " + std::to_string(i) +
                          " is " + std::to_string(out[r][i]) + ", not " + std::to_string(sum);
              return;
            }
          }
        }
        arrived++;
      });
    for (std::thread &t : ranks)
      t.join();
    for (uint32_t r = 0; r < n; ++r)
      EXPECT_EQ(errors[r], "") << protocolName(p) << " rank " << r;
    EXPECT_EQ(arrived.load(), n);
    EXPECT_TRUE(ProcessGroup::listJobSegments(job).empty());
  }
}

TEST(ProtocolRunTest, RanksThatChooseDifferentlyFailAlike) {
  // One rank forces LL, the others take the plan's Simple: the call is
  // refused on every rank, naming the protocols, instead of hanging.
  const uint32_t n = 3;
  Plan plan = ringAllReduce(n, 2);
  static std::atomic<int> jobs{0};
  const std::string job = "protomix" + std::to_string(getpid()) + "_" + std::to_string(jobs++);
  std::vector<std::string> errors(n);
  std::vector<std::thread> ranks;
  for (uint32_t r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      ProcessGroupOptions o;
      o.timeoutSeconds = 20;
      if (r == 1)
        o.protocol = forced(ProtocolKind::LL);
      auto group = ProcessGroup::create(job, int(r), int(n), o);
      if (!group) {
        errors[r] = "create: " + group.message();
        return;
      }
      std::vector<float> in(64, 1), out(64);
      Status s = (*group)->execute(plan, in.data(), out.data(), 64, DataType::Float32, RedOp::Sum);
      errors[r] = s ? "succeeded" : s.message();
    });
  for (std::thread &t : ranks)
    t.join();
  for (uint32_t r = 0; r < n; ++r)
    EXPECT_NE(errors[r].find("different protocols: rank 0 Simple, rank 1 LL"), std::string::npos)
        << "rank " << r << ": " << errors[r];
}

} // namespace
