#!/usr/bin/env python3
"""The plan of every library program at one rank count, in numbers.

Usage: scripts/stdlib-plan-stats.py [--nranks 8] [--collc PATH] [--coll-plan PATH] [program.coll ...]

Compiles each program (default: every stdlib/*.coll) with its parameters'
defaults and prints, per program, the most threadblocks, instructions and
connections (send and receive ends, per peer and channel) that any one rank
of the plan has. docs/stdlib.md quotes its output at N = 8.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RANK = re.compile(r"rank (\d+): scratch (\d+) chunks, (\d+) threadblock")
TB = re.compile(r"\s+tb \d+: (?:send (\d+), )?(?:recv (\d+), )?channel (\d+), (\d+) steps?")


def stats(dump):
    ranks = {}
    cur = None
    for line in dump.splitlines():
        m = RANK.match(line)
        if m:
            cur = ranks.setdefault(int(m.group(1)), {"tb": int(m.group(3)), "steps": 0, "conns": set()})
            continue
        m = TB.match(line)
        if m and cur is not None:
            send, recv, channel, steps = m.groups()
            cur["steps"] += int(steps)
            if send is not None:
                cur["conns"].add(("send", int(send), int(channel)))
            if recv is not None:
                cur["conns"].add(("recv", int(recv), int(channel)))
    return (max(r["tb"] for r in ranks.values()), max(r["steps"] for r in ranks.values()),
            max(len(r["conns"]) for r in ranks.values()))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nranks", type=int, default=8)
    p.add_argument("--collc", default=os.path.join(ROOT, "build/tools/collc/collc"))
    p.add_argument("--coll-plan", default=os.path.join(ROOT, "build/tools/coll-plan/coll-plan"))
    p.add_argument("programs", nargs="*")
    a = p.parse_args()
    programs = a.programs or sorted(glob.glob(os.path.join(ROOT, "stdlib", "*.coll")))
    print("program\tthreadblocks\tinstructions\tconnections")
    with tempfile.TemporaryDirectory() as tmp:
        for path in programs:
            name = os.path.basename(path)[:-len(".coll")]
            plan = os.path.join(tmp, name + ".bin")
            r = subprocess.run([a.collc, path, "--nranks", str(a.nranks), "-o", plan],
                               capture_output=True, text=True)
            if r.returncode:
                first = r.stderr.splitlines()[0] if r.stderr else "failed"
                print(f"{name}\t-\t-\t-\t({first})")
                continue
            dump = subprocess.run([a.coll_plan, "dump", plan], capture_output=True, text=True,
                                  check=True).stdout
            tb, steps, conns = stats(dump)
            print(f"{name}\t{tb}\t{steps}\t{conns}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
