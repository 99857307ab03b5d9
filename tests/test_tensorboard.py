"""``torch.utils.tensorboard.SummaryWriter``: event files TensorBoard's own
reader reads back with the logged values."""
import numpy as np
import pytest

pytest.importorskip("tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

import tracec  # noqa: E402
from tracec.utils.tensorboard import SummaryWriter  # noqa: E402


def test_scalars_histograms_text_read_back(tmp_path):
    with SummaryWriter(log_dir=tmp_path / "run") as w:
        for step in range(3):
            w.add_scalar("loss", tracec.tensor(1.0 / (step + 1)), step)
        w.add_histogram("w", tracec.linspace(-1, 1, 50), 0)
        w.add_text("note", "hello", 0)
        w.add_scalars("pair", {"a": 1.0, "b": 2.0}, 0)
        with pytest.raises(NotImplementedError, match="add_graph"):
            w.add_graph(tracec.nn.Linear(2, 2), tracec.zeros(1, 2))
    acc = EventAccumulator(str(tmp_path / "run"))
    acc.Reload()
    loss = acc.Scalars("loss")
    assert [e.step for e in loss] == [0, 1, 2]
    np.testing.assert_allclose([e.value for e in loss], [1.0, 0.5, 1 / 3], rtol=1e-6)
    h = acc.Histograms("w")[0].histogram_value
    assert h.num == 50 and h.min == -1.0 and h.max == 1.0
    assert (tmp_path / "run" / "pair_a").is_dir() and (tmp_path / "run" / "pair_b").is_dir()


def test_default_log_dir_is_runs_date_host(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_exp")
    w.close()
    assert w.get_logdir().startswith("runs") and w.get_logdir().endswith("_exp")
