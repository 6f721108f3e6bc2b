"""Reads coll-perf's CSV on stdin and checks every row: the header is the
one bench/peers prints, algbw is size / time, busbw is algbw times the
factor given as the first argument, and no element is wrong."""
import csv
import sys

HEADER = ("collective,algorithm,nranks,ranks_as,size_bytes,count,dtype,op,placement,"
          "time_us,algbw_GBps,busbw_GBps,wrong")
factor = float(sys.argv[1])
lines = sys.stdin.read().splitlines()
if not lines or lines[0] != HEADER:
    sys.exit("bad header: %r" % (lines[:1],))
rows = list(csv.DictReader(lines))
if not rows:
    sys.exit("no rows")
for row in rows:
    time_us = float(row["time_us"])
    algbw = float(row["algbw_GBps"])
    busbw = float(row["busbw_GBps"])
    want = int(row["size_bytes"]) / time_us / 1e3
    if abs(algbw - want) > 1e-4 + 1e-3 * want:
        sys.exit("algbw %s, expected %g: %r" % (row["algbw_GBps"], want, row))
    if abs(busbw - algbw * factor) > 1e-4 + 1e-3 * busbw:
        sys.exit("busbw %s, expected %g: %r" % (row["busbw_GBps"], algbw * factor, row))
    if row["wrong"] != "0":
        sys.exit("wrong elements: %r" % row)
print("%d rows" % len(rows))
