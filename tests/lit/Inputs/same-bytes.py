"""Compares files byte for byte, since lit's internal shell has no `cmp`.

  same-bytes.py A B [C ...]
      exit 0 if every file equals A; else print the first difference, exit 1
  same-bytes.py --same A B --differ A C ...
      check each pair in turn: --same pairs must be equal, --differ pairs
      must differ; exit 1 at the first pair that does not

Empty or missing files are errors, so a command that wrote nothing cannot
make two outputs look "the same".
"""
import sys


def read(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        sys.exit("same-bytes.py: cannot read %s: %s" % (path, e.strerror))
    if not data:
        sys.exit("same-bytes.py: %s is empty" % path)
    return data


def check(want_same, a, b):
    da, db = read(a), read(b)
    if want_same and da != db:
        at = next((i for i, (x, y) in enumerate(zip(da, db)) if x != y), min(len(da), len(db)))
        sys.exit("same-bytes.py: %s and %s differ at byte %d (sizes %d and %d)"
                 % (a, b, at, len(da), len(db)))
    if not want_same and da == db:
        sys.exit("same-bytes.py: %s and %s are identical (%d bytes)" % (a, b, len(da)))


args = sys.argv[1:]
if args and args[0] in ("--same", "--differ"):
    while args:
        if len(args) < 3 or args[0] not in ("--same", "--differ"):
            sys.exit(__doc__)
        check(args[0] == "--same", args[1], args[2])
        args = args[3:]
elif len(args) >= 2:
    for other in args[1:]:
        check(True, args[0], other)
else:
    sys.exit(__doc__)
