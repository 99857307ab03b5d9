"""``torch.utils.benchmark.utils.common``: ``TaskSpec`` (what a Timer
runs) and ``Measurement`` (its times).

Invariants (PyTorch's): ``Measurement.times`` are the raw block times
divided by ``number_per_run``; the statistics (median, mean, quartiles) are
``quantile`` / ``mean`` of the sorted float64 times; ``repr`` has
PyTorch's layout (title, median, IQR when there are four or more
measurements, counts, IQR warnings); a time's unit comes from its float32
``log10`` as in PyTorch."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import textwrap
from typing import Any, Iterable, Iterator

from tracec import config, dtypes
from tracec.creation import tensor as _tensor

__all__ = ["TaskSpec", "Measurement", "select_unit", "unit_to_english", "trim_sigfig",
           "ordered_unique", "set_torch_threads"]

_MAX_SIGNIFICANT_FIGURES = 4
_MIN_CONFIDENCE_INTERVAL = 25e-9  # 25 ns
_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25


@dataclasses.dataclass(init=True, repr=False, eq=True, frozen=True)
class TaskSpec:
    """What a Timer measures (all but its globals)."""
    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self) -> str:
        if self.label is not None:
            return self.label + (f": {self.sub_label}" if self.sub_label else "")
        if "\n" not in self.stmt:
            return self.stmt + (f": {self.sub_label}" if self.sub_label else "")
        return (f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n"
                f"{textwrap.indent(self.stmt, '  ')}")

    def setup_str(self) -> str:
        if self.setup == "pass" or not self.setup:
            return ""
        if "\n" in self.setup:
            return f"setup:\n{textwrap.indent(self.setup, '  ')}"
        return f"setup: {self.setup}"

    def summarize(self) -> str:
        sections = [self.title, self.description or "", self.setup_str()]
        return "\n".join([f"{i}\n" if "\n" in i else i for i in sections if i])


_TASKSPEC_FIELDS = tuple(f.name for f in dataclasses.fields(TaskSpec))


@dataclasses.dataclass(init=True, repr=False)
class Measurement:
    """One or more timings of a statement: ``number_per_run`` executions per
    raw time."""
    number_per_run: int
    raw_times: list
    task_spec: TaskSpec
    metadata: dict | None = None

    def __post_init__(self) -> None:
        self._sorted_times: tuple = ()
        self._warnings: tuple = ()
        self._median = self._mean = self._p25 = self._p75 = -1.0

    def __getattr__(self, name: str) -> Any:
        if name in _TASKSPEC_FIELDS:
            return getattr(self.task_spec, name)
        return super().__getattribute__(name)

    @property
    def times(self) -> list:
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self) -> float:
        self._lazy_init()
        return self._median

    @property
    def mean(self) -> float:
        self._lazy_init()
        return self._mean

    @property
    def iqr(self) -> float:
        self._lazy_init()
        return self._p75 - self._p25

    @property
    def significant_figures(self) -> int:
        """From the interquartile points' spread (z = 1.645), between 1 and 4."""
        self._lazy_init()
        n = len(self._sorted_times)
        points = self._sorted_times[n // 4:int(_tensor(3 * n / 4).ceil())]
        std = _tensor(points).std(unbiased=False).item()
        sqrt_n = _tensor(len(points)).sqrt().item()
        ci = max(1.645 * std / sqrt_n, _MIN_CONFIDENCE_INTERVAL)
        figures = int(_tensor(_tensor(self._median / ci).log10().item()).floor())
        return min(max(figures, 1), _MAX_SIGNIFICANT_FIGURES)

    @property
    def has_warnings(self) -> bool:
        self._lazy_init()
        return bool(self._warnings)

    def _lazy_init(self) -> None:
        if self.raw_times and not self._sorted_times:
            self._sorted_times = tuple(sorted(self.times))
            st = _tensor(self._sorted_times, dtype=dtypes.float64)
            self._median = st.quantile(.5).item()
            self._mean = st.mean().item()
            self._p25 = st.quantile(.25).item()
            self._p75 = st.quantile(.75).item()

            def add_warning(msg: str) -> None:
                rel_iqr = self.iqr / self.median * 100
                self._warnings += (f"  WARNING: Interquartile range is {rel_iqr:.1f}% "
                                   f"of the median measurement.\n           {msg}",)
            if not self.meets_confidence(_IQR_GROSS_WARN_THRESHOLD):
                add_warning("This suggests significant environmental influence.")
            elif not self.meets_confidence(_IQR_WARN_THRESHOLD):
                add_warning("This could indicate system fluctuation.")

    def meets_confidence(self, threshold: float = _IQR_WARN_THRESHOLD) -> bool:
        return self.iqr / self.median < threshold

    @property
    def title(self) -> str:
        return self.task_spec.title

    @property
    def env(self) -> str:
        return "Unspecified env" if self.task_spec.env is None else self.task_spec.env

    @property
    def as_row_name(self) -> str:
        return self.sub_label or self.stmt or "[Unknown]"

    def __repr__(self) -> str:
        self._lazy_init()
        skip = "MEASUREMENT_REPR_SKIP_LINE"
        n = len(self._sorted_times)
        unit, scale = select_unit(self._median)
        iqr_filter = "" if n >= 4 else skip
        warnings = "\n".join(self._warnings)
        text = f"""
{super().__repr__()}
{self.task_spec.summarize()}
  {'Median: ' if n > 1 else ''}{self._median / scale:.2f} {unit}
  {iqr_filter}IQR:    {self.iqr / scale:.2f} {unit} ({self._p25 / scale:.2f} to {self._p75 / scale:.2f})
  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs {'per measurement,' if n > 1 else ','} {self.num_threads} thread{'s' if self.num_threads > 1 else ''}
{warnings}""".strip()
        return "\n".join(ln for ln in text.splitlines() if skip not in ln)

    @staticmethod
    def merge(measurements: Iterable["Measurement"]) -> list:
        """Replicates of one TaskSpec merged, at ``number_per_run=1``."""
        grouped = collections.defaultdict(list)
        for m in measurements:
            grouped[m.task_spec].append(m)
        return [Measurement(number_per_run=1, raw_times=[t for m in g for t in m.times],
                            task_spec=spec, metadata=None) for spec, g in grouped.items()]


def select_unit(t: float) -> tuple:
    """The unit (and its scale) that puts ``t`` seconds in [1, 1000)."""
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(_tensor(t).log10().item() // 3), "s")
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[unit]


def unit_to_english(u: str) -> str:
    return {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}[u]


def trim_sigfig(x: float, n: int) -> float:
    """``x`` to ``n`` significant figures."""
    if n != int(n):
        raise AssertionError("Number of significant figures must be an integer")
    magnitude = int(_tensor(x).abs().log10().ceil().item())
    scale = 10 ** (magnitude - n)
    return float(_tensor(x / scale).round() * scale)


def ordered_unique(elements: Iterable[Any]) -> list:
    return list(dict.fromkeys(elements))


@contextlib.contextmanager
def set_torch_threads(n: int) -> Iterator[None]:
    prior = config.get_num_threads()
    try:
        config.set_num_threads(n)
        yield
    finally:
        config.set_num_threads(prior)
