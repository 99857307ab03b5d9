"""``torch.utils.benchmark.utils.timer``: ``Timer``, PyTorch's wrapper of
``timeit.Timer`` for Python statements.

Invariants (PyTorch's): the statement and setup are dedented and
stripped; ``torch`` is in the statement's globals; each measurement runs
with the thread count ``num_threads`` (restored after); ``timeit(number)``
warms up with ``max(number // 100, 2)`` runs and returns one measurement;
``blocked_autorange`` grows the block size by 10x until the timer's
overhead is under 0.01% of a block and the block takes 1/1000 of
``min_run_time`` (or more than all of it), then times blocks until
``min_run_time`` has passed; ``adaptive_autorange`` times blocks until the
IQR is within ``threshold`` of the median (after four) or ``max_run_time``
has passed."""
from __future__ import annotations

import enum
import textwrap
import timeit as _timeit
from typing import Any, Callable

from tracec.utils.benchmark.utils import common

__all__ = ["Timer", "timer", "Language"]


def timer() -> float:
    return _timeit.default_timer()


class Language(enum.Enum):
    PYTHON = 0
    CPP = 1


class Timer:
    """Times ``stmt`` (Python source) after ``setup``, in ``globals``."""

    _timer_cls = _timeit.Timer

    def __init__(self, stmt: str = "pass", setup: str = "pass", global_setup: str = "",
                 timer: Callable[[], float] = timer, globals: dict | None = None,
                 label: str | None = None, sub_label: str | None = None,
                 description: str | None = None, env: str | None = None,
                 num_threads: int = 1, language: Language | str = Language.PYTHON) -> None:
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        self._globals = dict(globals or {})
        if language in (Language.PYTHON, "py", "python"):
            import sys
            # (the package itself, as PyTorch's Timer puts torch there; tracec
            # is imported by the time a Timer exists)
            self._globals.setdefault("torch", sys.modules["tracec"])
            self._language = Language.PYTHON
            if global_setup:
                raise ValueError(f"global_setup is C++ only, got `{global_setup}`. Most likely "
                                 "this code can simply be moved to `setup`.")
        elif language in (Language.CPP, "cpp", "c++"):
            raise NotImplementedError("tracec's Timer times Python statements only "
                                      "(C++ statements need PyTorch's C++ build)")
        else:
            raise ValueError(f"Invalid language `{language}`.")
        stmt = textwrap.dedent(stmt)
        stmt = (stmt[1:] if stmt and stmt[0] == "\n" else stmt).rstrip()
        setup = textwrap.dedent(setup)
        setup = (setup[1:] if setup and setup[0] == "\n" else setup).rstrip()
        self._timer = self._timer_cls(stmt=stmt, setup=setup, timer=timer,
                                      globals=self._globals)
        self._task_spec = common.TaskSpec(stmt=stmt, setup=setup, global_setup=global_setup,
                                          label=label, sub_label=sub_label,
                                          description=description, env=env,
                                          num_threads=num_threads)

    def _timeit(self, number: int) -> float:
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number: int = 1000000) -> common.Measurement:
        """``stmt`` run ``number`` times (after a warm-up): one measurement."""
        with common.set_torch_threads(self._task_spec.num_threads):
            self._timeit(number=max(int(number // 100), 2))
            return common.Measurement(number_per_run=number,
                                      raw_times=[self._timeit(number=number)],
                                      task_spec=self._task_spec)

    def repeat(self, repeat: int = -1, number: int = -1) -> None:
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback=None) -> None:
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _threaded_measurement_loop(self, number, time_hook, stop_hook, min_run_time,
                                   max_run_time=None, callback=None) -> list:
        total_time, can_stop, times = 0.0, False, []
        with common.set_torch_threads(self._task_spec.num_threads):
            while total_time < min_run_time or not can_stop:
                spent = time_hook()
                times.append(spent)
                total_time += spent
                if callback:
                    callback(number, spent)
                can_stop = stop_hook(times)
                if max_run_time and total_time > max_run_time:
                    break
        return times

    def _estimate_block_size(self, min_run_time: float) -> int:
        with common.set_torch_threads(self._task_spec.num_threads):
            overhead = common._tensor([self._timeit(0) for _ in range(5)]).median().item()
            number = 1
            while True:
                taken = self._timeit(number)
                if overhead / taken <= 1e-4 and taken >= min_run_time / 1000:
                    break
                if taken > min_run_time or number * 10 > 2147483647:
                    break
                number *= 10
        return number

    def blocked_autorange(self, callback=None, min_run_time: float = 0.2) -> common.Measurement:
        """Blocks of a size that amortizes the timer, until ``min_run_time``."""
        number = self._estimate_block_size(min_run_time)
        times = self._threaded_measurement_loop(number, lambda: self._timeit(number),
                                                lambda times: True, min_run_time=min_run_time,
                                                callback=callback)
        return common.Measurement(number_per_run=number, raw_times=times,
                                  task_spec=self._task_spec)

    def adaptive_autorange(self, threshold: float = 0.1, *, min_run_time: float = 0.01,
                           max_run_time: float = 10.0, callback=None) -> common.Measurement:
        """Blocks until the IQR is within ``threshold`` of the median."""
        number = self._estimate_block_size(min_run_time=0.05)

        def stop_hook(times) -> bool:
            return len(times) > 3 and common.Measurement(
                number_per_run=number, raw_times=times,
                task_spec=self._task_spec).meets_confidence(threshold=threshold)
        times = self._threaded_measurement_loop(number, lambda: self._timeit(number), stop_hook,
                                                min_run_time, max_run_time, callback=callback)
        return common.Measurement(number_per_run=number, raw_times=times,
                                  task_spec=self._task_spec)
