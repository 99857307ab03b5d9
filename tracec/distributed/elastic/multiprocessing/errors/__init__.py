"""``torch.distributed.elastic.multiprocessing.errors``: ``record`` (the
decorator training scripts put on ``main``) and ``ChildFailedError`` (what
``torchrun`` raises when a worker fails, its message torch's summary).

Invariant: ``ChildFailedError(name, failures)``'s message is laid out as
PyTorch 2.13's (``format_msg``): the first failure (earliest timestamp) is
the root cause, the others listed above it; no error files are written or
read, so a failure's traceback line is torch's "To enable traceback" note
(or, for a signal, "Signal N (NAME) received by PID P")."""
from __future__ import annotations

import functools
import signal
import socket
from dataclasses import dataclass, field
from datetime import datetime
from string import Template

__all__ = ["ChildFailedError", "ProcessFailure", "record"]

_NOT_AVAILABLE = "<N/A>"
_NO_TRACEBACK = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"

_FAILURE_FORMAT_TEMPLATE = """[${idx}]:
  time      : ${time}
  host      : ${hostname}
  rank      : ${rank} (local_rank: ${local_rank})
  exitcode  : ${exitcode} (pid: ${pid}) ${signal_name}
  error_file: ${error_file}
  traceback : ${message}"""

_MSG_FORMAT_TEMPLATE = """
${boarder}
${title}
${section}
Failures:
${other_failures}
${section}
Root Cause (first observed failure):
${root_failure}
${boarder}"""


@dataclass
class ProcessFailure:
    """One worker's failure: its local rank, pid, exit code (negative: the
    signal that ended it) and when it was seen."""
    local_rank: int
    pid: int
    exitcode: int
    error_file: str = _NOT_AVAILABLE
    timestamp: int = field(default_factory=lambda: int(datetime.now().timestamp()))

    @property
    def message(self) -> str:
        if self.exitcode < 0:
            return f"Signal {-self.exitcode} ({self.signal_name()}) received by PID {self.pid}"
        return _NO_TRACEBACK

    def signal_name(self) -> str:
        if self.exitcode < 0:
            try:
                return signal.Signals(-self.exitcode).name
            except Exception:
                return _NOT_AVAILABLE
        return _NOT_AVAILABLE

    def timestamp_isoformat(self) -> str:
        return datetime.fromtimestamp(self.timestamp).isoformat(sep="_")


class ChildFailedError(Exception):
    """Raised by the launcher when workers failed: ``failures`` maps each
    failed worker's global rank to its ``ProcessFailure``."""

    def __init__(self, name: str, failures: dict):
        self.name = name
        self.failures = failures
        if not failures:
            raise AssertionError
        super().__init__(self.format_msg())

    def get_first_failure(self):
        rank = min(self.failures, key=lambda r: self.failures[r].timestamp)
        return rank, self.failures[rank]

    def format_msg(self, boarder_delim="=", section_delim="-") -> str:
        title = f"{self.name} FAILED"
        root_rank, _ = self.get_first_failure()
        root, others, width = "", [], len(title)
        for idx, (rank, failure) in enumerate(self.failures.items()):
            sig = failure.signal_name()
            fmt = Template(_FAILURE_FORMAT_TEMPLATE).substitute(
                idx=idx, time=failure.timestamp_isoformat(), hostname=socket.getfqdn(),
                rank=rank, local_rank=failure.local_rank, exitcode=failure.exitcode,
                pid=failure.pid, signal_name=f" ({sig})" if sig != _NOT_AVAILABLE else "",
                error_file=failure.error_file, message=failure.message)
            width = max(width, *(len(line) for line in fmt.split("\n")))
            if rank == root_rank:
                root = fmt
            else:
                others.append(fmt)
        width = min(width, 60)
        return Template(_MSG_FORMAT_TEMPLATE).substitute(
            boarder=boarder_delim * width, title=title, section=section_delim * width,
            root_failure=root, other_failures="\n".join(others or ["  <NO_OTHER_FAILURES>"]))


def record(fn, error_handler=None):
    """``@record``: runs ``fn``; its exception propagates unchanged (PyTorch's
    also writes it to ``TORCHELASTIC_ERROR_FILE`` for the launcher's summary;
    tracec's launcher reads no error files)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper
