//===- PeerCommon.h - What every peer benchmark shares ----------*- C++ -*-===//
//
// The peer benchmarks time other libraries' collectives (and a hand-written
// shared-memory ceiling) with nccl-tests' flags and print one CSV format, so
// that bench/compare can put them beside coll-perf.
//
//===----------------------------------------------------------------------===//
/// \file
/// Flags, message sizes, test data, checking, forking ranks and the CSV and
/// table output shared by the programs in bench/peers.

#ifndef COLL_BENCH_PEERS_PEERCOMMON_H
#define COLL_BENCH_PEERS_PEERCOMMON_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace collpeer {

/// The collectives a peer may time.
enum class CollKind { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce };
/// Element types.
enum class DTypeKind { F32, F64, I32 };
/// Reduction operators.
enum class OpKind { Sum, Prod, Min, Max };
/// Where the result goes relative to the input.
enum class PlacementKind { OutOfPlace, InPlace };

/// The CSV and command-line name of \p coll, e.g. `allreduce`.
const char *collName(CollKind coll);
/// `f32`, `f64` or `i32`.
const char *dtypeName(DTypeKind dtype);
/// Bytes per element.
size_t dtypeSize(DTypeKind dtype);
/// `sum`, `prod`, `min` or `max`.
const char *opName(OpKind op);
/// `out-of-place` or `in-place`.
const char *placementName(PlacementKind placement);
/// True for the collectives that combine values (and so take `-o`).
bool isReduction(CollKind coll);
/// nccl-tests' bus bandwidth factor: busbw = algbw * factor.
double busFactor(CollKind coll, int nranks);

/// What a peer supports, for parsing and for its usage text.
struct PeerSpec {
  /// The program's name, used in messages.
  const char *program;
  /// The collectives it implements.
  std::vector<CollKind> colls;
  /// Values of `--algorithm`; the first is the default. Empty: no flag.
  std::vector<std::string> algorithms;
  /// Whether it forks its own ranks (`--nranks`, `--bind`, `--no-bind`).
  bool forksRanks = false;
  /// Whether its ranks are pinned to cores unless `--no-bind`.
  bool bindByDefault = false;
  /// Text appended to the usage (peer-specific notes).
  const char *notes = "";
};

/// The parsed command line, nccl-tests' flags plus the peers' own.
struct Options {
  std::vector<CollKind> colls;
  std::string algorithm;
  int nranks = 2;
  bool bind = false;
  uint64_t minBytes = 32ull << 20;
  uint64_t maxBytes = 32ull << 20;
  uint64_t stepFactor = 2;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  DTypeKind dtype = DTypeKind::F32;
  OpKind op = OpKind::Sum;
  int root = 0;
  bool csv = false;
  int timeoutSeconds = 120;
};

/// Parses \p argv into \p opts. Returns an error message, or "" on success;
/// `--help` prints the usage and sets \p helpShown.
std::string parseOptions(int argc, char **argv, const PeerSpec &spec, Options &opts,
                         bool &helpShown);

/// Parses a byte count with an optional K, M or G suffix (powers of 1024).
bool parseBytes(const std::string &text, uint64_t &bytes);

/// The buffers of one collective at one "size" (nccl-tests' meaning), per rank.
struct SizeInfo {
  /// The reported size: the buffer (allreduce, broadcast, reduce), the whole
  /// output (allgather), the input (reducescatter), the send buffer (alltoall).
  uint64_t sizeBytes = 0;
  /// Elements of the reported size.
  uint64_t count = 0;
  /// Elements each rank sends and receives.
  uint64_t sendCount = 0;
  uint64_t recvCount = 0;
  /// Elements per rank block (allgather, reducescatter, alltoall), else count.
  uint64_t blockCount = 0;
};

/// The buffers of \p coll for a requested size, rounded down to whole
/// elements (and whole blocks of \p nranks); count 0 when too small.
SizeInfo sizeFor(CollKind coll, uint64_t bytes, DTypeKind dtype, int nranks);

/// The requested sizes: minBytes, times stepFactor, up to maxBytes.
std::vector<uint64_t> sizeList(const Options &opts);

/// The largest send and receive buffers any requested size needs, in bytes.
uint64_t maxBufferBytes(const Options &opts, int nranks);

/// Writes rank \p rank's input of \p coll into \p send (sendCount elements).
/// Values are small integers distinct per (rank, element), so that sums and
/// products are exact in every type.
void fillInput(const Options &opts, CollKind coll, const SizeInfo &size, int rank, int nranks,
               void *send);

/// Fills \p count elements with a value no collective produces.
void poison(DTypeKind dtype, void *buf, uint64_t count);

/// Counts the wrong elements of rank \p rank's result in \p recv (recvCount
/// elements; for reduce, only the root's result is checked).
uint64_t countWrong(const Options &opts, CollKind coll, const SizeInfo &size, int rank, int nranks,
                    const void *recv);

/// One measurement: time per iteration (the maximum over ranks of each
/// rank's average) and the wrong elements summed over ranks.
struct Measurement {
  PlacementKind placement;
  double timeUs;
  uint64_t wrong;
};

/// Prints results on rank 0, as CSV (`--csv`) or as an nccl-tests table.
class Reporter {
public:
  Reporter(const Options &opts, int nranks) : opts(opts), nranks(nranks) {}

  /// Prints the CSV header, or the table's title for \p coll.
  void begin(CollKind coll, const std::string &algorithm);
  /// Prints one size: a CSV row per measurement, or one table line.
  void size(CollKind coll, const std::string &algorithm, const SizeInfo &size,
            const std::vector<Measurement> &results);
  /// Prints the table's summary; returns the wrong elements seen in all.
  uint64_t end();

private:
  const Options &opts;
  int nranks;
  bool headerDone = false;
  uint64_t totalWrong = 0;
  double busbwSum = 0;
  int busbwRows = 0;
};

/// Runs \p body(rank) in \p nranks forked processes (pinned to a core each
/// with \p bind) and waits for them all. A rank that fails (exit status 2 or
/// more, a signal) gets the others killed. Returns 0 when every rank
/// returned 0, 1 when the worst was a wrong result (1), else 2.
int runForked(const char *program, int nranks, bool bind, int timeoutSeconds,
              const std::function<int(int rank)> &body);

/// Seconds of a monotonic clock.
double nowSeconds();

} // namespace collpeer

#endif // COLL_BENCH_PEERS_PEERCOMMON_H
