"""``torch.profiler`` / ``torch.autograd.profiler`` on eager programs: ops
and ranges timed, PyTorch's table, schedules, Chrome traces."""
from __future__ import annotations

import json

import pytest

import tracec
from tracec.profiler import ProfilerAction, profile, record_function, schedule
from tracec.tensor import OP_OBSERVERS


def _model():
    tracec.manual_seed(0)
    return tracec.nn.Sequential(tracec.nn.Linear(8, 16), tracec.nn.ReLU(),
                                tracec.nn.Linear(16, 4))


def test_ops_and_ranges_with_self_times_that_add_up():
    model, x = _model(), tracec.randn(5, 8)
    expected = model(x)
    with profile(record_shapes=True) as prof:
        with record_function("forward"):
            out = model(x)
    assert tracec.equal(out, expected)            # profiling changes no result
    assert not OP_OBSERVERS                       # and leaves nothing behind
    names = {e.key: e for e in prof.key_averages()}
    assert names["forward"].count == 1 and names["tracec::matmul"].count == 2
    total = names["forward"].cpu_time_total
    assert sum(e.self_cpu_time_total for e in prof.key_averages()) == pytest.approx(total,
                                                                                   rel=1e-6)
    shaped = prof.key_averages(group_by_input_shape=True)
    assert [[5, 8], [8, 16]] in [e.input_shapes for e in shaped if e.key == "tracec::matmul"]
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=3)
    lines = table.splitlines()
    assert "Self CPU %" in lines[1] and lines[3].startswith("forward")
    assert len([ln for ln in lines if ln.startswith(("tracec::", "forward"))]) == 3
    assert "Self CPU time total:" in table
    with pytest.raises(AttributeError, match="no attribute 'bogus'"):
        prof.key_averages().table(sort_by="bogus")


def test_nested_ranges_and_decorator():
    @record_function("inner")
    def inner(t):
        return t * 2

    with profile() as prof:
        with record_function("outer"):
            inner(tracec.ones(3))
    ev = {e.key: e for e in prof.key_averages()}
    assert ev["outer"].cpu_time_total >= ev["inner"].cpu_time_total
    assert ev["outer"].self_cpu_time_total == pytest.approx(
        ev["outer"].cpu_time_total - ev["inner"].cpu_time_total, rel=1e-9, abs=1e-9)


def test_schedule_matches_torch():
    torch = pytest.importorskip("torch")
    for kw in [dict(wait=1, warmup=1, active=2, repeat=1), dict(wait=0, warmup=0, active=1),
               dict(wait=2, warmup=1, active=3, repeat=2, skip_first=3)]:
        ours, theirs = schedule(**kw), torch.profiler.schedule(**kw)
        assert [ours(i).name for i in range(20)] == [theirs(i).name for i in range(20)], kw
    assert schedule(wait=0, warmup=0, active=2)(1) is ProfilerAction.RECORD_AND_SAVE


def test_scheduled_profile_hands_cycles_to_on_trace_ready(tmp_path):
    model, x = _model(), tracec.randn(2, 8)
    with profile() as one:
        model(x)
    per_step = len(one.events())
    saved = []
    handler = tracec.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w")
    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda p: (saved.append(len(p.events())), handler(p))) as prof:
        for _ in range(6):
            model(x)
            prof.step()
    assert saved == [2 * per_step]
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].name.startswith("w.") and \
        files[0].name.endswith(".pt.trace.json")
    trace = json.loads(files[0].read_text())
    assert len(trace["traceEvents"]) == 2 * per_step
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in trace["traceEvents"])


def test_autograd_profiler_spelling_and_backward():
    model, x = _model(), tracec.randn(3, 8)
    with tracec.autograd.profiler.profile(use_cuda=False) as prof:
        model(x).sum().backward()
    assert prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=2).count(
        "tracec::") == 2
    assert prof.self_cpu_time_total > 0


def test_disabled_profile_records_nothing():
    with profile(enabled=False) as prof:
        tracec.ones(2) + 1
    assert len(prof.events()) == 0 and not OP_OBSERVERS
