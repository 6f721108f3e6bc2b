# lit configuration for Collc: every test is a .coll file (or a .test script)
# whose RUN lines call collc and FileCheck.
import os

import lit.formats

config.name = "Collc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".coll", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.coll_obj_root, "tests", "lit")

# Tools: our own first, then FileCheck and not from LLVM 16.
config.environment["PATH"] = os.pathsep.join(
    [config.coll_tools_dir, config.coll_plan_dir, config.coll_run_dir, config.coll_perf_dir,
     config.coll_calibrate_dir, config.coll_test_tools_dir, config.llvm_tools_dir,
     config.environment.get("PATH", "")])
config.substitutions.append(("%stdlib", os.path.join(config.coll_src_root, "stdlib")))
config.substitutions.append(("%examples", os.path.join(config.coll_src_root, "examples")))
config.substitutions.append(("%topologies", os.path.join(config.coll_src_root, "topologies")))
config.substitutions.append(("%python", config.python_executable))

# Sanitized builds reserve terabytes of address space: tests that cap the
# address space (ulimit -v) say UNSUPPORTED: sanitize.
if config.coll_sanitize.upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("sanitize")

# lit's own shell implements `not` by inverting the exit status, so a crash
# (a signal) would count as the failure a test expects. LLVM's `not` binary
# fails on a crash: use it wherever a RUN line starts a command with `not`.
config.substitutions.insert(
    0, (r"(^|[|;&]\s*)not\s", r"\g<1>" + os.path.join(config.llvm_tools_dir, "not") + " "))
