#!/usr/bin/env python3
"""Sets a measured run's steps against a predicted run's, step by step.

    bench/compare-trace.py MEASURED.json PREDICTED.json [--top N]

MEASURED: `coll-run ... --trace MEASURED.json` (threads, one worker, or
--ranks-as gpu); PREDICTED: `collc prog.coll --nranks N --topology T
--emit=predict-trace -b SIZE -o PREDICTED.json` for the same plan and size.
Both are Chrome trace JSON: one complete event per step of a threadblock,
with its step and slice. Times are taken from each trace's first step.

Prints, measured beside predicted: the span (first step's start to last
step's end); per opcode the steps' count, mean duration and mean wait
(from the threadblock's previous step's end, or from the first step of
the run); the threadblocks that end last; and the steps where the
measured run falls behind the prediction most (the growth of measured
start minus predicted start from the threadblock's previous step), each
split into the part of its wait and of the previous step's duration.
"""

import argparse
import collections
import json
import sys


def load(path):
    with open(path) as f:
        doc = json.load(f)
    steps = {}
    for e in doc.get("traceEvents", []):
        if e.get("ph") != "X":
            continue
        a = e.get("args", {})
        key = (e["pid"], e["tid"], a.get("slice", 0), a.get("step", 0))
        steps[key] = (e["name"], float(e["ts"]), float(e["ts"]) + float(e["dur"]))
    if not steps:
        sys.exit(path + ": no steps")
    t0 = min(s[1] for s in steps.values())
    return {k: (n, b - t0, e - t0) for k, (n, b, e) in steps.items()}


def per_tb(steps):
    """Each threadblock's steps in the order they ran, with their waits."""
    tbs = collections.defaultdict(list)
    for key, (name, begin, end) in steps.items():
        tbs[key[:2]].append((begin, end, key, name))
    waits = {}
    for run in tbs.values():
        run.sort()
        last = 0.0
        for begin, end, key, _ in run:
            waits[key] = begin - last
            last = end
    return tbs, waits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("measured")
    ap.add_argument("predicted")
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args()
    m, p = load(args.measured), load(args.predicted)
    common = sorted(set(m) & set(p))
    only_m, only_p = len(set(m) - set(p)), len(set(p) - set(m))
    print(f"steps: {len(m)} measured, {len(p)} predicted, {len(common)} in both"
          + (f" ({only_m} only measured, {only_p} only predicted)" if only_m or only_p else ""))
    span_m = max(s[2] for s in m.values())
    span_p = max(s[2] for s in p.values())
    ratio = f"{span_m / span_p:.2f}" if span_p > 0 else "-"
    print(f"span: measured {span_m:.2f} us, predicted {span_p:.2f} us, ratio {ratio}")
    tbs_m, wait_m = per_tb(m)
    tbs_p, wait_p = per_tb(p)

    print("\n| opcode | steps | duration measured | predicted | wait measured | predicted |")
    print("|---|---:|---:|---:|---:|---:|")
    by_op = collections.defaultdict(list)
    for k in common:
        by_op[m[k][0]].append(k)
    for op in sorted(by_op):
        ks = by_op[op]
        n = len(ks)
        dm = sum(m[k][2] - m[k][1] for k in ks) / n
        dp = sum(p[k][2] - p[k][1] for k in ks) / n
        wm = sum(wait_m[k] for k in ks) / n
        wp = sum(wait_p[k] for k in ks) / n
        print(f"| {op} | {n} | {dm:.2f} | {dp:.2f} | {wm:.2f} | {wp:.2f} |")

    print("\nthreadblocks that end last (rank, tb: measured end / predicted end, steps):")
    ends = sorted(((run[-1][1], tb) for tb, run in tbs_m.items()), reverse=True)
    for end, tb in ends[:5]:
        pe = tbs_p[tb][-1][1] if tb in tbs_p else float("nan")
        print(f"  rank {tb[0]} tb {tb[1]}: {end:.2f} / {pe:.2f} us, {len(tbs_m[tb])} steps")

    # Where the measured run falls behind: the growth of the lag (measured
    # start - predicted start) over each threadblock's previous step.
    growth = []
    for tb, run in tbs_m.items():
        prev = None
        for begin, end, key, name in run:
            if key not in p:
                prev = None
                continue
            lag = begin - p[key][1]
            if prev is not None:
                pk, plag = prev
                d_dur = (m[pk][2] - m[pk][1]) - (p[pk][2] - p[pk][1])
                d_wait = wait_m[key] - wait_p[key]
                growth.append((lag - plag, key, name, d_wait, d_dur))
            prev = (key, lag)
    growth.sort(reverse=True)
    print(f"\nsteps that fall behind most (lag growth = more wait + longer previous step), us:")
    print("| rank | tb | slice | step | op | lag growth | wait | previous step |")
    print("|---:|---:|---:|---:|---|---:|---:|---:|")
    for g, key, name, dw, dd in growth[:args.top]:
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {name} | {g:.2f} | {dw:.2f} | {dd:.2f} |")
    if growth:
        tot_w = sum(x[3] for x in growth)
        tot_d = sum(x[4] for x in growth)
        print(f"\nover all {len(growth)} steps: waits {tot_w:+.1f} us, durations {tot_d:+.1f} us "
              "(measured - predicted, summed over threadblocks)")


if __name__ == "__main__":
    main()
