"""Shared pieces of the ``tracec build`` tests: a user script, a C driver
that walks a library's argument table, and helpers to build and run."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from program_runner import tracec_cli

CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="needs a C compiler")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A step with every kind of state: parameters, BatchNorm buffers (an int64
# counter among them), Adam's moments and step, the learning rate.
USER = textwrap.dedent("""
    import tracec
    from tracec import nn
    import tracec.nn.functional as F

    tracec.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    opt = tracec.optim.Adam(model.parameters(), lr=0.01)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
""")

# Walks train_step_args: prints the table, allocates every buffer, calls
# init_state, writes the state buffers (table order) to argv[1], reads the
# inputs (table order) from argv[2], runs argv[3] steps printing the loss.
DRIVER = textwrap.dedent(r"""
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    #include "libstep.h"

    int main(int argc, char **argv) {
        void *buf[TRAIN_STEP_NUM_ARGS];
        int loss = -1;
        if (argc < 4 || train_step_num_args != TRAIN_STEP_NUM_ARGS) return 1;
        for (int i = 0; i < train_step_num_args; i++) {
            const tracec_arg *a = &train_step_args[i];
            printf("arg %s %s %s %d %d", a->name, a->source, a->dtype, a->itemsize, a->rank);
            for (int d = 0; d < a->rank; d++) printf("%s%lld", d ? "," : " [", (long long)a->shape[d]);
            printf("%s %lld %d %d %d %d\n", a->rank ? "]" : " []", (long long)a->numel, a->role,
                   a->access, a->state_index, a->dim_names == 0);
            buf[i] = malloc(a->numel * a->itemsize + 1);
            memset(buf[i], 0xAB, a->numel * a->itemsize + 1);   /* init_state must overwrite */
            if (a->role == TRACEC_ROLE_OUTPUT && loss < 0) loss = i;
        }
        int rc = train_step_init_state_argv(buf);
        if (rc) return 2;
        FILE *f = fopen(argv[1], "wb");
        for (int i = 0; i < train_step_num_args; i++)
            if (train_step_args[i].state_index >= 0)
                fwrite(buf[i], train_step_args[i].itemsize, train_step_args[i].numel, f);
        fclose(f);
        f = fopen(argv[2], "rb");
        for (int i = 0; i < train_step_num_args; i++)
            if (train_step_args[i].role == TRACEC_ROLE_INPUT &&
                fread(buf[i], train_step_args[i].itemsize, train_step_args[i].numel, f)
                    != (size_t)train_step_args[i].numel) return 3;
        fclose(f);
        for (int s = 0; s < atoi(argv[3]); s++) {
            rc = train_step_argv(buf);
            if (rc) {
                printf("error %d %s\n", rc, train_step_error_message(rc));
                return 4;
            }
            printf("loss %.9g\n", *(float *)buf[loss]);
        }
        return 0;
    }
""")


def tracec_build(src, func, out, *args, env=None, umask=None):
    """``python -m tracec.cli build src:func *args -o out`` (forked from a
    zygote that has imported tracec, ``program_runner.tracec_cli``, except
    where the command needs a umask of its own)."""
    cmd = ["build", f"{src}:{func}", *args, "-o", str(out)]
    env = {**os.environ, **(env or {})}
    if umask is None:
        return tracec_cli(cmd, env=env, timeout=300)
    return subprocess.run([sys.executable, "-m", "tracec.cli", *cmd], capture_output=True,
                          text=True, timeout=300, env=env, preexec_fn=lambda: os.umask(umask))


def compile_c(src_text, exe, lib_dir, lib="step", name="main.c", compiler=None):
    src = os.path.join(os.path.dirname(str(exe)), name)
    with open(src, "w") as f:
        f.write(src_text)
    r = subprocess.run([compiler or CC, "-O2", "-Wall", "-o", str(exe), src, f"-I{lib_dir}",
                        f"-L{lib_dir}", f"-l{lib}", f"-Wl,-rpath,{lib_dir}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return str(exe)


def run_driver(exe, state_out, inputs, steps, env=None):
    return subprocess.run([exe, str(state_out), str(inputs), str(steps)], capture_output=True,
                          text=True, timeout=60, env={"PATH": os.environ.get("PATH", ""),
                                                      **(env or {})})


def parse_table(stdout):
    rows = []
    for line in stdout.splitlines():
        if line.startswith("arg "):
            p = line.split()
            shape = tuple(int(v) for v in p[6].strip("[]").split(",") if v)
            rows.append(dict(name=p[1], source=p[2], dtype=p[3], itemsize=int(p[4]),
                             rank=int(p[5]), shape=shape, numel=int(p[7]), role=int(p[8]),
                             access=int(p[9]), state_index=int(p[10]), fixed=p[11] == "1"))
    return rows


def losses(stdout):
    return [float(line.split()[1]) for line in stdout.splitlines() if line.startswith("loss ")]
