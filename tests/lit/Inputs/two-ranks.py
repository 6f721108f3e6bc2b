"""Runs a command as two ranks that meet through a store on this host:

    two-ranks.py COMMAND ARGS...

Every '{port}' in the arguments becomes a free TCP port of 127.0.0.1, rank 1
(the arguments and '--rank 1') runs in the background, rank 0 in the
foreground; prints rank 0's output and exits with the first failure's
status (rank 1's output goes to standard error when it fails)."""
import socket
import subprocess
import sys


def main():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [a.replace("{port}", str(port)) for a in sys.argv[1:]]
    other = subprocess.Popen(args + ["--rank", "1"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    first = subprocess.run(args + ["--rank", "0"], text=True, timeout=300)
    out, _ = other.communicate(timeout=300)
    if other.returncode != 0:
        sys.stderr.write(out)
    sys.exit(first.returncode or other.returncode)


if __name__ == "__main__":
    main()
