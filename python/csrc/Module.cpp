//===- Module.cpp - collc_torch._C, the extension module ------------------===//
///
/// Makes ProcessGroupCollc for torch.distributed (collc_torch/__init__.py
/// registers it as the backend "collc") and lets Python choose plans.
//===----------------------------------------------------------------------===//

#include "GroupEngine.h"
#include "ProcessGroupCollc.h"
#include "coll/Runtime/Collective.h"
#include "coll/Runtime/ProcessGroup.h"

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <stdexcept>
#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;
using coll::torchext::planLibrary;
using coll::torchext::ProcessGroupCollc;

namespace {

void check(const coll::Status &s) {
  if (!s)
    throw std::runtime_error("collc: " + s.message());
}

} // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Collc's torch.distributed backend (use it through collc_torch)";
  m.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
         const std::chrono::duration<float> &timeout,
         std::vector<int64_t> globalRanks) -> c10::intrusive_ptr<coll::torchext::TorchBackendBase> {
        return c10::make_intrusive<ProcessGroupCollc>(
            store, rank, size, std::chrono::duration_cast<std::chrono::milliseconds>(timeout),
            std::move(globalRanks));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("global_ranks") = std::vector<int64_t>(), py::call_guard<py::gil_scoped_release>());
  m.def(
      "use_selection_table",
      [](const std::string &path) { check(planLibrary().setUserTable(path)); }, py::arg("path"));
  m.def(
      "use_host_table", [](const std::string &path) { check(planLibrary().setHostTable(path)); },
      py::arg("path"));
  m.def(
      "use_program",
      [](const std::string &collective, const std::string &program, uint32_t minRanks,
         uint32_t maxRanks, uint64_t maxBytes, const std::vector<std::string> &defines) {
        check(planLibrary().addUserRow(collective, program, minRanks, maxRanks, maxBytes, defines));
      },
      py::arg("collective"), py::arg("program"), py::arg("min_ranks"), py::arg("max_ranks"),
      py::arg("max_bytes"), py::arg("defines"));
  m.def(
      "forget_programs",
      [](const std::string &collective) { return planLibrary().removeUserRows(collective); },
      py::arg("collective"));
  m.def(
      "plan_for",
      [](const std::string &collective, uint32_t nranks, uint64_t nbytes, uint32_t root,
         bool acrossHosts) {
        coll::Result<std::shared_ptr<const coll::ValidatedPlan>> plan =
            planLibrary().plan(collective, nranks, root, nbytes, acrossHosts);
        if (!plan)
          throw std::runtime_error("collc: " + plan.message());
        const coll::PlanInfo &info = (*plan)->info();
        return py::dict(py::arg("name") = info.name,
                        py::arg("collective") = std::string(coll::collectiveName(info.collective)),
                        py::arg("nranks") = info.nranks, py::arg("root") = info.root,
                        py::arg("checksum") = coll::formatChecksum((*plan)->checksum()),
                        py::arg("file") = planLibrary().fileOf(plan->get()));
      },
      py::arg("collective"), py::arg("nranks"), py::arg("nbytes"), py::arg("root") = 0,
      py::arg("across_hosts") = false);
  m.def(
      "alloc",
      [](const c10::intrusive_ptr<coll::torchext::TorchBackendBase> &pg, int64_t bytes) {
        auto *collc = dynamic_cast<ProcessGroupCollc *>(pg.get());
        if (!collc)
          throw std::runtime_error("collc: registered memory comes from a group of the collc "
                                   "backend, not " +
                                   std::string(pg->getBackendName()));
        return collc->registeredBytes(bytes);
      },
      py::arg("group"), py::arg("bytes"));
  m.def(
      "last_direct_messages",
      [](const c10::intrusive_ptr<coll::torchext::TorchBackendBase> &pg) -> uint64_t {
        auto *collc = dynamic_cast<ProcessGroupCollc *>(pg.get());
        return collc ? collc->lastDirectMessages() : 0;
      },
      py::arg("group"));
  m.def("host_identity", [] { return coll::ProcessGroup::hostIdentity(); });
  m.def("paths", [] {
    const auto &p = planLibrary().paths();
    return py::dict(py::arg("collc") = p.collc, py::arg("stdlib") = p.stdlib,
                    py::arg("cache_dir") = p.cacheDir,
                    py::arg("host_table") = planLibrary().hostTable(),
                    py::arg("host_table_file") = coll::PlanLibraryPaths::hostTableFile());
  });
}
