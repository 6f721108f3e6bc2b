#!/usr/bin/env python3
"""Measured against predicted for the GPU's one-device mode: the allreduce
latency table that coll-gpu-bench prints ("allreduce latency per size":
every rank of a plan on one GPU, DeviceWorld, slices of 256 KiB, fp32 sum,
out of place but for the in-place ring), beside collc --emit=predict of the
same programs on a description of that GPU.

    bench/predict-gpu.py BUILD|COLLC BENCH_LOG TOPOLOGY

BUILD is a build directory (its tools/collc/collc runs), or COLLC the
compiler itself. BENCH_LOG is coll-gpu-bench's output (tests/gpu/run-on-device.sh keeps it
as bench.log). Prints a Markdown table of predicted, synchronised and back
to back microseconds and the ratio synchronised / predicted (the
prediction includes the description's call-latency, a launch and its
wait), each plan's range of ratios, and how many points lie within 0.75 to
1.25.
"""
import os
import re
import subprocess
import sys


def parse(log):
    lines = open(log).read().splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if l.startswith("allreduce latency per size"))
    except StopIteration:
        sys.exit("no 'allreduce latency per size' table in " + log)
    header = lines[start + 1].split()[1:]
    sizes = []
    for i in range(0, len(header), 2):
        value, unit = int(header[i]), header[i + 1]
        sizes.append(value * (1024 if unit == "KiB" else 1))
    rows = []
    for line in lines[start + 2:]:
        if not line.strip():
            break
        pairs = re.findall(r"([\d.]+)/\s*([\d.]+)", line)
        name = re.split(r"\s{2,}", line.strip())[0]
        rows.append((name, [(float(s), float(b)) for s, b in pairs]))
    return sizes, rows


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    build, log, topo = sys.argv[1:]
    collc = build if os.path.isfile(build) else os.path.join(build, "tools", "collc", "collc")
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    sizes, rows = parse(log)
    print("| plan | size (B) | predicted us | synchronised us | back to back us | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    within = total = 0
    ranges = []
    for name, measured in rows:
        in_place = name.endswith(" in place")
        plan = name.replace(" in place", "")
        program, n = plan.rsplit("_n", 1)
        args = [collc, os.path.join(root, "stdlib", "%s.coll" % program), "--nranks", n,
                "--emit=predict", "--topology", topo, "-b", str(sizes[0]), "-e", str(sizes[-1]),
                "-f", str(sizes[1] // sizes[0]), "--slice-bytes=262144"]
        if not in_place:
            args.append("--out-of-place")
        run = subprocess.run(args, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit("%s failed:\n%s" % (" ".join(args), run.stderr))
        out = run.stdout
        predicted = {int(m.group(1)): float(m.group(2))
                     for m in re.finditer(r"^\s+(\d+)\s+\d+\s+([\d.]+)", out, re.M)}
        ratios = []
        for size, (sync, b2b) in zip(sizes, measured):
            p = predicted[size]
            ratio = sync / p
            ratios.append(ratio)
            total += 1
            within += 0.75 <= ratio <= 1.25
            print("| %s | %d | %.1f | %.1f | %.1f | %.2f |" % (name, size, p, sync, b2b, ratio))
        ranges.append((name, min(ratios), max(ratios)))
    print("\n| plan | measured / predicted |\n|---|---|")
    for name, low, high in ranges:
        print("| %s | %.2f to %.2f |" % (name, low, high))
    print("\n%d of %d points within 0.75 to 1.25" % (within, total))


if __name__ == "__main__":
    main()
