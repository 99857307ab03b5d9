"""Run by tests/distributed/test_distributed.py under ``mpiexec -n 2`` (or
alone, as a world of size 1): ``python worker.py CASE...``.  Each case
asserts on every rank; a failure raises, which aborts the job (the test
then sees a non-zero exit code and the rank's message)."""
from __future__ import annotations

import sys

import numpy as np

import tracec as torch
import tracec.distributed as dist
import tracec.nn.functional as F
from tracec import nn
from tracec.nn.parallel import DistributedDataParallel as DDP
from tracec.utils.data import TensorDataset
from tracec.utils.data.distributed import DistributedSampler

B, D_IN, D_H, D_OUT, STEPS = 4, 12, 16, 5, 5


def case_collectives(rank, world):
    t = torch.tensor([1.0, 2.0, 3.0]) * (rank + 1)
    dist.all_reduce(t)
    s = sum(range(1, world + 1))
    assert np.allclose(t.numpy(), [s, 2 * s, 3 * s]), t
    t = torch.tensor([1.0, -2.0]) * (rank + 1)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    assert np.allclose(t.numpy(), [world, -2.0]), t
    t = torch.full((2, 3), float(rank), dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert np.allclose(t.numpy(), (world - 1) / 2) and t.dtype is torch.float64, t
    t = torch.arange(4) + 10 * rank
    dist.broadcast(t, src=world - 1)
    assert t.tolist() == [10 * (world - 1) + i for i in range(4)], t
    out = [torch.zeros(2, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(out, torch.tensor([rank, rank * rank]))
    assert [o.tolist() for o in out] == [[r, r * r] for r in range(world)], out
    dist.barrier()
    # compiled collectives equal eager ones
    @torch.compile
    def f(x):
        y = x * 2
        dist.all_reduce(y)
        g = [torch.zeros_like(x) for _ in range(world)]
        dist.all_gather(g, x)
        m = x + 0.5
        dist.all_reduce(m, op=dist.ReduceOp.AVG)   # divides by the size when it runs
        return y, torch.stack(g), m
    for k in range(3):
        x = torch.arange(6, dtype=torch.float32).reshape(2, 3) + rank + k
        y, g, m = f(x)
        assert np.allclose(m.numpy(), torch.arange(6.).reshape(2, 3).numpy() + k + 0.5
                           + (world - 1) / 2), m
        want = sum((torch.arange(6, dtype=torch.float32).reshape(2, 3) + r + k) * 2
                   for r in range(world))
        assert np.allclose(y.numpy(), want.numpy()), (y, want)
        assert np.allclose(g.numpy(), np.stack([(torch.arange(6.).reshape(2, 3) + r + k).numpy()
                                                for r in range(world)]))
    assert f.cache_info().traces == 1 if hasattr(f.cache_info(), "traces") else True


def case_rooted(rank, world):
    """reduce / gather / scatter / reduce-scatters / all_to_all and the
    object collectives over MPI (tests/programs/dist checks them against
    PyTorch's gloo); the tensor ones compiled too."""
    t = torch.tensor([rank + 1.0, 2.0 * rank])
    dist.reduce(t, dst=world - 1)
    if rank == world - 1:
        assert t.tolist() == [sum(r + 1.0 for r in range(world)), sum(2.0 * r for r in range(world))], t
    else:
        assert t.tolist() == [rank + 1.0, 2.0 * rank], t      # left as it was
    g = [torch.zeros(2, dtype=torch.int64) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.tensor([rank, 7]), gather_list=g, dst=0)
    if rank == 0:
        assert [x.tolist() for x in g] == [[r, 7] for r in range(world)], g
    s = torch.zeros(3)
    dist.scatter(s, [torch.arange(3.0) + 10 * r for r in range(world)] if rank == 0 else None, src=0)
    assert s.tolist() == [10.0 * rank + i for i in range(3)], s
    rs = torch.zeros(2)
    dist.reduce_scatter(rs, [torch.full((2,), float(rank + r)) for r in range(world)])
    assert rs.tolist() == [float(sum(r + rank for r in range(world)))] * 2, rs
    rst = torch.zeros(2)
    dist.reduce_scatter_single(rst, torch.arange(2.0 * world) * (rank + 1))
    tot = sum(r + 1 for r in range(world))
    assert rst.tolist() == [(2.0 * rank) * tot, (2.0 * rank + 1) * tot], rst
    outs = [torch.zeros(1) for _ in range(world)]
    dist.all_to_all(outs, [torch.tensor([100.0 * rank + r]) for r in range(world)])
    assert [o.item() for o in outs] == [100.0 * r + rank for r in range(world)], outs
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "t": torch.tensor([rank * 0.5])})
    assert [o["rank"] for o in objs] == list(range(world)) and objs[-1]["t"].item() == (world - 1) * 0.5
    cfg = ["cfg", {"lr": 0.1}] if rank == 0 else [None, None]
    dist.broadcast_object_list(cfg, src=0)
    assert cfg == ["cfg", {"lr": 0.1}], cfg
    got = [None] * world if rank == world - 1 else None
    dist.gather_object(rank * 3, got, dst=world - 1)
    assert rank != world - 1 or got == [3 * r for r in range(world)], got
    box = [None]
    dist.scatter_object_list(box, [("part", r) for r in range(world)] if rank == 0 else None, src=0)
    assert box == [("part", rank)], box

    @torch.compile
    def f(x):
        parts = torch.zeros(2)
        dist.reduce_scatter_single(parts, x)
        whole = [torch.zeros(2) for _ in range(world)] if rank == 0 else None
        dist.gather(parts, whole, dst=0)
        return parts * 1, (torch.stack(whole) if rank == 0 else parts * 0)
    for k in range(3):
        x = torch.arange(2.0 * world) + k + rank
        parts, whole = f(x)
        want = sum(torch.arange(2.0 * world) + k + r for r in range(world))
        assert parts.tolist() == want[2 * rank:2 * rank + 2].tolist(), (parts, want)
        if rank == 0:
            assert whole.reshape(-1).tolist() == want.tolist(), whole


def case_comm_runtime(rank, world):
    """The communicator's handle is data the native code reads when it runs
    (signature["comms"]), recorded with the IR it is part of: two groups
    give two compiled codes, each reducing over its own communicator."""
    from mpi4py import MPI
    alone = dist.ProcessGroup(MPI.COMM_SELF)

    def over(group):
        def f(x):
            dist.all_reduce(x, group=group)
            return x + 1
        return torch.compile(f)
    fw, fs = over(None), over(alone)
    for _ in range(2):
        x = torch.ones(3)
        assert fw(x).tolist() == [world + 1] * 3 and x.tolist() == [world] * 3
        assert fs(torch.ones(3)).tolist() == [2.0] * 3
    sig_w = fw._last.ensure_compiled().signature
    sig_s = fs._last.ensure_compiled().signature
    assert sig_w["comms"] == [MPI.COMM_WORLD.py2f()], sig_w.get("comms")
    assert sig_s["comms"] == [MPI.COMM_SELF.py2f()], sig_s.get("comms")
    # the argument reduced in place is donated: MPI_IN_PLACE into its own
    # storage, no output buffer and no copy back
    assert [j for _, j in sig_w["donated"]] == [0] and sig_w["atomic"], sig_w


def _model():
    return nn.Sequential(nn.Linear(D_IN, D_H), nn.ReLU(), nn.Linear(D_H, D_OUT))


def _data(world):
    g = np.random.default_rng(7)
    x = g.standard_normal((STEPS, world * B, D_IN)).astype(np.float32)
    y = g.integers(0, D_OUT, (STEPS, world * B))
    return torch.from_numpy(x), torch.from_numpy(y)


def _train(rank, world, opt_name, compiled):
    torch.manual_seed(0)
    ref = _model()
    local = _model()
    local.load_state_dict(ref.state_dict())
    if rank:  # DDP must overwrite this with rank 0's parameters
        with torch.no_grad():
            for p in local.parameters():
                p.add_(1.0)
    model = DDP(local)
    make = (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)) if opt_name == "sgd" \
        else (lambda ps: torch.optim.Adam(ps, lr=0.01))
    opt, ref_opt = make(model.parameters()), make(ref.parameters())

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    run = torch.compile(step) if compiled else step
    xs, ys = _data(world)
    for s in range(STEPS):
        run(xs[s, rank * B:(rank + 1) * B], ys[s, rank * B:(rank + 1) * B])
        ref_opt.zero_grad()
        F.cross_entropy(ref(xs[s]), ys[s]).backward()
        ref_opt.step()
    for (n, p), (_, q) in zip(model.module.named_parameters(), ref.named_parameters()):
        assert np.allclose(p.detach().numpy(), q.detach().numpy(), atol=1e-5, rtol=1e-4), \
            f"rank {rank} {opt_name} compiled={compiled}: {n} differs by " \
            f"{np.abs(p.detach().numpy() - q.detach().numpy()).max()}"
    assert list(model.state_dict())[0] == "module.0.weight"
    if compiled:
        info = run.cache_info()
        assert getattr(info, "traces", 1) <= 2, info


def case_ddp(rank, world):
    for opt_name in ("sgd", "adam"):
        for compiled in (False, True):
            _train(rank, world, opt_name, compiled)


def case_no_sync(rank, world):
    torch.manual_seed(0)
    model = DDP(nn.Linear(3, 2))
    x = torch.full((2, 3), float(rank + 1))
    with model.no_sync():
        model(x).sum().backward()
    local = model.module.weight.grad.clone()
    assert np.allclose(local.numpy(), 2 * (rank + 1)), local   # not reduced
    model(x).sum().backward()                                  # reduces the accumulated sum
    mean = np.mean([4 * (r + 1) for r in range(world)])
    assert np.allclose(model.module.weight.grad.numpy(), mean), model.module.weight.grad


def case_sampler(rank, world):
    ds = TensorDataset(torch.arange(23))
    for drop_last in (False, True):
        for epoch in (0, 1):
            s = DistributedSampler(ds, shuffle=True, seed=3, drop_last=drop_last)
            s.set_epoch(epoch)
            mine = list(s)
            assert len(mine) == len(s)
            every = [None] * world
            gathered = [torch.zeros(len(mine), dtype=torch.int64) for _ in range(world)]
            dist.all_gather(gathered, torch.tensor(mine))
            every = [g.tolist() for g in gathered]
            flat = [i for shard in every for i in shard]
            if drop_last:
                assert len(set(flat)) == len(flat) == (23 // world) * world
            else:
                assert set(flat) == set(range(23)) and len(flat) == -(-23 // world) * world
    s0, s1 = DistributedSampler(ds, seed=3), DistributedSampler(ds, seed=3)
    s1.set_epoch(1)
    assert list(s0) != list(s1)


def case_fault_exception(rank, world):
    if rank == world - 1:
        raise ValueError(f"boom on rank {rank}")
    dist.barrier()   # the other ranks wait here: the abort must end them


def case_fault_shape(rank, world):
    t = torch.ones(3 + rank)
    dist.all_reduce(t)


def case_fault_shape_compiled(rank, world):
    @torch.compile
    def f(x):
        dist.all_reduce(x)
        return x * 1
    f(torch.ones(4))
    f(torch.ones(4))
    f(torch.ones(4 + rank))     # rank 1 retraces; its eager check meets rank 0's native one


def case_syncbn(rank, world):
    """Each rank normalizes its slice of one batch with SyncBatchNorm: the
    outputs, the input gradients and the running statistics equal a single
    BatchNorm over the whole batch; the affine gradients summed over ranks
    equal its gradients (eager and compiled)."""
    rng = np.random.default_rng(7)
    full = rng.standard_normal((2 * world, 3, 4, 4)).astype(np.float32)
    cot = rng.standard_normal(full.shape).astype(np.float32)
    lo, hi = 2 * rank, 2 * rank + 2
    ref = nn.BatchNorm2d(3)
    xr = torch.tensor(full, requires_grad=True)
    (ref(xr) * torch.tensor(cot)).sum().backward()
    want = ref(torch.tensor(full)).detach()    # second call: running stats of two steps
    for compiled in (False, True):
        bn = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm2d(3)))[0]
        assert isinstance(bn, nn.SyncBatchNorm)

        def fwd_bwd(x, c):
            y = bn(x)
            (y * c).sum().backward()
            return y
        run = torch.compile(fwd_bwd) if compiled else fwd_bwd
        x = torch.tensor(full[lo:hi], requires_grad=True)
        y = run(x, torch.tensor(cot[lo:hi]))
        assert np.allclose(x.grad.numpy(), xr.grad.numpy()[lo:hi], atol=1e-5), compiled
        g = bn.weight.grad.clone()
        dist.all_reduce(g)
        assert np.allclose(g.numpy(), ref.weight.grad.numpy(), atol=1e-4), (compiled, g)
        bn.weight.grad = None
        bn.bias.grad = None
        x2 = torch.tensor(full[lo:hi], requires_grad=True)
        y = run(x2, torch.tensor(cot[lo:hi]))
        assert np.allclose(y.detach().numpy(), want.numpy()[lo:hi], atol=1e-5), compiled
        assert np.allclose(bn.running_var.numpy(), ref.running_var.numpy(), atol=1e-6), compiled
        assert np.allclose(bn.running_mean.numpy(), ref.running_mean.numpy(), atol=1e-6)


def main(cases):
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    for name in cases:
        globals()[f"case_{name}"](rank, world)
        print(f"rank {rank}/{world}: {name} ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
