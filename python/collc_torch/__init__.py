"""Collc as a torch.distributed backend.

``import collc_torch`` registers the backend ``"collc"``::

    import torch.distributed as dist
    import collc_torch
    dist.init_process_group(backend="collc")

Every operation runs a Collc plan: the program ``collc select`` predicted
fastest on this host for the operation, the group's size and the message size
(the host table: ``calibrate_host()`` makes one for the host at hand, else
stdlib/host.select), then the standard library's (stdlib/default.select), or
the user's own before both (``COLLC_PLANS=DIR`` with ``DIR/collc.select``,
``use_selection_table()`` or ``use_program()``). Programs are compiled by
``collc`` for the group's size on first use and cached on disk
(``COLLC_CACHE_DIR``, default ``~/.cache/collc/plans``). See docs/pytorch.md.
"""

import sys

import torch
import torch.distributed as dist

from . import _C

__all__ = ["use_selection_table", "use_program", "forget_programs", "use_host_table",
           "calibrate_host", "plan_for", "paths", "empty", "last_direct_messages", "host_identity"]

_ANY = (1 << 64) - 1


def _create_process_group(store, rank, size, timeout):
    # A subgroup's ranks in the default group, which its error messages name
    # beside its own: torch's new_group() passes the backend none, but the
    # caller's frame holds them (empty for the default group, or when not
    # found).
    global_ranks = []
    try:
        frame = sys._getframe(1)
        ranks = frame.f_locals.get("global_ranks_in_group")
        if ranks and len(ranks) == size:
            global_ranks = [int(r) for r in ranks]
    except Exception:  # noqa: BLE001
        pass
    return _C.create_process_group(store, rank, size, timeout, global_ranks)


def _register():
    # PyTorch 2.x asks which devices a backend serves; 1.x does not.
    import inspect
    params = inspect.signature(dist.Backend.register_backend).parameters
    if "devices" in params:
        dist.Backend.register_backend("collc", _create_process_group, devices=["cpu"])
    else:
        dist.Backend.register_backend("collc", _create_process_group)


if "COLLC" not in dist.Backend._plugins:
    _register()


def use_selection_table(path):
    """Selects plans from the table at ``path`` before the standard library's.

    The table's format is the standard library's (stdlib/default.select):
    ``collective ranks max-bytes program [NAME=VALUE ...]`` per line. ``None``
    or ``""`` goes back to the standard library alone. Every rank of a group
    must select alike.
    """
    _C.use_selection_table(path or "")


def use_host_table(path):
    """Selects plans from the host table at ``path`` (a ``collc select``
    table) after the user's rows and before the standard library's, for
    groups within one host. ``"none"``: no host table; ``""``: the standard
    library's (stdlib/host.select). By default the table is
    ``COLLC_HOST_SELECT``, else the one ``calibrate_host()`` made for this
    host, else the standard library's. Every rank of a group must select
    alike."""
    _C.use_host_table(path)


def calibrate_host(path=None, ranks=(2, 3, 4, 8), use=True):
    """Measures this host (``coll-calibrate --ranks-as processes``) and has
    ``collc select`` write the host table from it at ``path`` (default:
    ``paths()["host_table_file"]``, which later processes take by default),
    with the description beside it (``.topo``). Run it once per host,
    before the jobs (``python3 -m collc_torch.calibrate``), not in each
    rank: ranks that measured apart could select apart. ``use``: take the
    table in this process too. Returns the table's path."""
    import os
    import shutil
    import subprocess
    where = paths()
    path = path or where["host_table_file"]
    if not path:
        raise RuntimeError("no place for the host table: set XDG_CACHE_HOME or HOME, or pass path")
    collc = where["collc"]
    calibrate = os.environ.get("COLLC_CALIBRATE")
    for c in ([calibrate] if calibrate else []) + [
            os.path.join(os.path.dirname(collc), "coll-calibrate"),
            os.path.join(os.path.dirname(os.path.dirname(collc)), "coll-calibrate",
                         "coll-calibrate"),
            shutil.which("coll-calibrate") or ""]:
        if c and os.access(c, os.X_OK):
            calibrate = c
            break
    else:
        raise RuntimeError("coll-calibrate not found beside %s nor on PATH "
                           "(set COLLC_CALIBRATE)" % collc)
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    base = path[:-len(".select")] if path.endswith(".select") else path
    topo, partial = base + ".topo", path + ".partial"

    def run(argv):
        out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True)
        if out.returncode != 0:
            raise RuntimeError("%s failed:\n%s" % (" ".join(argv), out.stdout))

    run([calibrate, "--ranks-as", "processes", "--name", "host", "-o", topo])
    run([collc, "select", "--topology", topo, "--stdlib", where["stdlib"],
         "--select-ranks", ",".join(str(int(r)) for r in ranks), "-o", partial])
    os.replace(partial, path)
    if use:
        use_host_table(path)
    return path


def use_program(collective, program, ranks=None, max_bytes=None, **params):
    """Runs ``collective`` with ``program`` (a ``.coll`` program or a ``.bin``
    plan) before any other choice.

    ``ranks`` is a group size or a ``(min, max)`` pair (``None``: any size);
    ``max_bytes`` the largest message it takes (``None``: any); ``params``
    the program's parameters (``collc -D NAME=VALUE``). Every rank of a group
    must select alike.
    """
    if ranks is None:
        lo, hi = 1, 0xFFFFFFFF
    elif isinstance(ranks, int):
        lo = hi = ranks
    else:
        lo, hi = ranks
    defines = ["%s=%s" % (k, v) for k, v in sorted(params.items())]
    _C.use_program(collective, str(program), lo, hi,
                   _ANY if max_bytes is None else int(max_bytes), defines)


def forget_programs(collective=None):
    """Drops what ``use_program()`` said for ``collective`` (for every
    collective when ``None``); returns how many of its rows went. Later
    calls select as if they had never been given."""
    return _C.forget_programs(collective or "")


def plan_for(collective, nranks, nbytes, root=0, across_hosts=False):
    """The plan this process runs ``collective`` with on ``nranks`` ranks for
    a message of ``nbytes`` (nccl-tests' size: the larger per-rank buffer),
    compiling it if need be: a dict of its name, collective, nranks, root,
    checksum, and the file it was loaded from (``file``: for coll-perf or
    coll-plan). Collective names are Collc's: allreduce, allgather,
    reducescatter, broadcast, reduce, gather, scatter, alltoall.
    ``across_hosts``: for a group whose ranks span hosts (the standard
    library's rows from stdlib/network.select)."""
    return _C.plan_for(collective, nranks, nbytes, root, across_hosts)


def paths():
    """The compiler, standard library, plan cache and host table this process
    uses (``host_table``: "" for none), and where ``calibrate_host()`` puts a
    host's table (``host_table_file``)."""
    return _C.paths()


def _backend(group):
    """Our backend object of ``group`` (None: the default group)."""
    if group is None:
        group = dist.distributed_c10d._get_default_group()
    elif group is dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError("collc: this rank is not a member of the group")
    # PyTorch 2.x wraps backends in a ProcessGroup; 1.x hands ours out.
    if hasattr(group, "_get_backend"):
        group = group._get_backend(torch.device("cpu"))
    return group


def empty(shape, dtype=torch.float32, group=None):
    """An uninitialised CPU tensor of ``shape`` and ``dtype`` in ``group``'s
    registered memory (the default group's when None).

    What this rank sends from such a tensor, its peers read where it lies
    instead of through a message slot (one copy instead of two): use it for
    buffers that collectives run on many times, as NCCL's registered
    buffers. The tensor (and its views) keeps the group's memory alive;
    ``group`` must use the collc backend."""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError("collc: negative dimension in the shape %s" % (shape,))
    numel = 1
    for d in shape:
        numel *= d
    itemsize = torch.empty((), dtype=dtype).element_size()
    raw = _C.alloc(_backend(group), max(numel * itemsize, 1))
    return raw[:numel * itemsize].view(dtype).view(shape)


def host_identity():
    """This process's host as collc groups tell hosts apart: ranks of equal
    identities share memory, the others talk over the network (the
    COLL_HOST environment variable, else the host name, its boot, its
    /dev/shm and its network namespace)."""
    return _C.host_identity()


def last_direct_messages(group=None):
    """How many messages this rank read where their sender left them (in
    registered memory, see ``empty``) in ``group``'s last collective."""
    return _C.last_direct_messages(_backend(group))
