"""Gaps the public programs of ``tests/programs/models41`` found, each against
torch: the "Channels Last Memory Format" tutorial's layouts.  PyTorch keeps a
channels-last (channels-last-3d) layout through ``clone()`` /
``clone(memory_format=torch.preserve_format)`` and a dtype cast (``to``,
``.double()``), lays out a convolution's result channels-last when its input
or its weight is, and a batch norm's and a pooling's when the input is;
an accumulated ``.grad`` takes its parameter's strides (the layout contract:
a channels-last conv weight's gradient is channels-last);
``to(memory_format=torch.contiguous_format)`` / ``.contiguous()`` still give
row-major.  A broadcasting error is PyTorch's sentence word for word.

And, from the "Writing Distributed Applications" tutorial: under ``tracec run``,
processes started with the ``spawn`` start method imported the real torch;
``init_process_group(backend='gloo')`` was refused, and send / recv /
isend / irecv / new_group were missing."""
import os
import pathlib
import socket

import numpy as np
import pytest
import torch

import tracec
from program_runner import run_cli

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _both(fn):
    """``fn(lib)`` under torch and tracec."""
    return fn(torch), fn(tracec)


def _cl(lib, shape=(2, 3, 4, 5), fmt="channels_last"):
    return lib.tensor(_arr(*shape)).to(memory_format=getattr(lib, fmt))


@pytest.mark.parametrize("op", ["clone", "clone_preserve", "clone_contiguous", "double", "to_copy",
                                "contiguous", "to_contiguous", "clone_cl_from_contiguous"])
def test_clone_and_cast_keep_channels_last(op):
    def run(lib):
        x = _cl(lib)
        y = {"clone": lambda: x.clone(),
             "clone_preserve": lambda: x.clone(memory_format=lib.preserve_format),
             "clone_contiguous": lambda: x.clone(memory_format=lib.contiguous_format),
             "double": lambda: x.double(),
             "to_copy": lambda: x.to(lib.float32, copy=True),
             "contiguous": lambda: x.contiguous(),
             "to_contiguous": lambda: x.to(memory_format=lib.contiguous_format),
             "clone_cl_from_contiguous": lambda: x.contiguous().clone(
                 memory_format=lib.channels_last)}[op]()
        return y.stride(), y.data_ptr() != x.data_ptr(), y.double().sum().item()
    t, c = _both(run)
    assert c[:2] == t[:2]
    assert c[2] == pytest.approx(t[2], rel=1e-6)


def test_clone_keeps_channels_last_3d_and_a_rank_error():
    t, c = _both(lambda lib: _cl(lib, (2, 3, 4, 5, 6), "channels_last_3d").clone().stride())
    assert c == t
    for lib in (torch, tracec):
        with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
            lib.tensor(_arr(2, 3, 4)).clone(memory_format=lib.channels_last)


@pytest.mark.parametrize("where", ["input", "weight", "both"])
def test_conv2d_result_and_weight_grad_follow_channels_last(where):
    def run(lib):
        lib.manual_seed(0)
        conv = lib.nn.Conv2d(4, 3, 3)
        if where != "input":
            conv = conv.to(memory_format=lib.channels_last)
        x = lib.tensor(_arr(2, 4, 6, 5), requires_grad=True)
        if where != "weight":
            x = x.to(memory_format=lib.channels_last)
        y = conv(x)
        (y * y).sum().backward()
        return (y.stride(), y.grad_fn.name(), conv.weight.grad.stride(),
                y.detach().numpy().copy(), conv.weight.grad.numpy().copy())
    t, c = _both(run)
    assert c[:3] == t[:3]
    np.testing.assert_allclose(c[3], t[3], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c[4], t[4], rtol=1e-4, atol=1e-4)


def test_conv3d_batch_norm_and_pooling_keep_channels_last():
    def run(lib):
        lib.manual_seed(0)
        x = _cl(lib, (2, 3, 6, 6))
        bn = lib.nn.BatchNorm2d(3)
        y = bn(x)
        m = lib.nn.MaxPool2d(2)(y)
        a = lib.nn.AvgPool2d(2)(y)
        conv3 = lib.nn.Conv3d(3, 2, 3)
        z = conv3(_cl(lib, (2, 3, 4, 5, 6), "channels_last_3d"))
        return (y.stride(), m.stride(), a.stride(), z.stride(),
                m.sum().item(), z.sum().item())
    t, c = _both(run)
    assert c[:4] == t[:4]
    assert c[4:] == pytest.approx(t[4:], rel=1e-5, abs=1e-5)


def test_grad_of_a_permuted_parameter_takes_its_strides():
    def run(lib):
        w = lib.nn.Parameter(lib.tensor(_arr(3, 4)).t())    # strides (1, 4)
        (w * 2).sum().backward()
        return w.grad.stride(), w.grad.sum().item()
    t, c = _both(run)
    assert c == t


@pytest.mark.parametrize("shapes", [((2, 3), (3, 2)), ((4, 3, 2), (4, 3)), ((4, 3, 2), (0,))])
def test_broadcast_error_is_pytorchs_sentence_word_for_word(shapes):
    # the "Introduction to PyTorch Tensors" tutorial prints it; tracec
    # appended "(broadcasting shapes ... and ...)"
    def run(lib):
        with pytest.raises(RuntimeError) as e:
            lib.ones(*shapes[0]) * lib.ones(*shapes[1])
        return str(e.value)
    t, c = _both(run)
    assert c == t


SPAWN_SCRIPT = """
import torch
import torch.multiprocessing as mp


def work(rank, q):
    q.put((rank, "tracec" in torch.__file__, float(torch.ones(2).sum())))


if __name__ == "__main__":
    mp.set_start_method("spawn")
    q = mp.Queue()
    ps = [mp.Process(target=work, args=(r, q)) for r in range(2)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    print(sorted(q.get() for _ in ps), [p.exitcode for p in ps])
"""


def test_spawned_children_of_tracec_run_import_tracec_as_torch(tmp_path):
    # the dist tutorial's mp.set_start_method("spawn") + mp.Process: the
    # children are fresh interpreters, and their `import torch` found the
    # installed torch
    (tmp_path / "spawn_children.py").write_text(SPAWN_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    r = run_cli(["run", "spawn_children.py"], tmp_path, env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0] == "[(0, True, 2.0), (1, True, 2.0)] [0, 0]"


GLOO_SCRIPT = """
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def work(rank, size, q):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = os.environ['GLOO_TEST_PORT']
    dist.init_process_group('gloo', rank=rank, world_size=size)
    out = []
    t = torch.tensor([rank + 1.0, 10.0 * rank])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    out.append(t.tolist())
    m = torch.tensor([float(rank)])
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    out.append(m.item())
    b = torch.full((2,), float(rank))
    dist.broadcast(b, src=2)
    out.append(b.tolist())
    g = [torch.zeros(1, dtype=torch.int64) for _ in range(size)]
    dist.all_gather(g, torch.tensor([rank * 7]))
    out.append([x.item() for x in g])
    # a ring of isend / irecv, then blocking send / recv the other way
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    got = torch.zeros(3)
    reqs = [dist.isend(torch.arange(3.0) + rank, dst=nxt), dist.irecv(got, src=prv)]
    for r in reqs:
        r.wait()
    out.append(got.tolist())
    if rank == 0:
        dist.send(torch.ones(2), dst=1)
    elif rank == 1:
        try:
            dist.recv(torch.zeros(3), src=0)
        except RuntimeError as e:
            out.append(str(e))
    try:
        dist.new_group([0, 1])
    except NotImplementedError as e:
        out.append(str(e))
    dist.barrier()
    out.append((dist.get_backend(), dist.get_world_size()))
    dist.destroy_process_group()
    q.put((rank, out))


if __name__ == "__main__":
    mp.set_start_method("spawn")
    q = mp.Queue()
    ps = [mp.Process(target=work, args=(r, 3, q)) for r in range(3)]
    for p in ps:
        p.start()
    res = dict(q.get(timeout=60) for _ in ps)
    for p in ps:
        p.join()
    for r in range(3):
        print(r, res[r])
    print([p.exitcode for p in ps])
"""


def _free_ports(n: int) -> int:
    """A port p with p .. p + n - 1 free now (rank r of a gloo group
    listens on MASTER_PORT + r; xdist workers run these tests at once)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        try:
            for k in range(1, n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p + k))
            return p
        except OSError:
            continue
    raise RuntimeError("no free ports")


def test_gloo_backend_over_processes_the_script_starts(tmp_path):
    # the dist tutorial's init_process: backend='gloo' with MASTER_ADDR /
    # MASTER_PORT among mp.Process ranks; tracec had backend='mpi' only and
    # no send / recv / isend / irecv
    (tmp_path / "gloo.py").write_text(GLOO_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "GLOO_TEST_PORT": str(_free_ports(2))}
    r = run_cli(["run", "gloo.py"], tmp_path, env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[-1] == "[0, 0, 0]", r.stderr[-3000:]
    common = "[6.0, 30.0], 2.0, [2.0, 2.0], [0, 7, 14]"
    sub = "'new_group: tracec.distributed has the default group only, not a subgroup of ranks [0, 1]'"
    assert lines[0] == f"0 [{common}, [2.0, 3.0, 4.0], {sub}, ('gloo', 3)]"
    assert lines[1] == (f"1 [{common}, [0.0, 1.0, 2.0], 'recv: rank 0 sent 8 bytes, but the "
                        f"receiving tensor holds 12 (float32, shape [3])', {sub}, ('gloo', 3)]")
    assert lines[2] == f"2 [{common}, [1.0, 2.0, 3.0], {sub}, ('gloo', 3)]"


def test_unknown_backend_names_the_supported_ones():
    with pytest.raises(ValueError, match="supports backend='mpi' .* and 'gloo' .* got 'nccl'"):
        tracec.distributed.init_process_group("nccl", rank=0, world_size=1)


DDP_SCRIPT = """
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class ToyModel(nn.Module):
    def __init__(self):
        super(ToyModel, self).__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def setup(rank, world_size):
    os.environ['MASTER_ADDR'] = 'localhost'
    os.environ['MASTER_PORT'] = os.environ['GLOO_TEST_PORT']
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def demo_basic(rank, world_size, q):
    setup(rank, world_size)
    torch.manual_seed(rank)          # different initial weights: DDP broadcasts rank 0's
    model = ToyModel()
    ddp_model = DDP(model)
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(4, 10, generator=g), torch.randn(4, 5, generator=g)
    for _ in range(3):
        optimizer.zero_grad()
        loss_fn(ddp_model(x[2 * rank:2 * rank + 2]), y[2 * rank:2 * rank + 2]).backward()
        optimizer.step()
    q.put((rank, [round(v, 5) for v in model.net2.bias.tolist()]))
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.set_start_method("spawn")
    q = mp.Queue()
    ps = [mp.Process(target=demo_basic, args=(r, 2, q)) for r in range(2)]
    for p in ps:
        p.start()
    res = dict(q.get(timeout=60) for _ in ps)
    for p in ps:
        p.join()
    torch.manual_seed(0)
    model = ToyModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(4, 10, generator=g), torch.randn(4, 5, generator=g)
    for _ in range(3):
        optimizer.zero_grad()
        nn.MSELoss()(model(x), y).backward()
        optimizer.step()
    print(res[0] == res[1], res[0] == [round(v, 5) for v in model.net2.bias.tolist()], res[0])
    print([p.exitcode for p in ps])
"""


def test_ddp_over_gloo_equals_one_process_on_the_whole_batch(tmp_path):
    # the "Getting Started with DDP" pattern: DDP(model) in spawned ranks on
    # init_process_group("gloo"); rank 0's weights are broadcast and the
    # gradients averaged, so both ranks end with the parameters one process
    # gets on the concatenated batch (DDP reduced through pg.fint, MPI's)
    (tmp_path / "ddp.py").write_text(DDP_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "GLOO_TEST_PORT": str(_free_ports(1))}
    r = run_cli(["run", "ddp.py"], tmp_path, env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("True True ["), r.stdout
    assert lines[1] == "[0, 0]"


def test_backend_availability_checks():
    # tutorials test `dist.is_gloo_available()` before choosing the backend
    dist = tracec.distributed
    assert dist.is_gloo_available() is True and dist.is_nccl_available() is False
    assert dist.is_mpi_available() == dist.is_available()
