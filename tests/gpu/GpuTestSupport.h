//===- GpuTestSupport.h - What the GPU test programs share -----*- C++ -*-===//
/// \file
/// Whether a GPU is usable, and where the compiled test plans are. Only
/// test programs include this (COLL_GPU_PLAN_DIR_DEFAULT is a definition of
/// the test targets, the same for every file of one program).
//===----------------------------------------------------------------------===//
#ifndef COLL_TESTS_GPU_GPUTESTSUPPORT_H
#define COLL_TESTS_GPU_GPUTESTSUPPORT_H

#include "coll/Kernels/DeviceProbe.h"

#include <algorithm>
#include <cstdlib>
#include <dirent.h>
#include <string>
#include <vector>

namespace coll::test {

/// Whether a CUDA device runs kernels here (a probe kernel, once).
inline bool haveGpu() {
  static const bool usable = [] {
    int out = 0;
    return kernels::probeDevice(5, out) && out == 5;
  }();
  return usable;
}

/// The directory of the compiled GPU test plans: COLL_GPU_PLAN_DIR, else
/// the build's (COLL_GPU_PLAN_DIR_DEFAULT), else "".
inline std::string gpuPlanDir() {
  if (const char *env = std::getenv("COLL_GPU_PLAN_DIR"))
    return env;
#ifdef COLL_GPU_PLAN_DIR_DEFAULT
  return COLL_GPU_PLAN_DIR_DEFAULT;
#else
  return "";
#endif
}

/// The plans in \p dir (NAME for each NAME.bin), sorted; none when \p dir is
/// empty or cannot be read.
inline std::vector<std::string> planNamesIn(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = dir.empty() ? nullptr : opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".bin") == 0)
        names.push_back(name.substr(0, name.size() - 4));
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace coll::test

#endif // COLL_TESTS_GPU_GPUTESTSUPPORT_H
