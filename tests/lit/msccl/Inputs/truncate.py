# Feeds collc every prefix of an MSCCL-IR file (every STEP-th byte) and
# byte-flipped copies: each must be a clean error (exit status 1, a message
# with "error:"), never a crash or a hang.
import subprocess
import sys

collc, path, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(path, "rb").read()
bad = 0
cases = [data[:n] for n in range(0, len(data) - 1, step)]
for k in range(0, len(data), step * 3):
    for b in (b"<", b'"', b">", b"9", b"-"):
        cases.append(data[:k] + b + data[k + 1:])
for i, case in enumerate(cases):
    p = subprocess.run([collc, "--import-msccl-xml", "-", "--verify-only"], input=case,
                       capture_output=True, timeout=60)
    if p.returncode not in (0, 1) or (p.returncode == 1 and b"error:" not in p.stderr):
        bad += 1
        print("case %d: exit %d: %s" % (i, p.returncode, p.stderr[:200]))
print("%d cases, %d bad" % (len(cases), bad))
sys.exit(1 if bad else 0)
