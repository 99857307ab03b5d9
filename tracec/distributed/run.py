"""``torch.distributed.run`` (``torchrun``) on tracec, single node: under
``tracec run -m torch.distributed.run [OPTIONS] SCRIPT [ARGS...]`` (or
``tracec torchrun ...``) this module's ``main`` starts ``--nproc-per-node``
worker processes, each running ``tracec run SCRIPT ARGS`` (``-m``: the
module; ``--no-python``: the command itself, its Python children importing
tracec as torch) with torchrun's environment: ``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``GROUP_WORLD_SIZE``,
``ROLE_RANK``, ``ROLE_NAME``, ``ROLE_WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``, ``TORCHELASTIC_RUN_ID``, ``TORCHELASTIC_RESTART_COUNT``,
``TORCHELASTIC_MAX_RESTARTS``, ``TORCHELASTIC_USE_AGENT_STORE``,
``TORCH_NCCL_ASYNC_ERROR_HANDLING`` and ``OMP_NUM_THREADS`` (1, with
torchrun's warning, when unset and more than one worker runs), so that
``init_process_group("gloo")`` (``env://``) meets the other ranks.

Follows PyTorch 2.13's ``torch/distributed/run.py``: the same options (and
their ``PET_*`` environment defaults); ``--standalone``, or a single node
with neither ``--master-port`` nor ``--rdzv-endpoint``, picks a free port
(MASTER_ADDR this host's FQDN), else ``--master-addr:--master-port``
(static); the workers inherit this process's stdout and
stderr; when one fails the others get SIGTERM (SIGKILL after
``--shutdown-timeout``), the group restarts while ``--max-restarts`` allow,
then ``ChildFailedError`` is raised with torch's summary (the process
exits 1, as torchrun does).

Invariants: one node only (``--nnodes`` above 1 is refused with an error
naming the limit); the port chosen leaves ``MASTER_PORT + r`` free for
every rank r, where tracec's gloo ranks listen (``_tcp``); no TCPStore,
error files or log files (``--redirects`` / ``--tee`` / ``--log-dir`` are
accepted and ignored: the workers write to the console; the output of
ranks outside ``--local-ranks-filter`` is dropped, not logged)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from argparse import REMAINDER, Action, ArgumentParser
from datetime import datetime

from tracec.distributed.elastic.multiprocessing.errors import (
    ChildFailedError, ProcessFailure, record)

__all__ = ["get_args_parser", "parse_args", "run", "main", "determine_local_world_size"]

_OMP_WARNING = (
    "\n*****************************************\n"
    "Setting OMP_NUM_THREADS environment variable for each process to be "
    "%s in default, to avoid your system being overloaded, "
    "please further tune the variable for optimal performance in "
    "your application as needed. \n"
    "*****************************************")


class env(Action):  # noqa: N801 - PyTorch's name (torch.distributed.argparse_util)
    """An option whose default is ``PET_<DEST>`` from the environment, if set."""

    def __init__(self, dest, default=None, required=False, **kwargs):
        default = os.environ.get(f"PET_{dest.upper()}", default)
        super().__init__(dest=dest, default=default, required=required and default is None,
                         **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


class check_env(Action):  # noqa: N801 - PyTorch's name
    """A flag, also set by ``PET_<DEST>=1`` in the environment."""

    def __init__(self, dest, default=False, **kwargs):
        default = bool(int(os.environ.get(f"PET_{dest.upper()}", "1" if default else "0")))
        super().__init__(dest=dest, const=True, default=default, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const)


# (names, action, type, default, help) of torchrun's options
_OPTIONS = [
    (("--nnodes",), env, str, "1:1", "Number of nodes, or the range of nodes in form "
     "<minimum_nodes>:<maximum_nodes> (tracec: a single node)."),
    (("--nproc-per-node", "--nproc_per_node"), env, str, "1",
     "Number of workers per node; supported values: [auto, cpu, int]."),
    (("--rdzv-backend", "--rdzv_backend"), env, str, "static", "Rendezvous backend."),
    (("--rdzv-endpoint", "--rdzv_endpoint"), env, str, "",
     "Rendezvous backend endpoint; usually in form <host>:<port>."),
    (("--rdzv-id", "--rdzv_id"), env, str, "none", "User-defined group id."),
    (("--rdzv-conf", "--rdzv_conf"), env, str, "",
     "Additional rendezvous configuration (<key1>=<value1>,<key2>=<value2>,...)."),
    (("--standalone",), check_env, None, None, "Single-node job on a free port: "
     "--rdzv-backend, --rdzv-endpoint, --rdzv-id are auto-assigned."),
    (("--max-restarts", "--max_restarts"), env, int, 0,
     "Maximum number of worker group restarts before failing."),
    (("--monitor-interval", "--monitor_interval"), env, float, 0.1,
     "Interval, in seconds, to monitor the state of workers."),
    (("--start-method", "--start_method"), env, str, "spawn",
     "Multiprocessing start method (workers are always new processes)."),
    (("--event-log-handler", "--event_log_handler"), env, str, "null", "(ignored)"),
    (("--role",), env, str, "default", "User-defined role for the workers."),
    (("-m", "--module"), check_env, None, None,
     "Interpret the launch script as a Python module, as 'python -m' does."),
    (("--no-python", "--no_python"), check_env, None, None,
     "Execute the training script directly instead of with python."),
    (("--run-path", "--run_path"), check_env, None, None,
     "Run the training script as a file path (the same as without it, on tracec)."),
    (("--log-dir", "--log_dir"), env, str, None, "(ignored)"),
    (("-r", "--redirects"), env, str, "0", "(ignored: workers write to this console)"),
    (("-t", "--tee"), env, str, "0", "(ignored: workers write to this console)"),
    (("--local-ranks-filter", "--local_ranks_filter"), env, str, "",
     "Only show the output of these local ranks on the console (e.g. 0,1)."),
    (("--node-rank", "--node_rank"), env, int, 0, "Rank of the node (0: a single node)."),
    (("--master-addr", "--master_addr"), env, str, "127.0.0.1",
     "Address of the master node (static rendezvous)."),
    (("--master-port", "--master_port"), env, int, None,
     "Port on the master node (static rendezvous). Defaults to 29500."),
    (("--local-addr", "--local_addr"), env, str, None, "(ignored)"),
    (("--logs-specs", "--logs_specs"), None, str, None, "(ignored)"),
    (("--numa-binding", "--numa_binding"), None, str, None, "(ignored)"),
    (("--signals-to-handle", "--signals_to_handle"), env, str,
     "SIGTERM,SIGINT,SIGHUP,SIGQUIT", "Signals forwarded to the workers."),
    (("--shutdown-timeout", "--shutdown_timeout"), env, int, None,
     "Seconds to wait for workers to end after SIGTERM before SIGKILL (default 30)."),
    (("--virtual-local-rank", "--virtual_local_rank"), check_env, None, None,
     "LOCAL_RANK is 0 for every worker."),
]


def get_args_parser() -> ArgumentParser:
    """torchrun's command line (the same names, defaults and ``PET_*``
    environment variables)."""
    parser = ArgumentParser(description="Torch Distributed Elastic Training Launcher")
    for names, action, type_, default, help_ in _OPTIONS:
        kw = {"help": help_}
        if action is not check_env:
            kw.update(type=type_, default=default)
        if action is not None:
            kw["action"] = action
        parser.add_argument(*names, **kw)
    parser.add_argument("training_script", type=str,
                        help="Full path to the (single GPU) training program/script to be "
                             "launched in parallel, followed by all the arguments for the "
                             "training script.")
    parser.add_argument("training_script_args", nargs=REMAINDER)
    return parser


def parse_args(args):
    return get_args_parser().parse_args(args)


def parse_min_max_nnodes(nnodes: str):
    arr = nnodes.split(":")
    if len(arr) == 1:
        return int(arr[0]), int(arr[0])
    if len(arr) == 2:
        return int(arr[0]), int(arr[1])
    raise RuntimeError(f'nnodes={nnodes} is not in "MIN:MAX" format')


def determine_local_world_size(nproc_per_node: str) -> int:
    """An int, or ``cpu`` / ``auto`` (no accelerator: the usable CPUs)."""
    try:
        return int(nproc_per_node)
    except ValueError as e:
        if nproc_per_node in ("cpu", "auto"):
            return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
                else os.cpu_count()
        if nproc_per_node == "gpu":
            raise ValueError("Cuda is not available.") from e
        if nproc_per_node == "xpu":
            raise ValueError("Xpu is not available.") from e
        raise ValueError(f"Unsupported nproc_per_node value: {nproc_per_node}") from e


def _log(level: str, msg: str) -> None:
    """A line as torch's logger writes it (glog style), on stderr."""
    now = datetime.now()
    sys.stderr.write(f"{level}{now:%m%d %H:%M:%S}.{now.microsecond:06d} {os.getpid()} "
                     f"tracec/distributed/run.py] {msg}\n")
    sys.stderr.flush()


def _free_port(n: int, host: str = "localhost") -> int:
    """A port p with p .. p + n - 1 free now (tracec's gloo rank r listens
    on MASTER_PORT + r)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind((host, 0))
            p = s.getsockname()[1]
        try:
            for k in range(1, n):
                with socket.socket() as s:
                    s.bind((host, p + k))
            return p
        except OSError:
            continue
    raise RuntimeError(f"torchrun: no {n} consecutive free ports on {host}")


def _master(args, nproc: int) -> tuple[str, int]:
    """(MASTER_ADDR, MASTER_PORT) the workers get: static, ``--master-addr``
    and ``--master-port`` (or the ``--rdzv-endpoint``); c10d, as torch's
    ``RendezvousStoreInfo.build``, ``--local-addr`` or this host's FQDN and a
    free port (whatever the endpoint says)."""
    if args.rdzv_backend == "static":
        if args.rdzv_endpoint:
            host, _, port = args.rdzv_endpoint.rpartition(":")
            return host, int(port)
        return args.master_addr, args.master_port
    host = args.local_addr or socket.getfqdn()
    return host, _free_port(nproc, host)


def _command(args, local_rank: int) -> list:
    use_env = getattr(args, "use_env", True)
    if args.no_python and not args.run_path:
        if args.module:
            raise ValueError("Don't use both the '--no-python' flag"
                             " and the '--module' flag at the same time.")
        cmd = [args.training_script]
    else:
        cmd = [os.getenv("PYTHON_EXEC", sys.executable), "-u", "-m", "tracec.cli", "run"]
        if args.module and not args.run_path:
            cmd.append("-m")
        cmd.append(args.training_script)
    if not use_env:
        cmd.append(f"--local-rank={local_rank}")
    return cmd + list(args.training_script_args)


class SignalException(Exception):
    """The launcher got one of ``--signals-to-handle``: the workers are
    stopped and this propagates (torchrun's ``SignalException``)."""

    def __init__(self, msg: str, sigval: signal.Signals):
        super().__init__(msg)
        self.sigval = sigval


def _terminate(signum, frame):
    raise SignalException(f"Process {os.getpid()} got signal: {signum}",
                          sigval=signal.Signals(signum))


def _handle_signals(names: str) -> dict:
    """Install ``_terminate`` for the signals named (those this platform
    has); returns the handlers replaced.  Only the main thread can."""
    import threading
    old = {}
    if threading.current_thread() is not threading.main_thread():
        return old
    for name in names.split(","):
        sig = getattr(signal, name.strip(), None)
        if isinstance(sig, signal.Signals):
            old[sig] = signal.signal(sig, _terminate)
    return old


def _stop(procs, timeout: float) -> None:
    """SIGTERM to the workers still running, SIGKILL to those left after ``timeout``."""
    live = [p for p in procs if p.poll() is None]
    for p in live:
        _log("W", f"Sending process {p.pid} closing signal SIGTERM")
        p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for p in live:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _log("W", f"Unable to shutdown process {p.pid} via SIGTERM, forcefully exiting "
                      "via SIGKILL")
            p.kill()
            p.wait()


def run(args) -> None:
    """Launch the workers of ``args`` (``parse_args``) and wait for them;
    raises ``ChildFailedError`` when they failed ``--max-restarts`` + 1 times."""
    from tracec.as_torch import children_import_tracec
    min_nodes, max_nodes = parse_min_max_nnodes(args.nnodes)
    if args.standalone:
        args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", \
            str(uuid.uuid4())
    elif args.rdzv_backend == "static" and not args.rdzv_endpoint and args.master_port is None \
            and max_nodes == 1:
        args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", \
            str(uuid.uuid4())
    if args.master_port is None:
        args.master_port = 29500
    if not 0 < min_nodes <= max_nodes:
        raise AssertionError(f"min_nodes must be > 0 and <= max_nodes, got "
                             f"min_nodes={min_nodes}, max_nodes={max_nodes}")
    if args.max_restarts < 0:
        raise AssertionError("max_restarts must be >= 0")
    if max_nodes > 1 or args.node_rank != 0:
        raise ValueError(f"tracec's torchrun launches a single node (--nnodes=1), not "
                         f"--nnodes={args.nnodes} --node-rank={args.node_rank}: multi-node "
                         f"rendezvous is not supported")
    if args.rdzv_backend not in ("static", "c10d"):
        raise ValueError(f"tracec's torchrun supports --rdzv-backend static or c10d on a "
                         f"single node, not {args.rdzv_backend!r}")
    nproc = determine_local_world_size(args.nproc_per_node)
    if "OMP_NUM_THREADS" not in os.environ and nproc > 1:
        sys.stderr.write(_OMP_WARNING % 1 + "\n")
        os.environ["OMP_NUM_THREADS"] = "1"
    shown = None
    if args.local_ranks_filter:
        try:
            shown = set(map(int, args.local_ranks_filter.split(",")))
        except Exception as e:
            raise ValueError("--local_ranks_filter must be a comma-separated list of integers "
                             "e.g. --local_ranks_filter=0,1,2") from e
    args.shown_ranks = shown
    addr, port = _master(args, nproc)
    os.environ["TORCHELASTIC_SIGNALS_TO_HANDLE"] = args.signals_to_handle
    children_import_tracec()        # (a --no-python command's Python too)
    timeout = float(args.shutdown_timeout if args.shutdown_timeout is not None else
                    os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", 30))
    # (torch's entrypoint name: the first argument of the command not an option)
    name = next((a for a in _command(args, 0)[1:] if not a.startswith("-")), "") \
        if args.no_python and not args.run_path else args.training_script
    old = _handle_signals(args.signals_to_handle)
    try:
        _launch(args, nproc, addr, port, timeout, name)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _launch(args, nproc, addr, port, timeout, name) -> None:
    restart = 0
    while True:
        procs = []
        for r in range(nproc):
            env = {**os.environ,
                   "LOCAL_RANK": "0" if args.virtual_local_rank else str(r),
                   "RANK": str(r), "GROUP_RANK": "0", "ROLE_RANK": str(r),
                   "ROLE_NAME": args.role, "LOCAL_WORLD_SIZE": str(nproc),
                   "WORLD_SIZE": str(nproc), "GROUP_WORLD_SIZE": "1",
                   "ROLE_WORLD_SIZE": str(nproc), "MASTER_ADDR": addr, "MASTER_PORT": str(port),
                   "TORCHELASTIC_RESTART_COUNT": str(restart),
                   "TORCHELASTIC_MAX_RESTARTS": str(args.max_restarts),
                   "TORCHELASTIC_RUN_ID": args.rdzv_id, "TORCHELASTIC_USE_AGENT_STORE": "True",
                   "TORCH_NCCL_ASYNC_ERROR_HANDLING":
                       os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")}
            try:
                quiet = {} if args.shown_ranks is None or r in args.shown_ranks else \
                    {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
                procs.append(subprocess.Popen(_command(args, r), env=env, **quiet))
            except BaseException:
                _stop(procs, timeout)
                raise
        failures = _wait(procs, args.monitor_interval, timeout)
        if not failures:
            return
        if restart < args.max_restarts:
            _log("W", f"[{args.role}] Worker group FAILED. {args.max_restarts - restart}/"
                      f"{args.max_restarts} attempts left; will restart worker group")
            restart += 1
            continue
        raise ChildFailedError(name=name, failures=failures)


def _wait(procs, interval: float, timeout: float) -> dict:
    """Wait until every worker succeeded ({}) or one failed: then stop the
    others and return ``{rank: ProcessFailure}`` (the first failure first)."""
    failures: dict = {}
    try:
        while True:
            for r, p in enumerate(procs):
                code = p.poll()
                if code not in (None, 0) and r not in failures:
                    failures[r] = ProcessFailure(r, p.pid, code)
            if failures:
                break
            if all(p.returncode == 0 for p in procs):
                return {}
            time.sleep(interval)
        r, f = next(iter(failures.items()))
        _stop(procs, timeout)
        _log("E", f"failed (exitcode: {f.exitcode}) local_rank: {r} (pid: {f.pid}) of binary: "
                  f"{procs[r].args[0]}")
        for q, p in enumerate(procs):
            if p.returncode != 0 and q not in failures:
                # (seen at the same second: min() keeps the first as the root)
                failures[q] = ProcessFailure(q, p.pid, p.returncode, timestamp=f.timestamp)
        return failures
    except SignalException as e:
        _log("W", f"Received {e.sigval} death signal, shutting down workers")
        _stop(procs, timeout)
        raise
    except BaseException:
        _stop(procs, timeout)
        raise


@record
def main(args=None) -> None:
    """``torchrun``'s entry point: ``args`` (default ``sys.argv[1:]``)."""
    run(parse_args(args))


if __name__ == "__main__":
    main()
