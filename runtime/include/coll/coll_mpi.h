/*===- coll_mpi.h - A Collc communicator for a job of mpirun ----*- C -*-===*/
/** \file
 * collCommInitMpi(): every rank of an MPI communicator joins one Collc job
 * (coll.h, collCommInitRankStore), its rank that of the MPI communicator.
 * Rank 0 serves the store the ranks meet through, at the address named by
 * the environment's COLL_STORE_HOST (default: this host's name) on a port
 * the kernel picks, and tells the others with MPI_Bcast; a barrier ends its
 * service. Header-only: include it in a program that uses MPI and link
 * the Collc runtime; the runtime itself never depends on MPI.
 */
#ifndef COLL_COLL_MPI_H
#define COLL_COLL_MPI_H

#include "coll/coll.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Joins job \p jobName (the same on every rank) as rank MPI_Comm_rank of
 * MPI_Comm_size of \p mpiComm; collective over \p mpiComm. \p config may
 * be NULL (the defaults). */
static inline collResult_t collCommInitMpi(MPI_Comm mpiComm, const char *jobName,
                                           const collShmConfig_t *config, collComm_t *comm) {
  int rank = 0, size = 0, port = 0;
  char address[300];
  collStoreServer_t server = NULL;
  collResult_t started = collSuccess, joined;
  if (MPI_Comm_rank(mpiComm, &rank) != MPI_SUCCESS || MPI_Comm_size(mpiComm, &size) != MPI_SUCCESS)
    return collInvalidArgument;
  memset(address, 0, sizeof address);
  if (rank == 0) {
    const char *host = getenv("COLL_STORE_HOST");
    char name[256];
    memset(name, 0, sizeof name);
    if (!host || !*host) {
      gethostname(name, sizeof name - 1);
      host = name;
    }
    started = collStoreServerStart(0, &server, &port);
    if (started == collSuccess)
      snprintf(address, sizeof address, "%s:%d", host, port);
  }
  /* An empty address: rank 0 could not serve; every rank fails alike. */
  MPI_Bcast(address, (int)sizeof address, MPI_CHAR, 0, mpiComm);
  if (!address[0])
    return rank == 0 ? started : collSystemError;
  joined = collCommInitRankStore(jobName, address, size, rank, config, comm);
  MPI_Barrier(mpiComm);
  collStoreServerStop(server);
  return joined;
}

#ifdef __cplusplus
}
#endif

#endif /* COLL_COLL_MPI_H */
