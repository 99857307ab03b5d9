"""``torch.futures``: ``Future`` (a value that a callback chain or another
thread completes), ``collect_all`` and ``wait_all``, with PyTorch's
semantics: ``then`` callbacks get the completed future and their result (or
exception) completes the future ``then`` returned; a future completes once.
Written here on ``threading`` (PyTorch's is C++; nothing in the standard
library has ``then`` chaining with these rules)."""
from __future__ import annotations

import threading
from typing import Generic, TypeVar

__all__ = ["Future", "collect_all", "wait_all"]


T = TypeVar("T")


class Future(Generic[T]):
    """``torch.futures.Future``; generic as PyTorch's is, so annotations such
    as ``Future[Tensor]`` (captum's) evaluate."""

    def __init__(self, *, devices=None):
        self._cond = threading.Condition()
        self._done = False
        self._value = None
        self._error: BaseException | None = None
        self._callbacks: list = []

    def done(self) -> bool:
        return self._done

    def wait(self):
        """Block until completed; the value, or raise the exception it holds."""
        with self._cond:
            self._cond.wait_for(lambda: self._done)
        return self.value()

    def value(self):
        if not self._done:
            raise RuntimeError("Future is not completed yet")   # PyTorch asserts this too
        if self._error is not None:
            raise self._error
        return self._value

    def _complete(self, value, error) -> None:
        with self._cond:
            if self._done:
                raise RuntimeError("Attempting to mark a completed Future as complete again. "
                                   "Note that a Future can only be marked completed once.")
            self._value, self._error, self._done = value, error, True
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for cb in callbacks:
            cb(self)

    def set_result(self, result) -> None:
        self._complete(result, None)

    def set_exception(self, result) -> None:
        if not isinstance(result, BaseException):
            raise TypeError(f"{result} is of type {type(result)}, not an Exception.")
        self._complete(None, result)

    def add_done_callback(self, callback) -> None:
        """Run ``callback(self)`` once completed (now, if it is)."""
        with self._cond:
            if not self._done:
                self._callbacks.append(callback)
                return
        callback(self)

    def then(self, callback) -> "Future":
        """A future completed with ``callback(self)``'s result, or its exception."""
        out = Future()

        def run(fut):
            try:
                result = callback(fut)
            except BaseException as e:  # noqa: BLE001 - the chained future carries it
                # (PyTorch's wording: the callback's error wrapped in a RuntimeError)
                out.set_exception(RuntimeError(
                    f"Got the following error when running the callback: {type(e).__name__}: {e}"))
            else:
                out.set_result(result)
        self.add_done_callback(run)
        return out


def collect_all(futures) -> Future:
    """A future completed, once every one of ``futures`` is, with their list."""
    futures = list(futures)
    out = Future()
    left = [len(futures)]
    lock = threading.Lock()
    if not futures:
        out.set_result([])

    def one(_):
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            out.set_result(futures)
    for f in futures:
        f.add_done_callback(one)
    return out


def wait_all(futures) -> list:
    """The values of ``futures``, waiting for each (an exception re-raised)."""
    return [f.wait() for f in collect_all(futures).wait()]
