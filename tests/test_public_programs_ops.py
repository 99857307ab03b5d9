"""Public PyTorch programs that need the ops of test_ops_more (written from
memory in ``tests/programs``, imports swapped to tracec): the
super-resolution example (Conv2d + PixelShuffle, Adam) and pygcn (sparse
adjacency built with ``torch.sparse.FloatTensor``, ``torch.spmm``,
``torch.Size``, ``LongTensor``, ``f"{x:.4f}"``) train, eagerly and compiled."""
import importlib.util
import pathlib

import numpy as np

HERE = pathlib.Path(__file__).parent / "programs"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"programs_{name}", HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_super_resolution_trains_eager_and_compiled(capsys):
    sr = _load("super_resolution")
    eager = sr.main(steps=2)
    compiled = sr.main(steps=2, compiled=True)
    assert eager[-1] < eager[0]
    np.testing.assert_allclose(compiled, eager, rtol=1e-4)
    assert "Avg. PSNR" in capsys.readouterr().out


def test_pygcn_trains(capsys):
    gcn = _load("pygcn")
    losses, acc = gcn.main(epochs=60)
    # (PyTorch, seeded alike, draws the same initial weights and dropout
    # masks: its run gives these numbers too, loss 1.1348 -> 0.8921 and
    # test accuracy 0.5, where chance is 1/3)
    assert losses[-1] < 0.8 * losses[0] and acc > 0.4
    out = capsys.readouterr().out
    assert "GCN(" in out and "GraphConvolution (20 -> 16)" in out and "Test set results" in out
