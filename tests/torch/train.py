"""Training through the collc backend: DDP against Gloo, and a pipeline.

DDP: one small model trained for a few hundred steps twice from the same
initial weights, once synchronised by collc (the default group) and once by
Gloo (a second group), on data distinct per rank. The final weights must
agree: bit for bit on 2 ranks (a sum of two is the same in any order), to
float rounding on more (the two backends add in different orders).

Pipeline: each rank is one stage of a model of Linear layers; activations go
forward and gradients backward with send/recv, micro-batch by micro-batch.
The loss and the stage's weights must match the same model trained in one
process (which every rank also computes).

    torchrun --nproc_per_node 4 tests/torch/train.py
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.environ.get("COLLC_TORCH_PATH", ""))
import collc_torch  # noqa: E402,F401

STEPS = int(os.environ.get("COLLC_TRAIN_STEPS", "200"))


def model():
    torch.manual_seed(1234)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 8))


def batch(rank, step):
    g = torch.Generator().manual_seed(rank * 100003 + step)
    return torch.randn(16, 32, generator=g), torch.randn(16, 8, generator=g)


def train_variant(rank, group, variant, steps):
    """DDP for `steps` steps: the plain loop (variant None), or as people run
    it besides: a communication hook (fp16 compression; PowerSGD, whose
    future callbacks issue all_reduces and wait for them),
    ZeroRedundancyOptimizer (broadcasts of the shards), and Join with a
    different number of batches per rank. Returns the final weights."""
    import contextlib
    from torch.distributed.algorithms.join import Join
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    from torch.distributed.optim import ZeroRedundancyOptimizer
    net = DDP(model(), process_group=group)
    if variant == "fp16 hook":
        net.register_comm_hook(group, default_hooks.fp16_compress_hook)
    elif variant == "PowerSGD hook":
        state = powerSGD_hook.PowerSGDState(process_group=group, matrix_approximation_rank=2,
                                            start_powerSGD_iter=3, min_compression_rate=0.5)
        net.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    if variant == "ZeRO":
        opt = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.SGD,
                                      process_group=group, lr=0.01, momentum=0.9)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    join = variant == "Join"
    with Join([net]) if join else contextlib.nullcontext():
        for step in range(steps + (2 * rank if join else 0)):
            x, y = batch(rank, step)
            opt.zero_grad()
            nn.functional.mse_loss(net(x), y).backward()
            opt.step()
    return [p.detach().clone() for p in net.module.parameters()]


def check_ddp(rank, n, failures):
    gloo = dist.new_group(backend="gloo")
    with_collc = train_variant(rank, dist.group.WORLD, None, STEPS)
    with_gloo = train_variant(rank, gloo, None, STEPS)
    worst = max((a - b).abs().max().item() for a, b in zip(with_collc, with_gloo))
    if n == 2:
        ok = all(torch.equal(a, b) for a, b in zip(with_collc, with_gloo))
    else:
        ok = all(torch.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(with_collc, with_gloo))
    # Every rank holds the same weights.
    for p in with_collc:
        q = p.clone()
        dist.broadcast(q, src=0)
        if not torch.equal(p, q):
            failures.append("rank %d: DDP replicas differ" % rank)
            break
    if not ok:
        failures.append("rank %d: DDP weights with collc and gloo differ by %g" % (rank, worst))
    print("rank %d: DDP %d steps, largest difference from gloo %g" % (rank, STEPS, worst),
          file=sys.stderr, flush=True)


def check_variants(rank, n, failures):
    gloo = dist.new_group(backend="gloo")
    steps = max(10, STEPS // 10)
    for variant in ["fp16 hook", "PowerSGD hook", "ZeRO", "Join"]:
        with_collc = train_variant(rank, dist.group.WORLD, variant, steps)
        with_gloo = train_variant(rank, gloo, variant, steps)
        worst = max((a - b).abs().max().item() for a, b in zip(with_collc, with_gloo))
        if n == 2:
            ok = all(torch.equal(a, b) for a, b in zip(with_collc, with_gloo))
        elif variant == "fp16 hook":
            # Sums of halves in another order differ by more than a float's
            # rounding, and training carries it on.
            ok = all(torch.allclose(a, b, rtol=0.05, atol=0.05)
                     for a, b in zip(with_collc, with_gloo))
        else:
            ok = all(torch.allclose(a, b, rtol=1e-4, atol=1e-5)
                     for a, b in zip(with_collc, with_gloo))
        if not ok:
            failures.append("rank %d: DDP with %s: weights with collc and gloo differ by %g" % (
                rank, variant, worst))
        for p in with_collc:
            q = p.clone()
            dist.broadcast(q, src=0)
            if not torch.equal(p, q):
                failures.append("rank %d: DDP with %s: replicas differ" % (rank, variant))
                break
        print("rank %d: DDP with %s, %d steps, largest difference from gloo %g" % (
            rank, variant, steps, worst), file=sys.stderr, flush=True)


def check_pipeline(rank, n, failures):
    torch.manual_seed(99)
    layers = [nn.Linear(24, 24) for _ in range(n)]
    reference = [nn.Linear(24, 24) for _ in range(n)]
    for a, b in zip(layers, reference):
        b.load_state_dict(a.state_dict())
    mine = layers[rank]
    opt = torch.optim.SGD(mine.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD([p for m in reference for p in m.parameters()], lr=0.05)
    micro, steps = 4, 20
    for step in range(steps):
        opt.zero_grad()
        ref_opt.zero_grad()
        losses = []
        for m in range(micro):
            g = torch.Generator().manual_seed(step * 1000 + m)
            x, y = torch.randn(8, 24, generator=g), torch.randn(8, 24, generator=g)
            # This rank's stage.
            if rank == 0:
                inp = x
            else:
                inp = torch.empty(8, 24)
                dist.recv(inp, src=rank - 1, tag=m)
            inp.requires_grad_(rank > 0)
            out = torch.tanh(mine(inp))
            if rank < n - 1:
                dist.send(out.detach(), dst=rank + 1, tag=m)
                grad = torch.empty(8, 24)
                dist.recv(grad, src=rank + 1, tag=1000 + m)
                out.backward(grad)
            else:
                loss = nn.functional.mse_loss(out, y)
                loss.backward()
                losses.append(loss.item())
            if rank > 0:
                dist.send(inp.grad, dst=rank - 1, tag=1000 + m)
            # The same micro-batch through the whole model, here.
            h = x
            for layer in reference:
                h = torch.tanh(layer(h))
            ref_loss = nn.functional.mse_loss(h, y)
            ref_loss.backward()
            if rank == n - 1 and abs(ref_loss.item() - losses[-1]) > 1e-5:
                failures.append("rank %d: pipeline loss %g, one process %g" % (
                    rank, losses[-1], ref_loss.item()))
        opt.step()
        ref_opt.step()
    for p, q in zip(mine.parameters(), reference[rank].parameters()):
        if not torch.allclose(p, q, rtol=1e-5, atol=1e-6):
            failures.append("rank %d: pipeline stage weights differ from one process's by %g" % (
                rank, (p - q).abs().max().item()))
            break


def main():
    dist.init_process_group("collc")
    rank, n = dist.get_rank(), dist.get_world_size()
    failures = []
    check_ddp(rank, n, failures)
    check_variants(rank, n, failures)
    check_pipeline(rank, n, failures)
    for f in failures:
        print(f, file=sys.stderr, flush=True)
    print("rank %d: %s" % (rank, "FAILED" if failures else "ok"), file=sys.stderr, flush=True)
    if failures:
        os._exit(1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
