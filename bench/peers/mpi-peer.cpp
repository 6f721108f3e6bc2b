//===- mpi-peer.cpp - MPI's collectives, timed like nccl-tests ------------===//
//
// Times MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block,
// MPI_Alltoall, MPI_Bcast and MPI_Reduce on the ranks mpirun starts, out of
// place and in place (MPI_IN_PLACE; MPI_Bcast has one buffer, so in place
// only):
//
//   mpirun -np 2 mpi-peer --coll allreduce -b 4K -e 64M -f 4 -n 20 -w 5 -c 1 --csv
//   mpi-peer --probe-cma    (no mpirun: may ranks read each other's memory?)
//
//===----------------------------------------------------------------------===//

#include "PeerCommon.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mpi.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace collpeer;

namespace {

int gRank = 0;

/// Ends the whole job with the failing call and MPI's message.
void mpiCheck(int rc, const char *what) {
  if (rc == MPI_SUCCESS)
    return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
    std::snprintf(msg, sizeof(msg), "error %d", rc);
  std::fprintf(stderr, "mpi-peer: rank %d: %s failed: %s\n", gRank, what, msg);
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}

#define COLL_MPI_CHECK(call) mpiCheck((call), #call)

/// Whether a forked child may read its parent's memory with
/// process_vm_readv: the permission (ptrace access to a process that is not
/// a descendant) that Open MPI's shared-memory transport needs between ranks
/// for its single-copy (CMA) path. Containers often deny it.
int probeCma() {
  static volatile uint64_t secret = 0x636f6c6c63u;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "mpi-peer: fork: %s\n", std::strerror(errno));
    return 2;
  }
  if (pid == 0) {
    uint64_t value = 0;
    iovec local{&value, sizeof(value)};
    iovec remote{const_cast<uint64_t *>(&secret), sizeof(value)};
    ssize_t n = process_vm_readv(parent, &local, 1, &remote, 1, 0);
    if (n == static_cast<ssize_t>(sizeof(value)) && value == secret)
      _exit(0);
    _exit(n < 0 ? (errno & 0x7f) + 1 : 127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      std::fprintf(stderr, "mpi-peer: waitpid: %s\n", std::strerror(errno));
      return 2;
    }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 127;
  if (code == 0) {
    std::printf("cma: permitted\n");
    return 0;
  }
  std::printf("cma: not permitted (process_vm_readv: %s); run mpirun with --mca "
              "btl_vader_single_copy_mechanism none\n",
              code == 127 ? "wrong data" : std::strerror(code - 1));
  return 3;
}

MPI_Datatype mpiType(DTypeKind dtype) {
  switch (dtype) {
  case DTypeKind::F32:
    return MPI_FLOAT;
  case DTypeKind::F64:
    return MPI_DOUBLE;
  case DTypeKind::I32:
    return MPI_INT;
  }
  return MPI_FLOAT;
}

MPI_Op mpiOp(OpKind op) {
  switch (op) {
  case OpKind::Sum:
    return MPI_SUM;
  case OpKind::Prod:
    return MPI_PROD;
  case OpKind::Min:
    return MPI_MIN;
  case OpKind::Max:
    return MPI_MAX;
  }
  return MPI_SUM;
}

/// One rank's view of one timed configuration.
struct Run {
  const Options &opts;
  CollKind coll;
  PlacementKind placement;
  SizeInfo size;
  int rank;
  int nranks;
  char *send;
  char *recv;

  /// Writes the inputs where this placement reads them, and poisons outputs.
  void prepare() const {
    size_t es = dtypeSize(opts.dtype);
    if (placement == PlacementKind::OutOfPlace) {
      fillInput(opts, coll, size, rank, nranks, send);
      poison(opts.dtype, recv, size.recvCount);
      return;
    }
    if (coll == CollKind::AllGather) {
      poison(opts.dtype, recv, size.recvCount);
      fillInput(opts, coll, size, rank, nranks,
                recv + static_cast<uint64_t>(rank) * size.blockCount * es);
      return;
    }
    fillInput(opts, coll, size, rank, nranks, recv);
  }

  void once() const {
    MPI_Datatype t = mpiType(opts.dtype);
    MPI_Op op = mpiOp(opts.op);
    MPI_Comm comm = MPI_COMM_WORLD;
    int count = static_cast<int>(size.count);
    int block = static_cast<int>(size.blockCount);
    bool inPlace = placement == PlacementKind::InPlace;
    switch (coll) {
    case CollKind::AllReduce:
      COLL_MPI_CHECK(MPI_Allreduce(inPlace ? MPI_IN_PLACE : send, recv, count, t, op, comm));
      break;
    case CollKind::AllGather:
      if (inPlace)
        COLL_MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, block, t, comm));
      else
        COLL_MPI_CHECK(MPI_Allgather(send, block, t, recv, block, t, comm));
      break;
    case CollKind::ReduceScatter:
      COLL_MPI_CHECK(
          MPI_Reduce_scatter_block(inPlace ? MPI_IN_PLACE : send, recv, block, t, op, comm));
      break;
    case CollKind::AllToAll:
      if (inPlace)
        COLL_MPI_CHECK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, block, t, comm));
      else
        COLL_MPI_CHECK(MPI_Alltoall(send, block, t, recv, block, t, comm));
      break;
    case CollKind::Broadcast:
      COLL_MPI_CHECK(MPI_Bcast(recv, count, t, opts.root, comm));
      break;
    case CollKind::Reduce:
      if (!inPlace)
        COLL_MPI_CHECK(MPI_Reduce(send, recv, count, t, op, opts.root, comm));
      else if (rank == opts.root)
        COLL_MPI_CHECK(MPI_Reduce(MPI_IN_PLACE, recv, count, t, op, opts.root, comm));
      else
        COLL_MPI_CHECK(MPI_Reduce(recv, nullptr, count, t, op, opts.root, comm));
      break;
    }
  }

  /// Times the iterations; returns the slowest rank's average, and the wrong
  /// elements of all ranks in \p wrong.
  double measure(uint64_t &wrong) const {
    prepare();
    for (int i = 0; i < opts.warmup; ++i)
      once();
    COLL_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double start = MPI_Wtime();
    for (int i = 0; i < opts.iters; ++i)
      once();
    double localUs = (MPI_Wtime() - start) / opts.iters * 1e6;
    double maxUs = 0;
    COLL_MPI_CHECK(MPI_Allreduce(&localUs, &maxUs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));

    uint64_t localWrong = 0;
    wrong = 0;
    if (opts.check) {
      prepare();
      once();
      localWrong = countWrong(opts, coll, size, rank, nranks, recv);
    }
    COLL_MPI_CHECK(MPI_Allreduce(&localWrong, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
    return maxUs;
  }
};

char *allocate(uint64_t bytes) {
  void *p = nullptr;
  size_t rounded = (bytes + 4095) / 4096 * 4096 + 4096;
  int rc = posix_memalign(&p, 4096, rounded);
  if (rc != 0) {
    std::fprintf(stderr, "mpi-peer: rank %d: cannot allocate %zu bytes: %s\n", gRank, rounded,
                 std::strerror(rc));
    MPI_Abort(MPI_COMM_WORLD, 2);
    std::exit(2);
  }
  std::memset(p, 0, rounded);
  return static_cast<char *>(p);
}

} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--probe-cma") == 0)
      return probeCma();

  PeerSpec spec;
  spec.program = "mpi-peer";
  spec.colls = {CollKind::AllReduce, CollKind::AllGather, CollKind::ReduceScatter,
                CollKind::AllToAll,  CollKind::Broadcast, CollKind::Reduce};
  spec.notes = "Run under mpirun (ranks: -np). --probe-cma, alone, says whether ranks may use\n"
               "cross-memory attach (else: mpirun --mca btl_vader_single_copy_mechanism none).";

  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    std::fprintf(stderr, "mpi-peer: MPI_Init failed\n");
    return 2;
  }
  COLL_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int nranks = 0;
  COLL_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &gRank));
  COLL_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));

  Options opts;
  bool help = false;
  std::string err = parseOptions(argc, argv, spec, opts, help);
  if (err.empty() && opts.root >= nranks)
    err = "root " + std::to_string(opts.root) + " is not a rank";
  if (err.empty() && maxBufferBytes(opts, nranks) / dtypeSize(opts.dtype) > INT_MAX)
    err = "-e is too large for MPI's int counts";
  if (!err.empty() || help) {
    if (!err.empty() && gRank == 0)
      std::fprintf(stderr, "mpi-peer: %s\n", err.c_str());
    MPI_Finalize();
    return err.empty() ? 0 : 2;
  }

  uint64_t bytes = maxBufferBytes(opts, nranks);
  char *send = allocate(bytes);
  char *recv = allocate(bytes);

  Reporter reporter(opts, nranks);
  uint64_t wrong = 0;
  for (CollKind coll : opts.colls) {
    if (gRank == 0)
      reporter.begin(coll, "openmpi");
    for (uint64_t b : sizeList(opts)) {
      SizeInfo size = sizeFor(coll, b, opts.dtype, nranks);
      if (size.count == 0)
        continue;
      std::vector<Measurement> results;
      for (PlacementKind p : {PlacementKind::OutOfPlace, PlacementKind::InPlace}) {
        if (coll == CollKind::Broadcast && p == PlacementKind::OutOfPlace)
          continue;
        Run run{opts, coll, p, size, gRank, nranks, send, recv};
        Measurement m{p, 0, 0};
        m.timeUs = run.measure(m.wrong);
        results.push_back(m);
      }
      if (gRank == 0)
        reporter.size(coll, "openmpi", size, results);
    }
    if (gRank == 0)
      wrong = reporter.end();
  }
  COLL_MPI_CHECK(MPI_Bcast(&wrong, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD));
  std::free(send);
  std::free(recv);
  if (MPI_Finalize() != MPI_SUCCESS) {
    std::fprintf(stderr, "mpi-peer: rank %d: MPI_Finalize failed\n", gRank);
    return 2;
  }
  return wrong == 0 ? 0 : 1;
}
