"""``torch.Stream`` and ``torch.Event``, the device-generic stream API, as
PyTorch's CPU build has them: tracec runs every op to completion when
called, so the CPU stream is always idle (``query()`` True,
``synchronize()`` returns at once) and, as in PyTorch, CPU events are not
supported ("cpu backend doesn't support events.")."""
from __future__ import annotations

from tracec.device import device as _device

__all__ = ["Stream", "Event"]

_NO_EVENTS = "cpu backend doesn't support events."


def _cpu_only(dev) -> _device:
    d = _device("cpu" if dev is None else dev)
    if d.type != "cpu":
        raise RuntimeError(f"PyTorch is not linked with support for {d.type} devices")
    return d


class Stream:
    """A queue of work on a device: on the CPU, the one synchronous stream."""

    def __init__(self, device=None, *, priority: int = 0):
        _cpu_only(device)
        # (device_type is c10's DeviceType number, 0 for the CPU, as PyTorch's)
        self.device_type, self.device_index, self.stream_id = 0, -1, 0

    @property
    def device(self) -> _device:
        return _device("cpu")

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def record_event(self, event=None):
        raise RuntimeError(_NO_EVENTS)

    def wait_event(self, event) -> None:
        raise RuntimeError(_NO_EVENTS)

    def wait_stream(self, stream) -> None:
        raise RuntimeError(_NO_EVENTS)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __eq__(self, other):
        return isinstance(other, Stream) and (self.device_type, self.stream_id) == \
            (other.device_type, other.stream_id)

    def __hash__(self):
        return hash((self.device_type, self.device_index, self.stream_id))

    def __repr__(self) -> str:
        return (f"torch.Stream device_type=cpu, device_index={self.device_index}, "
                f"stream_id={self.stream_id}")


class Event:
    """A marker in a stream; the CPU backend has none: ``record`` and the
    rest raise PyTorch's error."""

    def __init__(self, device=None, *, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        _cpu_only(device)
        self.event_id = 0

    @property
    def device(self) -> _device:
        return _device("cpu")

    def record(self, stream=None):
        raise RuntimeError(_NO_EVENTS)

    def query(self):
        raise RuntimeError(_NO_EVENTS)

    def synchronize(self):
        raise RuntimeError(_NO_EVENTS)

    def wait(self, stream=None):
        raise RuntimeError(_NO_EVENTS)

    def elapsed_time(self, end_event):
        raise RuntimeError(_NO_EVENTS)

    def __repr__(self) -> str:
        return f"torch.Event device_type=cpu, device_index=-1, event_flag=0, event_id={self.event_id}"
