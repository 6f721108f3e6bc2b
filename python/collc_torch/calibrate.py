"""Makes the collc backend's host table for this host.

    python3 -m collc_torch.calibrate [-o PATH] [--ranks 2,3,4,8]

It measures the host (coll-calibrate --ranks-as processes), has ``collc select``
pick the fastest predicted program per collective, group size and message
size, and writes the table where later processes take it by default
(``collc_torch.paths()["host_table_file"]``). See docs/pytorch.md.
"""

import argparse
import sys

import collc_torch


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m collc_torch.calibrate",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--output", default=None,
                   help="the table's path (default: the host table file that later processes "
                   "take, collc_torch.paths()['host_table_file'])")
    p.add_argument("--ranks", default="2,3,4,8",
                   help="group sizes to choose for (others fall through to the standard "
                   "library's table; default %(default)s)")
    args = p.parse_args(argv)
    try:
        ranks = [int(r) for r in args.ranks.split(",")]
    except ValueError:
        p.error("--ranks takes group sizes such as 2,4,8, not %r" % args.ranks)
    try:
        path = collc_torch.calibrate_host(args.output, ranks, use=False)
    except RuntimeError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    print("host table: %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
