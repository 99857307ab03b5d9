"""``torch.utils.benchmark``: ``Timer`` and its ``Measurement`` (wall
times of a Python statement, as the tutorials time ``jacrev`` against a
loop of ``autograd.grad``).  ``Compare``, C++ statements and Callgrind
counts are not provided."""
from tracec.utils.benchmark.utils.common import (  # noqa: F401
    Measurement, TaskSpec, ordered_unique, select_unit, set_torch_threads, trim_sigfig,
    unit_to_english)
from tracec.utils.benchmark.utils.timer import Language, Timer, timer  # noqa: F401
