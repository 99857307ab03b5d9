"""Data-parallel training over MPI: the 784-512-512-10 MLP step (SGD with
momentum, batch 256 per rank) on 1 rank and on 2 ranks, each rank pinned to
one core and running one thread, eager and compiled; the scaling
efficiency (2-rank throughput over twice the 1-rank throughput, with the
per-rank batch fixed); and the compiled step's all-reduce (one
``tracec.compile``d ``dist.all_reduce`` of the DDP gradient buckets) against
mpi4py's own ``Allreduce`` of the same buffers.

    python benchmarks/ddp.py            # launches mpiexec -n 1 and -n 2 itself
    python benchmarks/ddp.py --steps 30

Goal (issue 14): the compiled all-reduce within 10% of mpi4py's.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

# Child processes write and reuse bytecode, as on a user's machine: with
# PYTHONDONTWRITEBYTECODE set, each one compiled tracec from source (~0.5 s).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

BATCH = 256


def worker(steps: int) -> None:
    import numpy as np
    from mpi4py import MPI
    import tracec
    import tracec.distributed as dist
    import tracec.nn.functional as F
    from tracec import nn
    from tracec.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    tracec.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10)))
    opt = tracec.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = tracec.randn(BATCH, 784)
    y = tracec.randint(0, 10, (BATCH,))

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    out = {"world": world}
    for mode, fn in (("eager", step), ("compiled", tracec.compile(step))):
        for _ in range(3):
            fn(x, y)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(steps):
            fn(x, y)
        dist.barrier()
        out[mode] = (time.perf_counter() - t0) / steps

    # The all-reduce alone: DDP's buckets, compiled vs mpi4py.
    bufs = [tracec.zeros(sum(p.numel() for p in b)) for b in model._buckets]

    @tracec.compile
    def reduce(*bs):
        for b in bs:
            dist.all_reduce(b)
        return bs
    arrays = [b.numpy().copy() for b in bufs]
    outs = [np.empty_like(a) for a in arrays]
    comm = MPI.COMM_WORLD

    def mpi4py_reduce():
        for a, o in zip(arrays, outs):
            comm.Allreduce(a, o)

    def mpi4py_reduce_in_place():
        # what the compiled call does (plus a 64-byte type check): the
        # argument is donated, reduced with MPI_IN_PLACE in its own storage
        for a in arrays:
            comm.Allreduce(MPI.IN_PLACE, a)
    rec, recs = np.zeros(8, np.int64), np.zeros(8 * world, np.int64)
    reps = max(steps * 4, 50)
    for name, fn in (("allreduce_compiled", lambda: reduce(*bufs)),
                     ("allreduce_mpi4py", mpi4py_reduce),
                     ("allreduce_mpi4py_in_place", mpi4py_reduce_in_place),
                     ("type_check", lambda: comm.Allgather(rec, recs))):
        best = float("inf")
        for _ in range(3):
            fn()
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            comm.Barrier()
            best = min(best, (time.perf_counter() - t0) / reps)
        out[name] = best
    out["bucket_floats"] = [a.size for a in arrays]
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)
    dist.destroy_process_group()


def launch(steps: int) -> None:
    mpiexec = shutil.which("mpiexec") or shutil.which(
        "mpiexec", path=os.path.dirname(sys.executable))
    if mpiexec is None:
        sys.exit("benchmarks/ddp.py: no mpiexec (pip install 'tracec[distributed]')")
    env = dict(os.environ, TRACEC_NUM_THREADS="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    res = {}
    for n in (1, 2):
        p = subprocess.run([mpiexec, "-n", str(n), sys.executable, os.path.abspath(__file__),
                            "--worker", "--steps", str(steps)], capture_output=True, text=True,
                           env=env, timeout=900)
        line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if p.returncode or line is None:
            sys.exit(f"mpiexec -n {n} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        res[n] = json.loads(line[len("RESULT "):])
    print(f"784-512-512-10 MLP, SGD momentum, batch {BATCH} per rank, one core and one "
          f"thread per rank ({os.cpu_count()} cores on this machine)")
    print(f"{'':10} {'1 rank ms/step':>15} {'2 ranks ms/step':>16} {'samples/s 1':>12} "
          f"{'samples/s 2':>12} {'efficiency':>11}")
    for mode in ("eager", "compiled"):
        t1, t2 = res[1][mode], res[2][mode]
        s1, s2 = BATCH / t1, 2 * BATCH / t2
        print(f"{mode:10} {t1 * 1e3:15.2f} {t2 * 1e3:16.2f} {s1:12.0f} {s2:12.0f} "
              f"{s2 / (2 * s1):11.1%}")
    c, m = res[2]["allreduce_compiled"], res[2]["allreduce_mpi4py"]
    floats = res[2]["bucket_floats"]
    print(f"all-reduce of the gradient buckets ({'+'.join(map(str, floats))} float32) on 2 "
          f"ranks: compiled {c * 1e3:.3f} ms, mpi4py Allreduce {m * 1e3:.3f} ms "
          f"(compiled / mpi4py = {c / m:.2f}); mpi4py Allreduce(IN_PLACE) (the compiled "
          f"call's MPI work) {res[2]['allreduce_mpi4py_in_place'] * 1e3:.3f} ms; "
          f"the 64-byte type check {res[2]['type_check'] * 1e6:.1f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.steps)
    else:
        launch(a.steps)


if __name__ == "__main__":
    main()
