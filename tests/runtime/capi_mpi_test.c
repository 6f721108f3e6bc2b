/*===- capi_mpi_test.c - collCommInitMpi under mpirun ---------------------===*/
/*
 * Run by mpirun (any number of ranks) with a ring allreduce plan for that
 * many ranks; COLL_HOST may differ per rank (several hosts on one machine):
 * every rank joins through collCommInitMpi(), runs the allreduce on data
 * distinct per rank and element, a few times, and checks every element;
 * then checks that a malformed store address is refused. Exit status 0 on
 * success, 1 otherwise (with the reason on stderr).
 */
#include "coll/coll_mpi.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "rank %d: ", rank);                                                          \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                                \
    }                                                                                              \
  } while (0)

int main(int argc, char **argv) {
  int rank = 0, size = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(argc == 2, "usage: capi_mpi_test PLAN");
  collPlan_t plan = NULL;
  CHECK(collPlanLoad(argv[1], &plan) == collSuccess, "%s", collGetLastError(NULL));
  collPlanInfo_t info;
  CHECK(collPlanGetInfo(plan, &info) == collSuccess && info.nranks == size,
        "the plan is not for %d ranks", size);

  collShmConfig_t config;
  collShmConfigInit(&config);
  config.setupTimeoutSeconds = 30;
  config.timeoutSeconds = 30;
  collComm_t comm = NULL;
  collResult_t r = collCommInitMpi(MPI_COMM_WORLD, "capi-mpi", &config, &comm);
  CHECK(r == collSuccess, "collCommInitMpi: %s: %s", collGetErrorString(r), collGetLastError(NULL));
  int commRank = -1, commSize = -1;
  collCommUserRank(comm, &commRank);
  collCommCount(comm, &commSize);
  CHECK(commRank == rank && commSize == size, "the communicator is rank %d of %d", commRank,
        commSize);

  /* Exact in float: small integers, distinct per (rank, element). */
  const size_t counts[] = {0, 1, 1000, 300001};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
    size_t n = counts[c];
    float *in = malloc((n ? n : 1) * sizeof(float));
    float *out = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; ++i) {
      in[i] = (float)((rank + 1) * 1000 + (int)(i % 997));
      out[i] = -1;
    }
    for (int iter = 0; iter < 3; ++iter) {
      r = collExecute(in, out, n, collFloat32, collSum, plan, comm);
      CHECK(r == collSuccess, "collExecute of %zu: %s", n, collGetLastError(comm));
      for (size_t i = 0; i < n; ++i) {
        float want = (float)(1000 * size * (size + 1) / 2 + size * (int)(i % 997));
        CHECK(out[i] == want, "count %zu element %zu is %g, expected %g", n, i, out[i], want);
      }
    }
    free(in);
    free(out);
  }

  collComm_t bad = NULL;
  r = collCommInitRankStore("capi-mpi-bad", "no-port", size, rank, &config, &bad);
  CHECK(r == collInvalidArgument && bad == NULL, "a malformed address gave %s",
        collGetErrorString(r));
  CHECK(collStoreServerStop(NULL) == collSuccess, "stopping no server");

  collCommDestroy(comm);
  collPlanFree(plan);
  MPI_Finalize();
  if (rank == 0)
    printf("capi_mpi_test: %d ranks right\n", size);
  return 0;
}
