/* capi_test.c - an allreduce on 4 ranks through the C API (coll/coll.h).
 *
 * Usage: capi_test PLAN.bin, where PLAN.bin is a 4-rank allreduce compiled
 * by collc, e.g.  collc stdlib/ring_allreduce.coll --nranks 4 --emit=plan -o ring4.bin
 * Each rank is a pthread with its own communicator; every element of every
 * rank's result is checked. Exits 0 on success, 1 on any error, and 77
 * (skipped) when no plan is given or the file does not exist. */
#include <coll/coll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NRANKS 4
#define COUNT 100003

/* Prints a failed call with the result's name and the detailed message. */
#define CHECK(call, comm)                                                                          \
  do {                                                                                             \
    collResult_t res_ = (call);                                                                    \
    if (res_ != collSuccess) {                                                                     \
      fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, collGetErrorString(res_), \
              collGetLastError(comm));                                                             \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

struct Rank {
  int rank;
  collWorld_t world;
  collPlan_t plan;
  int status; /* 0: every element right. */
};

static void *runRank(void *arg) {
  struct Rank *self = (struct Rank *)arg;
  collComm_t comm = NULL;
  float *send = malloc(COUNT * sizeof(float));
  float *recv = malloc(COUNT * sizeof(float));
  self->status = 1;
  if (!send || !recv) {
    fprintf(stderr, "rank %d: out of memory\n", self->rank);
    goto done;
  }
  /* Distinct per (rank, element), small integers: sums are exact. */
  for (size_t i = 0; i < COUNT; ++i)
    send[i] = (float)((i % 1000) * NRANKS + (size_t)self->rank);

  collResult_t res = collCommInitRank(self->world, self->rank, &comm);
  if (res != collSuccess) {
    fprintf(stderr, "rank %d: collCommInitRank: %s (%s)\n", self->rank, collGetErrorString(res),
            collGetLastError(NULL));
    goto done;
  }
  res = collExecute(send, recv, COUNT, collFloat32, collSum, self->plan, comm);
  if (res != collSuccess) {
    fprintf(stderr, "rank %d: collExecute: %s (%s)\n", self->rank, collGetErrorString(res),
            collGetLastError(comm));
    goto done;
  }
  size_t wrong = 0;
  for (size_t i = 0; i < COUNT; ++i) {
    /* sum over r of ((i % 1000) * N + r) */
    float want = (float)((i % 1000) * NRANKS * NRANKS + NRANKS * (NRANKS - 1) / 2);
    if (recv[i] != want && wrong++ == 0)
      fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", self->rank, i, recv[i], want);
  }
  if (wrong)
    fprintf(stderr, "rank %d: %zu of %d elements wrong\n", self->rank, wrong, COUNT);
  else
    self->status = 0;
done:
  collCommDestroy(comm);
  free(send);
  free(recv);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PLAN.bin (no plan given: skipped)\n", argv[0]);
    return 77;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    fprintf(stderr, "%s: no plan at %s: skipped\n", argv[0], argv[1]);
    return 77;
  }
  fclose(f);

  collPlan_t plan;
  CHECK(collPlanLoad(argv[1], &plan), NULL);
  collPlanInfo_t info;
  CHECK(collPlanGetInfo(plan, &info), NULL);
  if (info.collective != collAllReduce || info.nranks != NRANKS) {
    fprintf(stderr, "%s: %s is not an allreduce on %d ranks\n", argv[0], argv[1], NRANKS);
    collPlanFree(plan);
    return 1;
  }
  collWorld_t world;
  CHECK(collWorldCreate(NRANKS, &world), NULL);

  struct Rank ranks[NRANKS];
  pthread_t threads[NRANKS];
  for (int r = 0; r < NRANKS; ++r) {
    ranks[r].rank = r;
    ranks[r].world = world;
    ranks[r].plan = plan; /* One plan for every rank's thread. */
    if (pthread_create(&threads[r], NULL, runRank, &ranks[r]) != 0) {
      fprintf(stderr, "cannot start thread %d\n", r);
      return 1;
    }
  }
  int failed = 0;
  for (int r = 0; r < NRANKS; ++r) {
    pthread_join(threads[r], NULL);
    failed |= ranks[r].status;
  }

  /* Errors are values, never crashes: a null pointer is reported. */
  collResult_t res = collPlanLoad(NULL, &plan);
  if (res != collInvalidArgument) {
    fprintf(stderr, "collPlanLoad(NULL) returned %s\n", collGetErrorString(res));
    failed = 1;
  } else {
    printf("expected error: %s: %s\n", collGetErrorString(res), collGetLastError(NULL));
  }

  if (!failed)
    printf("%s: allreduce of %d floats on %d ranks: every element right\n", info.name, COUNT,
           NRANKS);
  CHECK(collWorldDestroy(world), NULL);
  CHECK(collPlanFree(plan), NULL); /* info.name dies with the plan. */
  return failed;
}
