//===- gloo-peer.cpp - Gloo's collectives, timed like nccl-tests ----------===//
//
// Times Gloo's allreduce (ring or bcube through gloo::allreduce, out of
// place and in place; halving-doubling through the AllreduceHalvingDoubling
// algorithm, in place only), allgather and broadcast. The program forks its
// own ranks, which meet through a FileStore in a fresh temporary directory
// and talk over Gloo's TCP transport on the loopback interface.
//
//   gloo-peer --nranks 2 --coll allreduce --algorithm ring -b 4K -e 64M -f 4 --csv
//
//===----------------------------------------------------------------------===//

#include "PeerCommon.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <functional>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <memory>
#include <netdb.h>
#include <stdexcept>
#include <unistd.h>

using namespace collpeer;

namespace {

using ReduceFunc = void (*)(void *, const void *, const void *, size_t);

template <typename T> ReduceFunc reduceFunc(OpKind op) {
  switch (op) {
  case OpKind::Sum:
    return static_cast<ReduceFunc>(&gloo::sum<T>);
  case OpKind::Prod:
    return static_cast<ReduceFunc>(&gloo::product<T>);
  case OpKind::Min:
    return static_cast<ReduceFunc>(&gloo::min<T>);
  case OpKind::Max:
    return static_cast<ReduceFunc>(&gloo::max<T>);
  }
  return nullptr;
}

template <typename T> const gloo::ReductionFunction<T> *reductionFunction(OpKind op) {
  switch (op) {
  case OpKind::Sum:
    return gloo::ReductionFunction<T>::sum;
  case OpKind::Prod:
    return gloo::ReductionFunction<T>::product;
  case OpKind::Min:
    return gloo::ReductionFunction<T>::min;
  case OpKind::Max:
    return gloo::ReductionFunction<T>::max;
  }
  return nullptr;
}

char *allocate(uint64_t bytes) {
  void *p = nullptr;
  size_t rounded = (bytes + 4095) / 4096 * 4096 + 4096;
  int rc = posix_memalign(&p, 4096, rounded);
  if (rc != 0)
    throw std::runtime_error("cannot allocate " + std::to_string(rounded) +
                             " bytes: " + std::strerror(rc));
  std::memset(p, 0, rounded);
  return static_cast<char *>(p);
}

/// One rank: a Gloo context connected to every other rank, its buffers,
/// and the measurements.
class GlooRank {
public:
  GlooRank(const Options &opts, const std::string &storeDir, int rank,
           const std::string &host = "127.0.0.1")
      : opts(opts), rank(rank), nranks(opts.nranks) {
    gloo::transport::tcp::attr attr;
    attr.hostname = host;
    attr.ai_family = AF_INET;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(storeDir);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
    ctx->setTimeout(std::chrono::seconds(opts.timeoutSeconds));
    ctx->connectFullMesh(store, device);
    context = ctx;
    uint64_t bytes = maxBufferBytes(opts, nranks);
    send.reset(allocate(bytes));
    recv.reset(allocate(bytes));
  }

  /// Times every collective and size; rank 0 prints. Returns the exit code.
  template <typename T> int run() {
    Reporter reporter(opts, nranks);
    uint64_t wrong = 0;
    for (CollKind coll : opts.colls) {
      std::string algorithm = "gloo";
      if (coll == CollKind::AllReduce)
        algorithm = opts.algorithm == "halving_doubling" ? "gloo-halving-doubling"
                                                         : "gloo-" + opts.algorithm;
      if (rank == 0)
        reporter.begin(coll, algorithm);
      for (uint64_t b : sizeList(opts)) {
        SizeInfo size = sizeFor(coll, b, opts.dtype, nranks);
        if (size.count == 0)
          continue;
        std::vector<Measurement> results;
        for (PlacementKind p : {PlacementKind::OutOfPlace, PlacementKind::InPlace}) {
          std::function<void()> once = makeCall<T>(coll, p, size);
          if (once)
            results.push_back(measure(coll, p, size, once));
        }
        if (rank == 0)
          reporter.size(coll, algorithm, size, results);
      }
      if (rank == 0)
        wrong = reporter.end();
    }
    return wrong == 0 ? 0 : 1;
  }

private:
  struct FreeDeleter {
    void operator()(char *p) const { std::free(p); }
  };

  const Options &opts;
  int rank;
  int nranks;
  std::shared_ptr<gloo::Context> context;
  std::unique_ptr<char, FreeDeleter> send;
  std::unique_ptr<char, FreeDeleter> recv;
  uint32_t nextTag = 1;

  /// Builds the Gloo call for one configuration once (as an application
  /// would); an empty function when Gloo has no such placement.
  template <typename T>
  std::function<void()> makeCall(CollKind coll, PlacementKind p, const SizeInfo &size) {
    T *in = reinterpret_cast<T *>(send.get());
    T *out = reinterpret_cast<T *>(recv.get());
    bool inPlace = p == PlacementKind::InPlace;
    uint32_t tag = nextTag++;
    switch (coll) {
    case CollKind::AllReduce: {
      if (opts.algorithm == "halving_doubling") {
        if (!inPlace)
          return nullptr;
        auto algo = std::make_shared<gloo::AllreduceHalvingDoubling<T>>(
            context, std::vector<T *>{out}, static_cast<int>(size.count),
            reductionFunction<T>(opts.op));
        return [algo]() { algo->run(); };
      }
      auto o = std::make_shared<gloo::AllreduceOptions>(context);
      o->setAlgorithm(opts.algorithm == "bcube" ? gloo::AllreduceOptions::Algorithm::BCUBE
                                                : gloo::AllreduceOptions::Algorithm::RING);
      if (!inPlace)
        o->setInput(in, size.count);
      o->setOutput(out, size.count);
      o->setReduceFunction(reduceFunc<T>(opts.op));
      o->setTag(tag);
      return [o]() { gloo::allreduce(*o); };
    }
    case CollKind::AllGather: {
      // Without an input, Gloo takes this rank's block from the output.
      auto o = std::make_shared<gloo::AllgatherOptions>(context);
      if (!inPlace)
        o->setInput(in, size.blockCount);
      o->setOutput(out, size.recvCount);
      o->setTag(tag);
      return [o]() { gloo::allgather(*o); };
    }
    case CollKind::Broadcast: {
      auto o = std::make_shared<gloo::BroadcastOptions>(context);
      if (!inPlace && rank == opts.root)
        o->setInput(in, size.count);
      o->setOutput(out, size.count);
      o->setRoot(opts.root);
      o->setTag(tag);
      return [o]() { gloo::broadcast(*o); };
    }
    default:
      throw std::runtime_error(std::string("gloo-peer does not implement ") + collName(coll));
    }
  }

  /// Writes the inputs where this placement reads them, and poisons outputs.
  void prepare(CollKind coll, PlacementKind p, const SizeInfo &size) {
    char *out = recv.get();
    if (p == PlacementKind::OutOfPlace) {
      fillInput(opts, coll, size, rank, nranks, send.get());
      poison(opts.dtype, out, size.recvCount);
    } else if (coll == CollKind::AllGather) {
      poison(opts.dtype, out, size.recvCount);
      fillInput(opts, coll, size, rank, nranks,
                out + static_cast<uint64_t>(rank) * size.blockCount * dtypeSize(opts.dtype));
    } else {
      fillInput(opts, coll, size, rank, nranks, out);
    }
  }

  void barrier() {
    gloo::BarrierOptions o(context);
    o.setTag(nextTag++);
    gloo::barrier(o);
  }

  Measurement measure(CollKind coll, PlacementKind p, const SizeInfo &size,
                      const std::function<void()> &once) {
    prepare(coll, p, size);
    for (int i = 0; i < opts.warmup; ++i)
      once();
    barrier();
    double start = nowSeconds();
    for (int i = 0; i < opts.iters; ++i)
      once();
    double timeUs = (nowSeconds() - start) / opts.iters * 1e6;
    double wrong = 0;
    if (opts.check) {
      prepare(coll, p, size);
      once();
      wrong = static_cast<double>(countWrong(opts, coll, size, rank, nranks, recv.get()));
    }
    // Every rank's (time, wrong), gathered everywhere.
    std::vector<double> mine = {timeUs, wrong};
    std::vector<double> all(2 * static_cast<size_t>(nranks));
    gloo::AllgatherOptions o(context);
    o.setInput(mine.data(), 2);
    o.setOutput(all.data(), all.size());
    o.setTag(nextTag++);
    gloo::allgather(o);
    Measurement m{p, 0, 0};
    for (int r = 0; r < nranks; ++r) {
      m.timeUs = std::max(m.timeUs, all[2 * static_cast<size_t>(r)]);
      m.wrong += static_cast<uint64_t>(all[2 * static_cast<size_t>(r) + 1]);
    }
    return m;
  }
};

/// Removes the rendezvous directory and the files the store left in it.
void removeStore(const std::string &dir) {
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..")
        unlink((dir + "/" + name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

} // namespace

int main(int argc, char **argv) {
  PeerSpec spec;
  spec.program = "gloo-peer";
  spec.colls = {CollKind::AllReduce, CollKind::AllGather, CollKind::Broadcast};
  spec.algorithms = {"ring", "bcube", "halving_doubling"};
  spec.forksRanks = true;
  spec.notes = "Ranks meet through a FileStore in a temporary directory ($TMPDIR or /tmp) and\n"
               "use Gloo's TCP transport on 127.0.0.1. --rank R --store DIR --host ADDRESS\n"
               "runs rank R alone, meeting the others in DIR, listening on ADDRESS.";
  // --rank R --store DIR --host ADDRESS: this process is rank R alone (of
  // --nranks), meeting the others through the FileStore in DIR and
  // listening on ADDRESS, for ranks on several hosts or network
  // namespaces (bench/compare --netns); rank 0 prints.
  int soleRank = -1;
  std::string soleStore, soleHost = "127.0.0.1";
  std::vector<char *> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--rank" || a == "--store" || a == "--host") && i + 1 < argc) {
      std::string v = argv[++i];
      if (a == "--rank")
        soleRank = std::atoi(v.c_str());
      else if (a == "--store")
        soleStore = v;
      else
        soleHost = v;
    } else {
      rest.push_back(argv[i]);
    }
  }
  argc = int(rest.size());
  argv = rest.data();
  Options opts;
  bool help = false;
  std::string err = parseOptions(argc, argv, spec, opts, help);
  if (err.empty() && (soleRank >= 0) != !soleStore.empty())
    err = "--rank and --store go together";
  if (err.empty() && soleRank >= opts.nranks)
    err = "--rank " + std::to_string(soleRank) + " is not a rank";
  if (help)
    return 0;
  if (err.empty() && opts.root >= opts.nranks)
    err = "root " + std::to_string(opts.root) + " is not a rank";
  if (err.empty() && maxBufferBytes(opts, opts.nranks) / dtypeSize(opts.dtype) > INT32_MAX)
    err = "-e is too large for Gloo's int counts";
  if (!err.empty()) {
    std::fprintf(stderr, "gloo-peer: %s\n", err.c_str());
    return 2;
  }

  auto runRank = [&](int rank, const std::string &storeDir, const std::string &host) {
    GlooRank r(opts, storeDir, rank, host);
    switch (opts.dtype) {
    case DTypeKind::F32:
      return r.run<float>();
    case DTypeKind::F64:
      return r.run<double>();
    case DTypeKind::I32:
      return r.run<int32_t>();
    }
    return 2;
  };
  if (soleRank >= 0) {
    try {
      return runRank(soleRank, soleStore, soleHost);
    } catch (const std::exception &e) {
      std::fprintf(stderr, "gloo-peer: rank %d: %s\n", soleRank, e.what());
      return 1;
    }
  }

  const char *tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/gloo-peer-XXXXXX";
  std::vector<char> dir(pattern.begin(), pattern.end());
  dir.push_back('\0');
  if (!mkdtemp(dir.data())) {
    std::fprintf(stderr, "gloo-peer: mkdtemp %s: %s\n", pattern.c_str(), std::strerror(errno));
    return 2;
  }
  std::string storeDir = dir.data();

  int rc = runForked("gloo-peer", opts.nranks, opts.bind, opts.timeoutSeconds,
                     [&](int rank) { return runRank(rank, storeDir, "127.0.0.1"); });
  removeStore(storeDir);
  return rc;
}
