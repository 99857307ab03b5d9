"""``tracec build`` of a DistributedDataParallel training step: the library
takes the communicator (``MPI_Fint comm``) as its last argument, a C
driver compiled with mpicc runs it under ``mpiexec -n 2``, and after 5
steps every rank's parameters equal one Python process trained (eagerly)
on the concatenated batches.  The library was built in a world of one, so
the same library also runs alone (``-n 1``) and matches Python there."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("mpi4py", reason="tracec.distributed needs mpi4py (extra 'distributed')")

from test_distributed import MPIEXEC, _env  # noqa: E402

MPICC = shutil.which("mpicc", path=os.path.dirname(sys.executable)) or shutil.which("mpicc")
pytestmark = pytest.mark.skipif(MPIEXEC is None or MPICC is None or
                                (shutil.which("cc") or shutil.which("gcc")) is None,
                                reason="needs mpiexec, mpicc and a C compiler")

B, D_IN, D_H, D_OUT, STEPS = 4, 12, 16, 5, 5

USER = textwrap.dedent(f"""
    import tracec
    import tracec.distributed as dist
    import tracec.nn.functional as F
    from tracec import nn
    from tracec.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")
    tracec.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear({D_IN}, {D_H}), nn.ReLU(), nn.Linear({D_H}, {D_OUT})))
    opt = tracec.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
""")

# argv: library data prefix, output prefix.  Reads data_<rank>.bin (per
# step: x then y of this rank), runs the steps, writes out_<rank>.txt: one
# line per parameter, its Python name then its values.
DRIVER = textwrap.dedent(r"""
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    #include <mpi.h>
    #include "libstep.h"

    int main(int argc, char **argv) {
        MPI_Init(&argc, &argv);
        int rank, size;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        void *buf[TRAIN_STEP_NUM_ARGS];
        int ix = -1, iy = -1;
        for (int i = 0; i < train_step_num_args; i++) {
            const tracec_arg *a = &train_step_args[i];
            buf[i] = calloc(a->numel + 1, a->itemsize);
            if (!strcmp(a->name, "x")) ix = i;
            if (!strcmp(a->name, "y")) iy = i;
        }
        if (ix < 0 || iy < 0 || train_step_init_state_argv(buf)) return 2;
        char path[4096];
        snprintf(path, sizeof path, "%s_%d.bin", argv[1], rank);
        FILE *f = fopen(path, "rb");
        if (!f) return 3;
        const tracec_arg *ax = &train_step_args[ix], *ay = &train_step_args[iy];
        for (int s = 0; s < STEPS; s++) {
            if (fread(buf[ix], ax->itemsize, ax->numel, f) != (size_t)ax->numel) return 4;
            if (fread(buf[iy], ay->itemsize, ay->numel, f) != (size_t)ay->numel) return 4;
            int rc = train_step_argv(buf, MPI_Comm_c2f(MPI_COMM_WORLD));
            if (rc) {
                fprintf(stderr, "rank %d: %s\n", rank, train_step_error_message(rc));
                MPI_Abort(MPI_COMM_WORLD, 5);
            }
        }
        fclose(f);
        snprintf(path, sizeof path, "%s_%d.txt", argv[2], rank);
        f = fopen(path, "w");
        for (int i = 0; i < train_step_num_args; i++) {
            const tracec_arg *a = &train_step_args[i];
            if (a->role != TRACEC_ROLE_PARAMETER) continue;
            fprintf(f, "%s", a->source);
            for (int64_t k = 0; k < a->numel; k++) fprintf(f, " %.9g", ((float *)buf[i])[k]);
            fprintf(f, "\n");
        }
        fclose(f);
        printf("rank %d/%d done\n", rank, size);
        MPI_Finalize();
        return 0;
    }
""").replace("STEPS", str(STEPS))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("aot_ddp")
    (d / "user.py").write_text(USER)
    r = subprocess.run([sys.executable, "-m", "tracec.cli", "build", f"{d / 'user.py'}:train_step",
                        "--arg", f"x=f32[{B},{D_IN}]", "--arg", f"y=i64[{B}]",
                        "-o", str(d / "libstep.so")], capture_output=True, text=True,
                       timeout=300, env=_env(), cwd=d)
    assert r.returncode == 0, r.stdout + r.stderr
    (d / "driver.c").write_text(DRIVER)
    r = subprocess.run([MPICC, "-O1", "-o", str(d / "driver"), str(d / "driver.c"), f"-I{d}",
                        f"-L{d}", "-lstep", f"-Wl,-rpath,{d}"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return d


def _reference(world):
    """Parameters of one process trained on the ranks' concatenated batches."""
    import tracec as torch
    import tracec.nn.functional as F
    from tracec import nn
    g = np.random.default_rng(7)
    x = g.standard_normal((STEPS, world * B, D_IN)).astype(np.float32)
    y = g.integers(0, D_OUT, (STEPS, world * B))
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(D_IN, D_H), nn.ReLU(), nn.Linear(D_H, D_OUT))
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for s in range(STEPS):
        opt.zero_grad()
        F.cross_entropy(ref(torch.from_numpy(x[s])), torch.from_numpy(y[s])).backward()
        opt.step()
    return x, y, {n: p.detach().numpy() for n, p in ref.named_parameters()}


@pytest.mark.parametrize("world", [2, 1])
def test_built_ddp_step_takes_the_communicator_and_matches_python(built, world):
    d = built
    header = (d / "libstep.h").read_text()
    assert "#include <mpi.h>" in header
    assert "MPI_Fint comm" in header and "MPI_Comm_c2f(MPI_COMM_WORLD)" in header
    x, y, want = _reference(world)
    for r in range(world):
        with open(d / f"data_{r}.bin", "wb") as f:
            for s in range(STEPS):
                f.write(x[s, r * B:(r + 1) * B].tobytes())
                f.write(y[s, r * B:(r + 1) * B].astype(np.int64).tobytes())
    p = subprocess.run([MPIEXEC, "-n", str(world), str(d / "driver"), str(d / "data"),
                        str(d / f"out{world}")], capture_output=True, text=True, timeout=120,
                       env=_env(), cwd=d)
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(world):
        rows = (d / f"out{world}_{r}.txt").read_text().splitlines()
        got = {}
        for row in rows:
            name, *vals = row.split()
            key = next(n for n in want if name.endswith("module." + n))
            got[key] = np.array(vals, np.float32).reshape(want[key].shape)
        assert set(got) == set(want)
        for n in want:
            np.testing.assert_allclose(got[n], want[n], rtol=1e-4, atol=1e-5,
                                       err_msg=f"rank {r} of {world}: {n}")
