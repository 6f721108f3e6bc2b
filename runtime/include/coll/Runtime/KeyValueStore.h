//===- KeyValueStore.h - Where the ranks of a job meet ---------*- C++ -*-===//
/// \file
/// The ranks of a job that spans hosts meet through a key-value store
/// before anything else connects them (ProcessGroup::create() with a
/// store): TcpStore for `coll-run` and `coll-perf`, PyTorch's c10d store
/// under PyTorch, MPI under mpirun. A store is anything with set() and a
/// get() that waits for the key.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_KEYVALUESTORE_H
#define COLL_RUNTIME_KEYVALUESTORE_H

#include "coll/Runtime/Status.h"

#include <string>

namespace coll {

/// A key-value store shared by the ranks of a job.
class KeyValueStore {
public:
  virtual ~KeyValueStore() = default;
  /// Sets \p key to \p value (any bytes), for every rank to read.
  virtual Status set(const std::string &key, const std::string &value) = 0;
  /// The value of \p key, once some rank has set it; an error when it is
  /// not set within the store's own timeout, or the store is gone.
  virtual Result<std::string> get(const std::string &key) = 0;
};

} // namespace coll

#endif // COLL_RUNTIME_KEYVALUESTORE_H
