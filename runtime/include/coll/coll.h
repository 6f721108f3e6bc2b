/*===- coll.h - The runtime's C API -----------------------------*- C -*-===*/
/** \file
 * The C API of the Collc runtime, in the style of NCCL: load a plan that
 * collc compiled, create a world of N ranks in this process, give each
 * rank's thread a communicator, and call collExecute() on every rank with
 * the same plan and the rank's own buffers. (Or make each rank a process:
 * collCommInitRankShm.) The calls meet, run every rank
 * of the plan together, and each returns when its rank's results are in
 * place. Every function returns a collResult_t, checks every pointer it is
 * given, and never lets a C++ exception out. docs/runtime.md has a complete
 * program.
 *
 * Counts follow NCCL: count is the number of elements of one rank's
 * buffer for allreduce, broadcast and reduce; of the input for allgather
 * and gather; of the output for reducescatter and scatter; of one block
 * for alltoall. A call is in place when sendbuf == recvbuf (allreduce,
 * broadcast, reduce).
 */
#ifndef COLL_COLL_H
#define COLL_COLL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** What a call returned. */
typedef enum {
  collSuccess = 0,
  collInvalidArgument = 1, /**< A null pointer, a bad rank, type, operator, count... */
  collInvalidPlan = 2,     /**< The plan is malformed, or does not fit the world. */
  collSystemError = 3,     /**< A file could not be read, a thread could not start. */
  collTimeout = 4,         /**< Ranks did not arrive in time, or the run stopped moving. */
  collMismatch = 5,        /**< The ranks called with different plans or arguments. */
  collInternalError = 6,   /**< A bug in the runtime. */
  collRemoteError = 7,     /**< Another rank's process failed or died (shared-memory ranks). */
  collNumResults = 8
} collResult_t;

/** Element types, numbered as NCCL's ncclDataType_t. */
typedef enum {
  collInt8 = 0,
  collChar = 0,
  collUint8 = 1,
  collInt32 = 2,
  collInt = 2,
  collUint32 = 3,
  collInt64 = 4,
  collUint64 = 5,
  collFloat16 = 6,
  collHalf = 6,
  collFloat32 = 7,
  collFloat = 7,
  collFloat64 = 8,
  collDouble = 8,
  collBfloat16 = 9,
  collNumTypes = 10
} collDataType_t;

/** Reduction operators, numbered as NCCL's ncclRedOp_t. collAvg is a sum
 * divided by the number of ranks (integers truncate toward zero). */
typedef enum {
  collSum = 0,
  collProd = 1,
  collMax = 2,
  collMin = 3,
  collAvg = 4,
  collNumOps = 5
} collRedOp_t;

/** The collective a plan implements. */
typedef enum {
  collAllReduce = 0,
  collAllGather = 1,
  collReduceScatter = 2,
  collBroadcast = 3,
  collReduce = 4,
  collGather = 5,
  collScatter = 6,
  collAllToAll = 7,
  collCustom = 8
} collCollective_t;

/** Options of a communicator whose ranks are processes (collCommInitRankShm).
 * Fill it with collShmConfigInit() first, then change what you need. */
typedef struct {
  double setupTimeoutSeconds;     /**< Waiting for the peers to join, and to call. */
  double timeoutSeconds;          /**< A run that makes no progress this long fails. */
  double livenessIntervalSeconds; /**< How often a waiting rank checks its peers. */
  size_t sliceElements;           /**< Elements of a chunk per pass of the program. */
  int workers;                    /**< Worker threads of the rank; 0: one per threadblock. */
  /** The most memory a call of this rank may allocate besides its buffers
   * (scratch, FIFOs, a copy of its input). 0: the default, 8 times the
   * rank's buffer bytes plus 256 MiB; collNoMemoryLimit: no cap. */
  size_t memoryLimitBytes;
  /** The protocol of the connections (LL, LL128: flags in the data, for
   * small messages; docs/runtime.md, "Protocols"): NULL or "auto" for the
   * plan's, "Simple", "LL", "LL128" for every call, or thresholds by the
   * call's bytes per rank, "LL:4K,LL128:256K". Every rank must choose
   * alike. */
  const char *protocol;
} collShmConfig_t;

/** Options of a world of ranks in this process (collWorldCreateConfig).
 * Fill it with collWorldConfigInit() first, then change what you need. */
typedef struct {
  double rendezvousTimeoutSeconds; /**< Waiting for every rank to call. */
  double timeoutSeconds;           /**< A run that makes no progress this long fails. */
  size_t sliceElements;            /**< Elements of a chunk per pass of the program. */
  int workersPerRank;              /**< Worker threads per rank; 0: one per threadblock. */
  /** The most memory a call may allocate besides the buffers of its ranks
   * (scratch, FIFOs, copies of inputs). 0: the default, 8 times the
   * buffer bytes of all ranks plus 256 MiB; collNoMemoryLimit: no cap. */
  size_t memoryLimitBytes;
  /** The protocol of the connections (LL, LL128: flags in the data, for
   * small messages; docs/runtime.md, "Protocols"): NULL or "auto" for the
   * plan's, "Simple", "LL", "LL128" for every call, or thresholds by the
   * call's bytes per rank, "LL:4K,LL128:256K". Every rank must choose
   * alike. */
  const char *protocol;
} collWorldConfig_t;

/** A memoryLimitBytes that removes the cap. */
#define collNoMemoryLimit ((size_t)-1)

/** A loaded plan; immutable, usable by every rank's thread at once. */
typedef struct collPlan *collPlan_t;
/** N ranks in this process. */
typedef struct collWorld *collWorld_t;
/** One rank of a world; used by one thread at a time. */
typedef struct collComm *collComm_t;

/** Facts about a plan. name points into the plan and lives as long as it. */
typedef struct {
  collCollective_t collective;
  int nranks;
  int root;    /**< Rooted collectives only. */
  int inplace; /**< Non-zero when the plan works in one aliased buffer. */
  const char *name;
  /** Buffer sizes in units of collExecute's count: a rank's input holds
   * inputUnits * count elements and its output outputUnits * count (1 and
   * nranks for allgather, ...; for a user-declared collective its input and
   * output chunks over their greatest common divisor). */
  size_t inputUnits;
  size_t outputUnits;
} collPlanInfo_t;

/** A short, static description of \p result ("invalid argument", ...). */
const char *collGetErrorString(collResult_t result);

/** The detailed message of the last failed call: of \p comm's last
 * collExecute() when \p comm is not NULL, else of the last failed call made
 * by this thread. "" when there was none. Valid until the next call that
 * fails (on \p comm, or in this thread). */
const char *collGetLastError(collComm_t comm);

/** Loads and validates the plan file \p path into *plan. */
collResult_t collPlanLoad(const char *path, collPlan_t *plan);
/** Parses and validates \p size bytes of a plan at \p data into *plan (the
 * bytes are copied). */
collResult_t collPlanLoadMemory(const void *data, size_t size, collPlan_t *plan);
/** Frees \p plan; NULL is ignored. No call may be using it. Any later use
 * of \p plan, a second free included, is collInvalidArgument. */
collResult_t collPlanFree(collPlan_t plan);
/** Fills *info with \p plan's facts. */
collResult_t collPlanGetInfo(collPlan_t plan, collPlanInfo_t *info);

/** Creates a world of \p nranks ranks in this process. */
collResult_t collWorldCreate(int nranks, collWorld_t *world);
/** Fills *config with the defaults: 300 s to meet, 30 s without progress,
 * slices of 16384 elements, one worker per rank, the default memory cap. */
collResult_t collWorldConfigInit(collWorldConfig_t *config);
/** collWorldCreate() with options; \p config may be NULL (the defaults). */
collResult_t collWorldCreateConfig(int nranks, const collWorldConfig_t *config, collWorld_t *world);
/** Releases the caller's reference to \p world; NULL is ignored. The world
 * lives on until its last communicator is destroyed. */
collResult_t collWorldDestroy(collWorld_t world);

/** Creates \p rank's communicator of \p world; a rank has at most one. */
collResult_t collCommInitRank(collWorld_t world, int rank, collComm_t *comm);
/** Fills *config with the defaults: 60 s to set up, 30 s without progress,
 * peers checked every 0.05 s, slices of 16384 elements, one worker, the
 * default memory cap. */
collResult_t collShmConfigInit(collShmConfig_t *config);

/** Joins job \p jobName (1 to 200 characters of A-Z a-z 0-9 _ -) as rank
 * \p rank of \p nranks, each rank its own process on this host, and waits
 * until every rank has joined. The ranks meet through POSIX shared memory
 * named after the job (docs/runtime.md). \p config may be NULL (the
 * defaults). collExecute() then runs this process's rank; a rank that dies
 * or fails makes the others fail with collRemoteError. */
collResult_t collCommInitRankShm(const char *jobName, int nranks, int rank,
                                 const collShmConfig_t *config, collComm_t *comm);

/** A key-value store server that the ranks of a job across hosts meet
 * through (collCommInitRankStore). */
typedef struct collStoreServer *collStoreServer_t;

/** Serves a store on TCP port \p port of every interface of this host (0:
 * one the kernel picks, returned in *boundPort when not NULL). One process
 * of the job (usually rank 0's) serves it until every rank's
 * collCommInitRankStore() has returned (a barrier of the job's own, or
 * the job's end). */
collResult_t collStoreServerStart(int port, collStoreServer_t *server, int *boundPort);
/** Stops \p server; NULL is ignored. */
collResult_t collStoreServerStop(collStoreServer_t server);

/** Joins job \p jobName as rank \p rank of \p nranks whose ranks may be
 * on several hosts, meeting through the store at \p storeAddress
 * ("host:port", see collStoreServerStart). Ranks on one host share memory;
 * ranks on different hosts (or network namespaces; COLL_HOST names a host
 * explicitly) talk over the network (UCX). Otherwise as
 * collCommInitRankShm; a job name is used once per store. coll_mpi.h's
 * collCommInitMpi() does all this for a job launched by mpirun. */
collResult_t collCommInitRankStore(const char *jobName, const char *storeAddress, int nranks,
                                   int rank, const collShmConfig_t *config, collComm_t *comm);

/** Allocates \p size bytes of shared memory (page aligned, zeroed) for
 * buffers of \p comm's rank, which must come from collCommInitRankShm or
 * collCommInitRankStore. */
collResult_t collMemAlloc(collComm_t comm, size_t size, void **ptr);
/** Frees what collMemAlloc() returned; NULL is ignored. What is left is
 * freed with the communicator. */
collResult_t collMemFree(collComm_t comm, void *ptr);

/** Destroys \p comm, freeing its rank; NULL is ignored. Any later use of
 * \p comm, a second destroy included, is collInvalidArgument. */
collResult_t collCommDestroy(collComm_t comm);
/** *rank receives \p comm's rank. */
collResult_t collCommUserRank(collComm_t comm, int *rank);
/** *count receives the number of ranks of \p comm's world. */
collResult_t collCommCount(collComm_t comm, int *count);

/** Runs \p comm's rank of \p plan on its buffers; blocks until every rank
 * of the world has called and this rank's results are in \p recvbuf. Every
 * rank must pass the same plan (by content), count, type and operator, or
 * every rank fails with collMismatch. A buffer from collMemAlloc() smaller
 * than the call needs fails every rank with collInvalidArgument; a call
 * that would allocate more than the memory cap, with collSystemError. */
collResult_t collExecute(const void *sendbuf, void *recvbuf, size_t count, collDataType_t datatype,
                         collRedOp_t op, collPlan_t plan, collComm_t comm);

/* GPUs: one rank per GPU, over an NCCL communicator. ncclComm_t and
 * cudaStream_t are pointers to these structures, so this header needs
 * neither NCCL's nor CUDA's; the functions below come with the runtime's
 * NCCL library (libcoll_nccl), built where CUDA and NCCL are found. */
struct ncclComm;
struct CUstream_st;

/** Creates *comm, this process's rank of \p plan over \p ncclComm (an
 * ncclComm_t: the plan's ranks are its ranks, one per GPU, any number of
 * processes; peers on one node through CUDA IPC, peers on other nodes
 * through NCCL symmetric memory and GIN). Collective: every rank of \p ncclComm calls it
 * with the same plan (whole, or loaded for its rank), or every rank fails
 * with collMismatch and a message naming the ranks that differ. The
 * communicator runs that plan only; destroying it is collective too, and
 * must happen before \p ncclComm is destroyed. Every rank must then make
 * the same sequence of calls with the same counts and data types. */
collResult_t collCommInitNccl(collComm_t *comm, collPlan_t plan, struct ncclComm *ncclComm);

/** Enqueues \p comm's rank of its plan on \p stream (a cudaStream_t; NULL:
 * the default stream) with device buffers of the rank's GPU, and returns.
 * Device-side failures (a peer that never sends: a timeout) are reported
 * by collCommStreamWait() and collCommGetAsyncError(); after one, the
 * communicator cannot run again. \p comm must come from collCommInitNccl.
 * collExecute() on such a communicator runs on the default stream and
 * waits. */
collResult_t collExecuteAsync(const void *sendbuf, void *recvbuf, size_t count,
                              collDataType_t datatype, collRedOp_t op, collComm_t comm,
                              struct CUstream_st *stream);

/** Waits for \p stream, then reports a device-side failure of \p comm's
 * runs. */
collResult_t collCommStreamWait(collComm_t comm, struct CUstream_st *stream);

/** Sets *asyncError to the result of a device-side failure of \p comm's
 * finished runs (collSuccess when none, or while they are in flight),
 * without waiting; its message is collGetLastError(NULL). Other
 * communicators have no asynchronous errors. */
collResult_t collCommGetAsyncError(collComm_t comm, collResult_t *asyncError);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLL_COLL_H */
