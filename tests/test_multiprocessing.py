"""``tracec.multiprocessing``: shared-memory tensors seen across forked
processes (Hogwild), and ``spawn`` with PyTorch's error reporting."""
import textwrap

import numpy as np
import pytest

import tracec
import tracec.multiprocessing as mp
from program_runner import tracec_cli


def _hogwild_worker(model, rank):
    opt = tracec.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        loss = model(tracec.ones(1, 4) * (rank + 1)).sum()
        loss.backward()
        opt.step()


def test_share_memory_lets_forked_processes_update_one_model():
    tracec.manual_seed(0)
    model = tracec.nn.Linear(4, 2)
    before = model.weight.detach().clone()
    assert not model.weight.is_shared()
    model.share_memory()
    assert model.weight.is_shared() and model.bias.is_shared()
    np.testing.assert_array_equal(model.weight.detach().numpy(), before.numpy())
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_hogwild_worker, args=(model, r)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    # Each step subtracts lr * input from every weight row: 3 steps of
    # input 1 and 3 of input 2, whatever the interleaving.
    np.testing.assert_allclose(model.weight.detach().numpy(), before.numpy() - 0.1 * 9,
                               rtol=1e-5)
    # A view made afterwards shares the mapping; views cannot move alone.
    assert model.weight[0].is_shared()
    with pytest.raises(RuntimeError, match="not a view"):
        tracec.ones(4, 4)[1].share_memory_()


def _fails(i):
    if i == 1:
        raise ValueError("rank one is unhappy")


def test_spawn_reports_the_failing_process():
    with pytest.raises(mp.ProcessRaisedException, match="rank one is unhappy"):
        mp.spawn(_fails, nprocs=2, start_method="fork")
    ctx = mp.spawn(_fails, args=(), nprocs=1, join=False, start_method="fork")
    assert ctx.join() and len(ctx.pids()) == 1


def test_spawn_under_install_as_torch(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import torch
        import torch.multiprocessing as mp

        def run(rank, world, q):
            q.put((rank, world, float(torch.ones(3).sum())))

        if __name__ == "__main__":
            q = mp.get_context("spawn").SimpleQueue()
            mp.spawn(run, args=(2, q), nprocs=2, join=True)
            print(sorted([q.get(), q.get()]))
    """))
    out = tracec_cli(["run", str(script)], cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "[(0, 2, 3.0), (1, 2, 3.0)]"
