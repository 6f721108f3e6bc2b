"""Which plan the collc backend selects: the standard library's table by
ranks and size, the user's rows before it (use_program, a table through
use_selection_table or COLLC_PLANS), compiled plans, and the errors for a
plan that does not fit. One process; no group needed.

    python3 tests/torch/selection.py
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.environ.get("COLLC_TORCH_PATH", ""))
import collc_torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STDLIB = os.path.normpath(os.path.join(HERE, "..", "..", "stdlib"))
failures = []


def expect(what, got, want):
    if got != want:
        failures.append("%s: got %r, want %r" % (what, got, want))


def expect_error(what, fn, *needles):
    try:
        fn()
        failures.append("%s: no error" % what)
    except RuntimeError as e:
        for n in needles:
            if n not in str(e):
                failures.append("%s: %r lacks %r" % (what, str(e), n))


name = lambda c, n, b, r=0: collc_torch.plan_for(c, n, b, r)["name"]  # noqa: E731

# The standard library's table (stdlib/default.select).
expect("allreduce on 2", name("allreduce", 2, 4096), "twoshot_allreduce")
expect("allreduce on 4, 4K", name("allreduce", 4, 4096), "recursive_doubling_allreduce")
expect("allreduce on 4, 64K", name("allreduce", 4, 65536), "rabenseifner_allreduce")
expect("allreduce on 4, 16M", name("allreduce", 4, 16 << 20), "ring_allreduce")
expect("broadcast small", name("broadcast", 4, 1024, 3), "binomial_broadcast")
expect("broadcast large", name("broadcast", 4, 64 << 20, 3), "chain_broadcast")
p = collc_torch.plan_for("broadcast", 4, 1024, 3)
expect("broadcast's root", (p["root"], p["nranks"], p["collective"]), (3, 4, "broadcast"))
expect("alltoall large", name("alltoall", 3, 1 << 20), "pairwise_alltoall")
# Groups across hosts: stdlib/network.select.
net = lambda c, n, b: collc_torch.plan_for(c, n, b, across_hosts=True)["name"]  # noqa: E731
expect("allreduce on 2 across hosts, 4K", net("allreduce", 2, 4096), "oneshot_allreduce")
expect("allreduce on 2 across hosts, 1M", net("allreduce", 2, 1 << 20), "ring_allreduce")
expect("allreduce on 4 across hosts, 64K", net("allreduce", 4, 65536), "ring_allreduce")
# The same selection twice is the same plan (from the cache).
expect("cached", collc_torch.plan_for("allgather", 5, 4096)["checksum"],
       collc_torch.plan_for("allgather", 5, 4096)["checksum"])
expect_error("an unknown collective", lambda: name("allscatter", 2, 4096),
             "no program", "allscatter")

# A user's program comes first, for the ranks and sizes it names.
collc_torch.use_program("allreduce", os.path.join(STDLIB, "ring_allreduce.coll"), ranks=2,
                        max_bytes=1 << 20)
expect("user row, small", name("allreduce", 2, 4096), "ring_allreduce")
expect("user row, beyond its sizes", name("allreduce", 2, 16 << 20), "twoshot_allreduce")
expect("user row, other ranks", name("allreduce", 4, 4096), "recursive_doubling_allreduce")
collc_torch.use_program("allgather", os.path.join(STDLIB, "bruck_allgather.coll"))
expect("user row, any", name("allgather", 6, 1 << 20), "bruck_allgather")

# A table with a compiled plan, through COLLC_PLANS, in a process of its own.
with tempfile.TemporaryDirectory() as d:
    plan = os.path.join(d, "rd8.bin")
    collc = collc_torch.paths()["collc"]
    subprocess.run([collc, os.path.join(STDLIB, "recursive_doubling_allreduce.coll"),
                    "--nranks", "8", "-o", plan], check=True)
    with open(os.path.join(d, "collc.select"), "w") as f:
        f.write("# mine\nallreduce 8 any rd8.bin\n"
                "broadcast any any %s/tree_broadcast.coll\n" % STDLIB)
    script = ("import sys; sys.path.insert(0, %r); import collc_torch as c; "
              "print(c.plan_for('allreduce', 8, 64 << 20)['name'], "
              "c.plan_for('broadcast', 5, 100, 2)['name'])" % os.environ.get("COLLC_TORCH_PATH", ""))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=dict(os.environ, COLLC_PLANS=d))
    expect("COLLC_PLANS", out.stdout.split(), ["recursive_doubling_allreduce", "tree_broadcast"])
    if out.returncode:
        failures.append("COLLC_PLANS run: " + out.stderr)
    # The plan is for 8 ranks: selecting it for a call on 8 ranks of another
    # collective is impossible by the table, but a table row that admits
    # other ranks names both.
    with open(os.path.join(d, "collc.select"), "w") as f:
        f.write("allreduce any any rd8.bin\n")
    collc_torch.use_selection_table(os.path.join(d, "collc.select"))
    expect_error("a plan for 8 ranks on 4", lambda: name("allreduce", 4, 4096),
                 "8 ranks", "not allreduce on 4 ranks")
    with open(os.path.join(d, "bad.select"), "w") as f:
        f.write("allreduce lots any rd8.bin\n")
    expect_error("a malformed table", lambda: collc_torch.use_selection_table(
        os.path.join(d, "bad.select")), "bad.select:1", "ranks 'lots'")
    collc_torch.use_selection_table(None)
    expect("table removed", name("allreduce", 8, 64 << 20), "ring_allreduce")

# Compiled plans serve without a compiler (COLLC names none that runs), a
# rooted collective's call takes the row whose plan has its root, and what
# only a program could serve gets the compiler's error.
with tempfile.TemporaryDirectory() as d:
    collc = collc_torch.paths()["collc"]
    rows = []
    for r in range(3):
        subprocess.run([collc, os.path.join(STDLIB, "chain_broadcast.coll"), "--nranks", "3",
                        "-D", "root=%d" % r, "-o", os.path.join(d, "bc%d.bin" % r)], check=True)
        rows.append("broadcast 3 any bc%d.bin\n" % r)
    subprocess.run([collc, os.path.join(STDLIB, "ring_allreduce.coll"), "--nranks", "3",
                    "-o", os.path.join(d, "ar3.bin")], check=True)
    with open(os.path.join(d, "collc.select"), "w") as f:
        f.write("".join(rows) + "allreduce 3 any ar3.bin\n")
    script = (
        "import sys; sys.path.insert(0, %r); import collc_torch as c\n"
        "print(*[c.plan_for('broadcast', 3, 100, r)['root'] for r in range(3)])\n"
        "print(c.plan_for('allreduce', 3, 1 << 20)['name'])\n"
        "try:\n    c.plan_for('allgather', 3, 100)\nexcept RuntimeError as e:\n    print(e)\n"
        % os.environ.get("COLLC_TORCH_PATH", ""))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=dict(os.environ, COLLC_PLANS=d, COLLC=os.path.join(d, "no-collc")))
    lines = out.stdout.splitlines()
    expect("no compiler: roots", lines[:1], ["0 1 2"])
    expect("no compiler: compiled allreduce", lines[1:2], ["ring_allreduce"])
    if len(lines) < 3 or "cannot run the compiler" not in lines[2]:
        failures.append("no compiler: allgather: %r" % lines[2:])
    if out.returncode:
        failures.append("no-compiler run: " + out.stderr)

for f in failures:
    print(f)
print("selection: %d failures" % len(failures))
sys.exit(1 if failures else 0)
