#!/usr/bin/env python3
"""Compiles the standard library's selection (stdlib/default.select) into
plans for a machine without the compiler, and writes a table of them.

    tests/torch/make-plans.py COLLC OUTDIR [--ranks 2,3,4]

For each rank count, each row of the table that admits it becomes a row of
OUTDIR/collc.select naming a compiled plan, in the same order and with the
same sizes, so that COLLC_PLANS=OUTDIR selects as the standard library does.
A rooted collective gets one plan per root (the backend takes the row whose
plan has the call's root). A program whose `require` rejects a rank count
is left out at that count, as the backend passes it over.
"""

import argparse
import os
import subprocess
import sys

ROOTED = {"broadcast", "reduce", "gather", "scatter"}


def admits(spec, n):
    if spec == "any":
        return True
    if spec.endswith("-"):
        return n >= int(spec[:-1])
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo) <= n <= int(hi)
    return n == int(spec)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("collc")
    p.add_argument("outdir")
    p.add_argument("--ranks", default="2,3,4")
    args = p.parse_args()
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    table = os.path.join(root, "stdlib", "default.select")
    os.makedirs(args.outdir, exist_ok=True)
    rows = []
    for line in open(table):
        words = line.split("#", 1)[0].split()
        if words:
            rows.append(words)
    out, plans, skipped = [], 0, 0
    for n in [int(x) for x in args.ranks.split(",")]:
        for coll, ranks, maxbytes, program, *defines in rows:
            if not admits(ranks, n):
                continue
            for r in range(n) if coll in ROOTED else [None]:
                name = "%s_n%d%s.bin" % (os.path.splitext(program)[0], n,
                                         "" if r is None else "_r%d" % r)
                cmd = [args.collc, os.path.join(root, "stdlib", program), "--nranks", str(n),
                       "-o", os.path.join(args.outdir, name)]
                for d in defines + ([] if r is None else ["root=%d" % r]):
                    cmd += ["-D", d]
                res = subprocess.run(cmd, capture_output=True, text=True)
                if res.returncode:
                    if "requirement failed" in res.stderr:
                        skipped += 1
                        continue
                    sys.exit(res.stderr)
                plans += 1
                out.append("%-14s %-2d %-6s %s\n" % (coll, n, maxbytes, name))
    with open(os.path.join(args.outdir, "collc.select"), "w") as f:
        f.write("# The standard library's selection, compiled (tests/torch/make-plans.py)\n")
        f.writelines(out)
    print("%d plans in %s (%d left out by a program's require)" % (plans, args.outdir, skipped))


if __name__ == "__main__":
    main()
