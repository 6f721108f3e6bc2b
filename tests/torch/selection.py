"""Which plan the collc backend selects: the standard library's table by
ranks and size, the host table before it (collc select's, by default the
standard library's host.select), the user's rows before both (use_program,
a table through use_selection_table or COLLC_PLANS), compiled plans, and
the errors for a plan that does not fit. No group needed.

    python3 tests/torch/selection.py
"""

import json
import os
import subprocess
import sys
import tempfile

# The standard library's table alone first; the host table below, in
# processes of their own (the variable is read at the first selection).
os.environ["COLLC_HOST_SELECT"] = "none"
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
# The plan's file: compiled into the cache, named after its program and N,
# and the plan itself (its checksum is in the header coll-plan reads).
p = collc_torch.plan_for("allreduce", 4, 65536)
expect("file in the cache", os.path.dirname(p["file"]), collc_torch.paths()["cache_dir"])
expect("file's name", os.path.basename(p["file"]).startswith("rabenseifner_allreduce-n4-"), True)
with open(p["file"], "rb") as f:
    head = f.read()
expect("file is a plan", head[:8], b"COLLPLAN")
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
# forget_programs() takes them back, one collective or all.
before_allgather = name("allgather", 6, 1 << 20)
collc_torch.use_program("reducescatter", os.path.join(STDLIB, "ring_reducescatter.coll"))
expect("forget one collective", collc_torch.forget_programs("allgather"), 1)
expect("forgotten", name("allgather", 6, 1 << 20) != before_allgather, True)
expect("the others stay", name("allreduce", 2, 4096), "ring_allreduce")
expect("forget the rest", collc_torch.forget_programs(), 2)
expect("all forgotten", name("allreduce", 2, 4096) != "ring_allreduce", True)
collc_torch.use_program("allreduce", os.path.join(STDLIB, "ring_allreduce.coll"), ranks=2,
                        max_bytes=1 << 20)
collc_torch.use_program("allgather", os.path.join(STDLIB, "bruck_allgather.coll"))

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
              "c.plan_for('broadcast', 5, 100, 2)['name'], "
              "c.plan_for('allreduce', 8, 64 << 20)['file'])"
              % os.environ.get("COLLC_TORCH_PATH", ""))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=dict(os.environ, COLLC_PLANS=d))
    expect("COLLC_PLANS", out.stdout.split(),
           ["recursive_doubling_allreduce", "tree_broadcast", plan])
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


# The host table: by default the standard library's host.select (no table
# made for this host in the cache); a table made for this host in the cache
# (calibrate_host()'s place) or COLLC_HOST_SELECT instead. Its rank counts
# and sizes fall through to default.select; the user's rows come first;
# groups across hosts do not read it.
SIZES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def table_choice(path, collective, nranks, nbytes):
    """The program a table picks, as Selection.h says (the last row of a
    collective for N takes every size): None when no row admits N."""
    rows = []
    for line in open(path):
        words = line.split("#")[0].split()
        if len(words) < 4 or words[0] != collective:
            continue
        r, b = words[1], words[2]
        lo, hi = (1, 1 << 32) if r == "any" else (
            (int(r.split("-")[0]), int(r.split("-")[1]) if r.split("-")[1] else 1 << 32)
            if "-" in r else (int(r), int(r)))
        if lo <= nranks <= hi:
            most = 1 << 64 if b == "any" else int(b[:-1]) * SIZES[b[-1]] if b[-1] in SIZES \
                else int(b)
            rows.append((most, os.path.basename(words[3]).rsplit(".", 1)[0]))
    for i, (most, prog) in enumerate(rows):
        if nbytes <= most or i + 1 == len(rows):
            return prog
    return None


HOST = os.path.join(STDLIB, "host.select")
DEFAULT = os.path.join(STDLIB, "default.select")
POINTS = [(c, n, b) for c in ("allreduce", "allgather", "alltoall", "broadcast", "reduce",
                              "reducescatter")
          for n in (2, 3, 4, 5, 8) for b in (4096, 1 << 20, 64 << 20)]


def host_choice(collective, nranks, nbytes):
    return table_choice(HOST, collective, nranks, nbytes) or \
        table_choice(DEFAULT, collective, nranks, nbytes)


# The check can fail: the shipped host table differs from default.select
# somewhere among the points, and leaves some rank count to it.
expect("host.select differs from default.select",
       any(host_choice(*p) != table_choice(DEFAULT, *p) for p in POINTS), True)
expect("host.select leaves 5 ranks to default.select",
       table_choice(HOST, "allreduce", 5, 4096), None)

PROBE = ("import sys, json; sys.path.insert(0, %r); import collc_torch as c\n"
         "points = json.loads(sys.argv[1])\n"
         "try:\n"
         "    print(json.dumps([c.paths()['host_table']] + "
         "[c.plan_for(x, n, b, across_hosts=a)['name'] for x, n, b, a in points]))\n"
         "except RuntimeError as e:\n"
         "    print(json.dumps(['error', str(e)]))\n" % os.environ.get("COLLC_TORCH_PATH", ""))


def probe(env, points):
    """paths()['host_table'] and the names chosen for ``points``
    (collective, ranks, bytes, across_hosts) in a process with ``env``."""
    full = dict(os.environ)
    full.pop("COLLC_HOST_SELECT")
    full.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(points)],
                         capture_output=True, text=True, env=full)
    if out.returncode:
        failures.append("probe %r: %s" % (env, out.stderr))
        return ["error", out.stderr]
    return json.loads(out.stdout)


with tempfile.TemporaryDirectory() as d:
    empty_cache = os.path.join(d, "empty")
    os.makedirs(empty_cache)
    got = probe({"XDG_CACHE_HOME": empty_cache}, [p + (False,) for p in POINTS])
    expect("default host table", got[0], HOST)
    for p, name_got in zip(POINTS, got[1:]):
        expect("host table: %s on %d, %d bytes" % p, name_got, host_choice(*p))
    # Across hosts: network.select alone.
    got = probe({"XDG_CACHE_HOME": empty_cache}, [("allreduce", 2, 1 << 20, True)])
    expect("host table across hosts", got[1:], ["ring_allreduce"])

    # A table made for this host, where calibrate_host() puts it.
    os.makedirs(os.path.join(d, "cache", "collc"))
    made = os.path.join(d, "cache", "collc", "host.select")
    with open(made, "w") as f:
        f.write("allreduce 2 any %s/ring_allreduce.coll\n"
                "broadcast 4 64K %s/tree_broadcast.coll\n" % (STDLIB, STDLIB))
    points = [("allreduce", 2, 4096, False), ("allreduce", 4, 4096, False),
              ("broadcast", 4, 4096, False), ("broadcast", 4, 1 << 20, False)]
    got = probe({"XDG_CACHE_HOME": os.path.join(d, "cache")}, points)
    expect("host table in the cache", got, [made, "ring_allreduce",
                                            table_choice(DEFAULT, "allreduce", 4, 4096),
                                            "tree_broadcast",
                                            table_choice(DEFAULT, "broadcast", 4, 1 << 20)])
    # COLLC_HOST_SELECT before it; "none" for the standard library's alone.
    got = probe({"XDG_CACHE_HOME": os.path.join(d, "cache"), "COLLC_HOST_SELECT": HOST},
                points[:1])
    expect("COLLC_HOST_SELECT", got, [HOST, host_choice("allreduce", 2, 4096)])
    got = probe({"XDG_CACHE_HOME": os.path.join(d, "cache"), "COLLC_HOST_SELECT": "none"},
                points[:1])
    expect("COLLC_HOST_SELECT=none", got, ["", table_choice(DEFAULT, "allreduce", 2, 4096)])
    # A host table that cannot be read is every selection's error.
    got = probe({"COLLC_HOST_SELECT": os.path.join(d, "missing.select")}, points[:1])
    if got[0] != "error" or "host's selection table" not in got[1] \
            or "missing.select" not in got[1]:
        failures.append("unreadable host table: %r" % got)

    # In this process: use_host_table(), and the user's rows before it.
    collc_torch.use_selection_table(None)
    collc_torch.use_host_table(made)
    # (The user's rows above name allreduce and allgather.)
    expect("use_host_table", (collc_torch.paths()["host_table"], name("broadcast", 4, 4096)),
           (made, "tree_broadcast"))
    collc_torch.use_program("broadcast", os.path.join(STDLIB, "chain_broadcast.coll"), ranks=4)
    expect("user row before the host table", name("broadcast", 4, 4096), "chain_broadcast")
    expect_error("use_host_table of a missing file", lambda: collc_torch.use_host_table(
        os.path.join(d, "missing.select")), "missing.select")
    collc_torch.use_host_table("none")
    expect("use_host_table('none')", collc_torch.paths()["host_table"], "")

for f in failures:
    print(f)
print("selection: %d failures" % len(failures))
sys.exit(1 if failures else 0)
