"""Runs a command, copies its stdout and stderr (merged, in order) to our
stdout, then prints `exit=N` with the command's exit status.

lit's `not` accepts any non-zero status, including a crash (a negative status
from a signal). Tests that must see a clean `exit=1` pipe this helper into
FileCheck instead:

  RUN: %python %S/../Inputs/exit-status.py collc %t | FileCheck %s
  CHECK: exit=1
"""
import subprocess
import sys

if len(sys.argv) < 2:
    sys.exit("usage: exit-status.py command [args...]")
proc = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
out = sys.stdout.buffer
out.write(proc.stdout)
if proc.stdout and not proc.stdout.endswith(b"\n"):
    out.write(b"\n")
out.write(b"exit=%d\n" % proc.returncode)
out.flush()
