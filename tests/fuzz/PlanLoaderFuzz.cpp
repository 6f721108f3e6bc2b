//===- PlanLoaderFuzz.cpp - libFuzzer target for the plan loader ----------===//
//
// Feeds arbitrary bytes to parsePlan, whole and one rank at a time. The
// loader must return a value or a precise error, never crash, read out of
// bounds or allocate without bound. An accepted plan must serialize back to
// exactly the bytes it was read from (the encoding is canonical), and must
// pass validatePlan.
//
// Build with clang: cmake -DCOLL_BUILD_FUZZERS=ON -DCMAKE_CXX_COMPILER=clang++
// Run:              ./tests/fuzz/plan_loader_fuzz -max_total_time=60 corpus/
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/PlanIO.h"

#include <cstdlib>
#include <cstring>
#include <vector>

/// Parses \p data as given; an accepted plan must be canonical and valid.
static void check(const uint8_t *data, size_t size) {
  coll::Result<coll::Plan> plan = coll::parsePlan(data, size);
  if (plan) {
    if (!coll::validatePlan(*plan).ok())
      std::abort();
    std::vector<uint8_t> again = coll::serializePlan(*plan);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0)
      std::abort();
    // Every rank on its own must load too.
    for (uint32_t r = 0; r < plan->info.nranks && r < 64; ++r)
      if (!coll::parsePlan(data, size, int(r)))
        std::abort();
  } else {
    // One rank alone: errors only, never a crash.
    (void)coll::parsePlan(data, size, 0);
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check(data, size);
  // Random bytes almost never carry the right checksum; fix it (header
  // offset 24, over everything after the 32-byte header) so the fuzzer also
  // reaches every check behind it.
  if (size >= 32) {
    std::vector<uint8_t> fixed(data, data + size);
    uint64_t sum = coll::planChecksum(fixed.data() + 32, size - 32);
    for (int i = 0; i < 8; ++i)
      fixed[24 + i] = uint8_t(sum >> (8 * i));
    check(fixed.data(), fixed.size());
  }
  return 0;
}
