"""pytest plugin, ``PYTHONPATH=tests python -m pytest -p cpu_times ...`` (the
folder on the path before pytest loads plugins): the CPU seconds each test module and test
took, printed after the run (also under xdist), for finding what costs the
suite its time on a loaded machine, where ``--durations`` (wall time) says
more about the other processes than about the test.

A test's CPU time is its process's (user + system) over setup, call and
teardown, plus the processes it waited for (``subprocess.run``) and the
commands forked from a program zygote for it (``program_runner._CHILD_CPU``:
not this process's children).  Not counted: a zygote's own start (its
imports, once per worker and environment), background processes never
waited for, collection.  ``CPU_TIMES_TOP`` (default 30): how many rows.

Invariant: each phase's seconds travel in its report's ``user_properties``
as ``("cpu_s", seconds)``, so the controller of an xdist run sums what its
workers measured."""
import os
import resource
import sys
from collections import defaultdict

import pytest

_tests: dict = defaultdict(float)


def _cpu() -> float:
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    runner = sys.modules.get("program_runner")
    return (me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
            + getattr(runner, "_CHILD_CPU", 0.0))


def _timed(item):
    t0 = _cpu()
    yield
    item.user_properties.append(("cpu_s", _cpu() - t0))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _timed(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _timed(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _timed(item)


def pytest_runtest_logreport(report):
    # (each phase's report carries the entries of the phases before it too)
    times = [v for k, v in report.user_properties if k == "cpu_s"]
    if times:
        _tests[report.nodeid] += times[-1]


def pytest_terminal_summary(terminalreporter):
    if not _tests or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    top = int(os.environ.get("CPU_TIMES_TOP", "30"))
    modules: dict = defaultdict(lambda: [0.0, 0])
    for nodeid, s in _tests.items():
        m = modules[nodeid.split("::")[0]]
        m[0] += s
        m[1] += 1
    write = terminalreporter.write_line
    terminalreporter.section("CPU seconds")
    write(f"{sum(_tests.values()):.1f} s in {len(_tests)} tests")
    for name, (s, n) in sorted(modules.items(), key=lambda kv: -kv[1][0])[:top]:
        write(f"{s:8.1f} {n:5d}  {name}")
    for nodeid, s in sorted(_tests.items(), key=lambda kv: -kv[1])[:top]:
        write(f"{s:8.2f}  {nodeid}")
