"""``python -m tracec.cli ARGS`` for the public-program tests, forked from a
process that has already imported tracec and its compile stack.

Each program test used to start a fresh interpreter: about 1 s of imports
(tracec 0.4 s, xDSL, llvmlite and the CPU backend 0.6 s) before the
program's first line, some 150 times a run.  Here a *zygote* (one per
pytest worker and environment) imports them once and forks a child per
command; the child runs ``tracec.cli``'s ``main`` exactly as ``python -m``
would (``sys.argv``, ``sys.path[0]``, the working folder, the environment,
stdout and stderr to files, stdin from /dev/null) and exits with its status.  The child is a
fresh copy of a process that has run nothing but imports, so programs stay
isolated from each other as separate processes are.  Where fork is not
available, or the zygote dies, the command runs as a plain subprocess.

Invariant: ``run_cli(args, cwd, env, timeout)`` returns what
``subprocess.run([sys.executable, "-m", "tracec.cli", *args], cwd=cwd,
env=env, capture_output=True, text=True, timeout=timeout)`` returns
(``returncode``, ``stdout``, ``stderr``; ``TimeoutExpired`` past
``timeout``).
"""
from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile

_ZYGOTE = r'''
import json, os, sys, tempfile, traceback
# what every program run needs before its first line (the compile stack)
import numpy, tracec, tracec.cli, tracec.as_torch, tracec.backends.cpu
import tracec.backends.cpu.lower, tracec.passes.pipeline
import xdsl.backend.llvm.convert, llvmlite.binding
import gc
if os.environ.get("TRACEC_TEST_GC_FREEZE", "1") != "0":
    # (what the imports made is permanent: a child's full collections walk
    # only the program's objects, and do not copy these pages)
    gc.collect(); gc.freeze()
reply = os.fdopen(int(sys.argv[1]), "w")
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setpgid(0, 0)
            os.environ.clear(); os.environ.update(req["env"])
            tempfile.tempdir = None        # (read TMPDIR afresh, as a new process does)
            os.chdir(req["cwd"])
            for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
                f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(f, fd); os.close(f)
            null = os.open(os.devnull, os.O_RDONLY); os.dup2(null, 0); os.close(null)
            sys.stdin = open(0, closefd=False)
            if req.get("code") is None:    # python -m tracec.cli ARGS
                sys.argv = [tracec.cli.__file__, *req["args"]]
                sys.path[0] = os.getcwd()  # (python -m puts the working folder first)
            else:                          # python -c CODE ARGS
                sys.argv = ["-c", *req["args"]]
                sys.path[0] = ""           # (as python -c: the working folder, as '')
            try:
                if req.get("code") is None:
                    tracec.cli.main()
                else:
                    main = type(sys)("__main__")
                    main.__dict__.update(__builtins__=__builtins__, __spec__=None, __package__=None)
                    sys.modules["__main__"] = main
                    exec(compile(req["code"], "<string>", "exec"), main.__dict__)
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if not isinstance(e.code, (int, type(None))):
                    print(e.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
                code = 1
        finally:
            try:
                sys.stdout.flush(); sys.stderr.flush()
            finally:
                os._exit(code)
    reply.write(json.dumps({"pid": pid}) + "\n"); reply.flush()
    _, status, ru = os.wait4(pid, 0)
    reply.write(json.dumps({"rc": os.waitstatus_to_exitcode(status),
                            "cpu": ru.ru_utime + ru.ru_stime}) + "\n"); reply.flush()
'''

_zygotes: dict = {}
#: CPU seconds of the commands the zygotes ran for this process (their
#: children are not this process's, so its rusage misses them): for
#: per-test CPU measurements of the program tests.
_CHILD_CPU = 0.0
#: environment variables tracec reads only after import (the child sets
#: them), and pytest's PYTEST_CURRENT_TEST, which names the running test:
#: in a zygote's key, every test that passes this process's environment
#: (``tracec_cli`` / ``python_c`` by default, and the program tests that
#: build ``{**os.environ, ...}`` per call: test_public_programs{,_breadth,
#: _tutorials}) started a zygote of its own, ~1.5 s of CPU for its imports
#: and a process left waiting until pytest exits; likewise GLOO_TEST_PORT,
#: a free port picked per test that only the distributed programs read; and
#: the switches tracec reads at each compile (the compile jobs, the GEMM
#: library, the disk cache), which tests/test_coldstart_gemm_library.py
#: varies per command
_LATE = {"TRACEC_CACHE_DIR", "TMPDIR", "PYTEST_CURRENT_TEST", "GLOO_TEST_PORT",
         "TRACEC_COMPILE_JOBS", "TRACEC_GEMM_LIBRARY", "TRACEC_NO_CACHE"}


class _Zygote:
    def __init__(self, env):
        r, w = os.pipe()
        self.proc = subprocess.Popen([sys.executable, "-c", _ZYGOTE, str(w)], env=env,
                                     stdin=subprocess.PIPE, text=True, pass_fds=(w,),
                                     start_new_session=True)
        os.close(w)
        self.reply = os.fdopen(r, "r")

    def _line(self, deadline):
        import time
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([self.reply], [], [], left)
        if not ready:
            return None
        line = self.reply.readline()
        if not line:
            raise EOFError("the zygote exited")
        return json.loads(line)

    def run(self, args, cwd, env, timeout, code=None):
        import time
        cmd = [sys.executable, "-m", "tracec.cli", *args] if code is None else \
            [sys.executable, "-c", code, *args]
        with tempfile.TemporaryDirectory() as d:
            out, err = os.path.join(d, "out"), os.path.join(d, "err")
            self.proc.stdin.write(json.dumps({"args": list(args), "cwd": str(cwd), "env": env,
                                              "stdout": out, "stderr": err, "code": code}) + "\n")
            self.proc.stdin.flush()
            deadline = None if timeout is None else time.monotonic() + timeout
            pid = self._line(deadline)["pid"]
            done = self._line(deadline)
            if done is None:
                os.killpg(pid, signal.SIGKILL)
                self._line(None)
                raise subprocess.TimeoutExpired(cmd, timeout, _read(out), _read(err))
            global _CHILD_CPU
            _CHILD_CPU += done.get("cpu", 0.0)
            return subprocess.CompletedProcess(cmd, done["rc"], _read(out), _read(err))

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(10)
        except Exception:
            self.proc.kill()


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


#: The public programs run without the IR verifier between passes
#: (``TRACEC_CHECKS``, which conftest turns on for the tests in-process):
#: on a whole training step it was a third of the compile's CPU (U-Net's:
#: 3.5 s of 11.5), verifying thousands of ops that the in-process tests
#: already verify pass by pass, op by op; the programs check their results
#: against PyTorch's.  A test may still ask for it in ``env``
#: (``TRACEC_PROGRAM_CHECKS=1``).
PROGRAM_CHECKS = "TRACEC_PROGRAM_CHECKS"


def run_cli(args, cwd, env, timeout=600):
    """``python -m tracec.cli *args`` in ``cwd`` with ``env`` (see the
    module docstring; ``TRACEC_CHECKS`` from ``PROGRAM_CHECKS``).  The
    command's ``TMPDIR`` is a folder of its own, removed afterwards: what a
    program or library leaves in the temporary folder (Stable-Baselines3's
    logger folders, for one) is not left behind on the machine."""
    with tempfile.TemporaryDirectory(prefix="tracec-run-") as tmp:
        return _run_cli(args, cwd, {**env, "TMPDIR": tmp}, timeout)


def tracec_cli(args, cwd=None, env=None, timeout=None):
    """Exactly ``subprocess.run([sys.executable, "-m", "tracec.cli", *args],
    cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)``
    (``env`` None: this process's environment, as subprocess passes it;
    ``cwd`` None: the current folder), forked from a zygote: for the tests
    of the CLI itself (``build``, ``dump``, ``run``), which used to pay a
    fresh interpreter's imports per command.  Unlike ``run_cli`` it sets
    nothing in the environment (no ``TRACEC_CHECKS``, no ``TMPDIR``)."""
    return _forked(None, [str(a) for a in args], cwd, env, timeout)


def python_c(code, *args, cwd=None, env=None, timeout=None):
    """``subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env,
    capture_output=True, text=True, timeout=timeout)``, forked from a
    zygote: for a check that a *new process* (nothing compiled or loaded in
    memory: a zygote has run only imports) finds what an earlier one left,
    e.g. in the disk cache.  Not for code that looks at which modules are
    imported (the zygote has imported tracec's compile stack, numpy, xDSL,
    llvmlite), nor for tracec's import-time behaviour."""
    return _forked(code, [str(a) for a in args], cwd, env, timeout)


def _forked(code, args, cwd, env, timeout):
    env = dict(os.environ if env is None else env)
    cwd = os.getcwd() if cwd is None else str(cwd)
    cmd = [sys.executable, "-m", "tracec.cli", *args] if code is None else \
        [sys.executable, "-c", code, *args]
    if not hasattr(os, "fork"):
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)
    key = tuple(sorted((k, v) for k, v in env.items() if k not in _LATE))
    z = _zygotes.get(key)
    if z is None or z.proc.poll() is not None:
        z = _zygotes[key] = _Zygote(env)
    try:
        return z.run(args, cwd, env, timeout, code)
    except (EOFError, BrokenPipeError, OSError, TypeError):
        _zygotes.pop(key, None)
        z.close()
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)


def _run_cli(args, cwd, env, timeout):
    env = {**env, "TRACEC_CHECKS": env.get(PROGRAM_CHECKS, "0")}
    if not hasattr(os, "fork"):
        return subprocess.run([sys.executable, "-m", "tracec.cli", *map(str, args)], cwd=cwd,
                              env=env, capture_output=True, text=True, timeout=timeout)
    # (the cache folder is read when compiling, so the child may set it:
    # tests with a cache of their own share the zygote)
    key = tuple(sorted((k, v) for k, v in env.items() if k not in _LATE))
    z = _zygotes.get(key)
    if z is None or z.proc.poll() is not None:
        z = _zygotes[key] = _Zygote(env)
    try:
        return z.run([str(a) for a in args], cwd, dict(env), timeout)
    except (EOFError, BrokenPipeError, OSError, TypeError):
        _zygotes.pop(key, None)
        z.close()
        return subprocess.run([sys.executable, "-m", "tracec.cli", *map(str, args)], cwd=cwd,
                              env=env, capture_output=True, text=True, timeout=timeout)


@atexit.register
def _close_all():
    for z in _zygotes.values():
        z.close()
