"""``torch.profiler`` (and ``torch.autograd.profiler``): where an eager
program's time goes, op by op.

``with profile(...) as prof:`` times every eager primitive (named
``tracec::<primitive>``) and every ``record_function`` range;
``prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)``
prints PyTorch's table (self and total CPU time, calls, averages, input
shapes when grouped by them); ``export_chrome_trace`` writes the Chrome
trace format; ``schedule`` / ``on_trace_ready`` / ``tensorboard_trace_handler``
and ``prof.step()`` work as in PyTorch.  Compiled functions' kernels are
profiled by ``fn.profile()`` (``tracec.kernel_profiler``), not here: a
compiled call shows up as the ops it runs eagerly and the ranges around it.

Invariants: times are CPU wall times in microseconds (PyTorch's unit);
a range's self time is its total minus the ops and ranges directly inside
it, so self times sum to the profiled total; there are no device times
(tracec runs on the CPU: the CUDA columns PyTorch prints for a CPU-only
run are absent there too).
"""
from __future__ import annotations

import enum
import functools
import os
import threading
import time

from tracec.tensor import OP_OBSERVERS, Tensor

__all__ = ["profile", "record_function", "ProfilerActivity", "ProfilerAction", "schedule",
           "tensorboard_trace_handler", "supported_activities", "EventList", "FunctionEvent",
           "FunctionEventAvg", "kineto_available"]


def kineto_available() -> bool:
    """Whether the Kineto tracing library is in: tracec's profiler is its own."""
    return False


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1
    XPU = 2
    MTIA = 3
    PrivateUse1 = 4


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities():
    return {ProfilerActivity.CPU}


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0):
    """PyTorch's step schedule: after ``skip_first`` steps, cycles of ``wait``
    idle, ``warmup`` and ``active`` recorded steps, ``repeat`` times (0:
    forever); the last active step of a cycle is RECORD_AND_SAVE."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError("Invalid profiler schedule arguments")

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


class FunctionEvent:
    """One op or range: ``name``, ``start_us``/``end_us``, ``input_shapes``,
    ``self_cpu_time_total`` (its time minus its direct children's)."""

    def __init__(self, name, start_ns, end_ns, input_shapes, thread, depth, is_range):
        self.name, self.key = name, name
        self.start_us, self.end_us = start_ns / 1e3, end_ns / 1e3
        # The duration from the integer clock: start_us and end_us are large
        # (float64 keeps ~1e-6 µs of them), their difference would not be exact.
        self._duration_us = (end_ns - start_ns) / 1e3
        self.input_shapes, self.thread, self.depth = input_shapes, thread, depth
        self.is_user_annotation = is_range
        self.children_us = 0.0
        self.count = 1

    @property
    def cpu_time_total(self) -> float:
        return self._duration_us

    cpu_time = cpu_time_total

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - self.children_us

    device_time_total = self_device_time_total = cuda_time_total = 0.0
    cpu_memory_usage = self_cpu_memory_usage = 0

    def __repr__(self):
        return (f"<FunctionEvent name={self.name} cpu_time_total={self.cpu_time_total:.3f}us "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """Events of one key (name, and input shapes when grouped by them)."""

    def __init__(self, key, input_shapes):
        self.key, self.input_shapes = key, input_shapes
        self.count = 0
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.is_user_annotation = False

    def add(self, e: FunctionEvent):
        self.count += 1
        self.cpu_time_total += e.cpu_time_total
        self.self_cpu_time_total += e.self_cpu_time_total
        self.is_user_annotation = e.is_user_annotation
        return self

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / max(self.count, 1)

    device_time_total = self_device_time_total = cuda_time_total = 0.0
    cpu_memory_usage = self_cpu_memory_usage = 0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total:.3f}us "
                f"cpu_time={self.cpu_time:.3f}us count={self.count}>")


def _fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


_SORT_KEYS = {"cpu_time_total", "self_cpu_time_total", "cpu_time", "count", "cuda_time_total",
              "self_cuda_time_total", "device_time_total", "self_device_time_total",
              "cpu_memory_usage", "self_cpu_memory_usage", "cuda_memory_usage",
              "self_cuda_memory_usage", "flops"}


class EventList(list):
    """Events or averages, with PyTorch's ``table``, ``key_averages``,
    ``total_average`` and ``export_chrome_trace``."""

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False):
        groups: dict = {}
        for e in self:
            shapes = str(e.input_shapes) if group_by_input_shape else ""
            key = (e.key, shapes)
            if key not in groups:
                groups[key] = FunctionEventAvg(e.key, e.input_shapes if shapes else [])
            groups[key].add(e)
        return EventList(groups.values())

    def total_average(self):
        total = FunctionEventAvg("Total", [])
        for e in self:
            total.count += e.count
            total.cpu_time_total += e.cpu_time_total
            total.self_cpu_time_total += e.self_cpu_time_total
        return total

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def table(self, sort_by=None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header=None,
              top_level_events_only: bool = False, time_unit=None) -> str:
        rows = list(self)
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise AttributeError(f"'FunctionEventAvg' object has no attribute '{sort_by}'")
            rows.sort(key=lambda e: getattr(e, sort_by, 0.0), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        total_self = self.self_cpu_time_total or 1.0
        shapes = any(getattr(e, "input_shapes", None) for e in rows)
        name_w = min(max([len(e.key) for e in rows] + [4]) + 2, max_name_column_width)
        cols = [("Name", name_w), ("Self CPU %", 12), ("Self CPU", 12), ("CPU total %", 12),
                ("CPU total", 12), ("CPU time avg", 12), ("# of Calls", 12)]
        if shapes:
            cols.append(("Input Shapes", max_shapes_column_width))
        line = "-" * (sum(w for _, w in cols) + 2 * (len(cols) - 1))
        out = [header] if header else []
        out += [line, "  ".join(f"{n:>{w}}" if i else f"{n:<{w}}"
                                for i, (n, w) in enumerate(cols)), line]
        for e in rows:
            name = e.key if len(e.key) <= name_w else e.key[:name_w - 3] + "..."
            cells = [f"{name:<{name_w}}",
                     f"{100 * e.self_cpu_time_total / total_self:>11.2f}%",
                     f"{_fmt_us(e.self_cpu_time_total):>12}",
                     f"{100 * e.cpu_time_total / total_self:>11.2f}%",
                     f"{_fmt_us(e.cpu_time_total):>12}", f"{_fmt_us(e.cpu_time):>12}",
                     f"{e.count:>12}"]
            if shapes:
                cells.append(f"{str(e.input_shapes)[:max_shapes_column_width]:>{max_shapes_column_width}}")
            out.append("  ".join(cells))
        out += [line, f"Self CPU time total: {_fmt_us(self.self_cpu_time_total)}", ""]
        return "\n".join(out)

    def __str__(self):
        return self.table()

    def export_chrome_trace(self, path) -> None:
        import json
        events = [{"ph": "X", "cat": "user_annotation" if e.is_user_annotation else "cpu_op",
                   "name": e.name, "pid": os.getpid(), "tid": e.thread, "ts": e.start_us,
                   "dur": e.cpu_time_total, "args": {"Input Dims": e.input_shapes}}
                  for e in self if isinstance(e, FunctionEvent)]
        _write_atomic(path, json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))


def _write_atomic(path, text: str) -> None:
    """Write to a temporary name beside ``path``, then rename: a crash never
    leaves a half-written trace under the final name."""
    import gzip
    path = os.fspath(path)
    tmp = f"{path}.partial-{os.getpid()}"
    opener = gzip.open if path.endswith(".gz") else open
    with opener(tmp, "wt") as f:
        f.write(text)
    os.replace(tmp, path)


# The profiles now recording (usually one) and the open ranges per thread.
_ACTIVE: list = []
_LOCAL = threading.local()


def _open_ranges() -> list:
    stack = getattr(_LOCAL, "stack", None)
    if stack is None:
        stack = _LOCAL.stack = []
    return stack


def _observe(name: str, start_ns: int, args) -> None:
    end = time.perf_counter_ns()
    stack = _open_ranges()
    for prof in _ACTIVE:
        shapes = ([list(a.shape) if isinstance(a, Tensor) else [] for a in args]
                  if prof.record_shapes else [])
        prof._events.append(FunctionEvent(f"tracec::{name}", start_ns, end, shapes,
                                          threading.get_ident(), len(stack), False))
    if stack:
        stack[-1][1].append((end - start_ns) / 1e3)


class record_function:  # noqa: N801
    """A named range in the profile (context manager or decorator)."""

    def __init__(self, name: str, args=None):
        self.name, self.args = name, args

    def __enter__(self):
        self._start = time.perf_counter_ns()
        self._children: list = []
        _open_ranges().append((self, self._children))
        return self

    def __exit__(self, *exc):
        end = time.perf_counter_ns()
        stack = _open_ranges()
        if stack and stack[-1][0] is self:
            stack.pop()
        for prof in _ACTIVE:
            ev = FunctionEvent(self.name, self._start, end, [], threading.get_ident(),
                               len(stack), True)
            ev.children_us = sum(self._children)
            prof._events.append(ev)
        if stack:
            stack[-1][1].append((end - self._start) / 1e3)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapper


class profile:  # noqa: N801
    """``torch.profiler.profile`` (keyword arguments) and, positionally,
    ``torch.autograd.profiler.profile(enabled=True, ...)``."""

    def __init__(self, enabled=True, *, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes=False, profile_memory=False, with_stack=False, with_flops=False,
                 with_modules=False, experimental_config=None, execution_trace_observer=None,
                 acc_events=False, use_cuda=False, use_device=None, use_kineto=False,
                 use_cpu=True, custom_trace_id_callback=None, post_processing_timeout_s=None):
        self.enabled = bool(enabled)
        self.record_shapes = bool(record_shapes)
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self._events: list = []
        self._saved: list = []
        self._recording = False

    # --- recording ------------------------------------------------------------------

    def _action(self) -> ProfilerAction:
        return self.schedule(self.step_num) if self.schedule else ProfilerAction.RECORD

    def _set_recording(self, on: bool) -> None:
        if on and not self._recording:
            _ACTIVE.append(self)
            if _observe not in OP_OBSERVERS:
                OP_OBSERVERS.append(_observe)
        elif not on and self._recording:
            _ACTIVE.remove(self)
            if not _ACTIVE and _observe in OP_OBSERVERS:
                OP_OBSERVERS.remove(_observe)
        self._recording = on

    def start(self):
        if self.enabled:
            self._set_recording(self._action() in (ProfilerAction.RECORD,
                                                   ProfilerAction.RECORD_AND_SAVE,
                                                   ProfilerAction.WARMUP))
        return self

    def stop(self):
        if self._recording:
            self._set_recording(False)
            if self.schedule is None or self._action() in (ProfilerAction.RECORD,
                                                           ProfilerAction.RECORD_AND_SAVE):
                self._finish_cycle()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def step(self) -> None:
        """End of a training step: advance the schedule (record, warm up,
        or hand a finished cycle to ``on_trace_ready``)."""
        if not self.enabled:
            return
        before = self._action()
        self.step_num += 1
        after = self._action()
        if before == ProfilerAction.WARMUP and after != ProfilerAction.WARMUP:
            self._events = []               # warm-up steps are not kept
        if before == ProfilerAction.RECORD_AND_SAVE:
            self._finish_cycle()
        self._set_recording(after != ProfilerAction.NONE)

    def _finish_cycle(self) -> None:
        self._saved = self._events
        self._events = []
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # --- results ----------------------------------------------------------------------

    def events(self) -> EventList:
        return EventList(self._saved or self._events)

    function_events = property(events)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def total_average(self):
        return self.events().total_average()

    @property
    def self_cpu_time_total(self) -> float:
        return self.events().self_cpu_time_total

    def table(self, *args, **kwargs) -> str:
        return self.key_averages().table(*args, **kwargs)

    def export_chrome_trace(self, path) -> None:
        self.events().export_chrome_trace(path)


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip: bool = False):
    """An ``on_trace_ready`` writing ``<worker>.<time>.pt.trace.json[.gz]``
    into ``dir_name`` (the files TensorBoard's profiler plugin reads)."""
    def handler(prof) -> None:
        import socket
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json" + (".gz" if use_gzip
                                                                           else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))
    return handler
