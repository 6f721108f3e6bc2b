"""collc --emit=html in a real browser: headless Chromium loads the page of
ring_allreduce at N = 8 (on the DGX H100 description, with the predicted
table) and at N = 256 (no topology: nominal times, ranks drawn in groups),
without a message on the console; the test moves the step slider (#step=K
in the address dispatches the slider's input event, as a user's drag does)
and checks what the page drew and lists against the plan itself
(--emit=plan-text), and keeps a screenshot of each page and step.

    check_page.py COLLC ROOT OUTDIR

Exits 77 (skipped) when no Chromium is installed.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

collc, root, out = sys.argv[1], sys.argv[2], sys.argv[3]
browser = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")
                if shutil.which(b)), None)
if not browser:
    print("no Chromium installed: skipped")
    sys.exit(77)
os.makedirs(out, exist_ok=True)
failures = []


def fail(what):
    failures.append(what)
    print("FAIL:", what, flush=True)


def run(args):
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit("%s failed (%d):\n%s" % (" ".join(args), r.returncode, r.stderr))
    return r.stdout


profile = tempfile.mkdtemp(prefix="collc-page-")


def chromium(url, *extra):
    """Runs headless Chromium on url; returns (stdout, console lines)."""
    args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
            "--v=0", "--user-data-dir=" + profile, "--virtual-time-budget=5000",
            "--window-size=1400,1900", *extra, url]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    console = [l for l in r.stderr.splitlines() if ":CONSOLE" in l]
    return r.stdout, console


def load(page, step, name):
    """The page's DOM at slider position step, and a screenshot."""
    url = "file://" + page + "#step=%d" % step
    dom, console = chromium(url, "--dump-dom")
    for line in console:
        fail("%s step %d: console: %s" % (name, step, line))
    if "<body" not in dom:
        fail("%s step %d: no DOM came back" % (name, step))
    shot = os.path.join(out, "%s-step%d.png" % (name, step))
    chromium(url, "--screenshot=" + shot, "--hide-scrollbars")
    if not os.path.exists(shot) or os.path.getsize(shot) < 10000:
        fail("%s step %d: no screenshot" % (name, step))
    body = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', re.search(r"<body[^>]*>", dom).group(0)))
    moves = [m.replace("&gt;", ">") for m in re.findall(r"<li>([^<]*)</li>", dom)]
    return dom, body, moves


def plan_steps(program, n):
    """(rank, tb, step) -> (mnemonic, send peer, recv peer), from the plan's text."""
    text = run([collc, program, "--nranks", str(n), "--emit=plan-text"])
    steps, rank, tb, send, recv = {}, None, None, None, None
    for line in text.splitlines():
        m = re.match(r"rank (\d+):", line)
        if m:
            rank = int(m.group(1))
            continue
        m = re.match(r"\s+tb (\d+): send (-?\d+), recv (-?\d+)", line)
        if m:
            tb, send, recv = int(m.group(1)), int(m.group(2)), int(m.group(3))
            continue
        m = re.match(r"\s+(\d+): (\w+)", line)
        if m and rank is not None and tb is not None:
            steps[(rank, tb, int(m.group(1)))] = (m.group(2), send, recv)
    return steps


def check_moves(name, step, moves, steps):
    """Every listed move is a step of the plan, with its opcode and peers."""
    for text in moves:
        m = re.match(r"rank (\d+) tb (\d+) step (\d+): (\w+)(?: from rank (\d+))?.*?(?:-> rank (\d+))?$",
                     text)
        if not m:
            fail("%s step %d: cannot read the move '%s'" % (name, step, text))
            continue
        key = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        if key not in steps:
            fail("%s step %d: '%s' is no step of the plan" % (name, step, text))
            continue
        op, send, recv = steps[key]
        if op != m.group(4):
            fail("%s step %d: '%s': the plan's step is %s" % (name, step, text, op))
        if m.group(5) is not None and int(m.group(5)) != recv:
            fail("%s step %d: '%s': it receives from rank %d" % (name, step, text, recv))
        if m.group(6) is not None and int(m.group(6)) != send:
            fail("%s step %d: '%s': it sends to rank %d" % (name, step, text, send))


ring = os.path.join(root, "stdlib", "ring_allreduce.coll")

# N = 8 on the DGX H100 description.
page8 = os.path.join(out, "ring8.html")
run([collc, ring, "--nranks", "8", "--topology", os.path.join(root, "topologies", "dgx-h100.topo"),
     "--emit=html", "-o", page8, "-b", "1K", "-e", "1G", "-f", "4"])
steps8 = plan_steps(ring, 8)
dom, body, moves = load(page8, 0, "ring8")
# At the first step every rank sends its first chunk to the next rank,
# and the picture has one red arrow for each.
want = {(r, (r + 1) % 8) for r in range(8)}
got = set()
for text in moves:
    m = re.match(r"rank (\d+) tb \d+ step 0: s .*-> rank (\d+)$", text)
    if m:
        got.add((int(m.group(1)), int(m.group(2))))
if got != want or len(moves) != 8:
    fail("ring8 step 0: moves %s, want each rank sending to the next" % moves)
if body.get("arrows") != "8" or int(body.get("red-pixels", "0")) < 200:
    fail("ring8 step 0: drew %s arrows and %s red pixels" % (body.get("arrows"),
                                                              body.get("red-pixels")))
check_moves("ring8", 0, moves, steps8)
facts = re.search(r'id="facts">([^<]*)<', dom).group(1)
total_steps = int(re.search(r"(\d+) steps", facts).group(1))
# One bar per step run: the plan's steps once per slice.
if body.get("bars") != str(total_steps) or total_steps % len(steps8) != 0:
    fail("ring8: %s bars drawn, %d steps run, the plan has %d" % (body.get("bars"), total_steps,
                                                                  len(steps8)))
rows = re.findall(r"<tr>", re.search(r'<table id="predicted">(.*?)</table>', dom, re.S).group(1))
if len(rows) != 1 + 11:  # Header and 1K, 4K, ..., 1G.
    fail("ring8: the predicted table has %d rows" % len(rows))
last = int(re.search(r'id="step"[^>]*max="(\d+)"', dom).group(1))
if last < 10:
    fail("ring8: only %d slider positions" % (last + 1))
seen_ops = set()
for k in (1, last // 2, last):
    dom, body, moves = load(page8, k, "ring8")
    if body.get("step") != str(k):
        fail("ring8: the slider went to %s, not %d" % (body.get("step"), k))
    if not moves:
        fail("ring8 step %d: nothing listed" % k)
    check_moves("ring8", k, moves, steps8)
    seen_ops.update(re.match(r"rank \d+ tb \d+ step \d+: (\w+)", t).group(1) for t in moves)
    sends = sum(1 for t in moves if "-> rank" in t)
    if (sends > 0) != (int(body.get("red-pixels", "0")) > 0):
        fail("ring8 step %d: %d sends listed, %s red pixels" % (k, sends, body.get("red-pixels")))
if len(seen_ops) < 2:
    fail("ring8: the slider showed only %s" % seen_ops)

# N = 256 without a topology: nominal times, 64 groups of 4 ranks.
page256 = os.path.join(out, "ring256.html")
run([collc, ring, "--nranks", "256", "--emit=html", "-o", page256])
dom, body, moves = load(page256, 0, "ring256")
if body.get("moves") != "256" or len(moves) != 256:
    fail("ring256 step 0: %s moves (%d listed), want 256" % (body.get("moves"), len(moves)))
if body.get("arrows") != "64":
    fail("ring256 step 0: %s arrows between groups, want 64" % body.get("arrows"))
if "64 groups of 4 ranks" not in dom or "nominal" not in dom:
    fail("ring256: the page does not say it groups ranks and uses nominal times")
steps256 = plan_steps(ring, 256)
check_moves("ring256", 0, moves, steps256)
last = int(re.search(r'id="step"[^>]*max="(\d+)"', dom).group(1))
dom, body, moves = load(page256, last // 3, "ring256")
check_moves("ring256", last // 3, moves, steps256)
if not moves:
    fail("ring256 step %d: nothing listed" % (last // 3))

shutil.rmtree(profile, ignore_errors=True)
print("%d failures; screenshots in %s" % (len(failures), out))
sys.exit(1 if failures else 0)
