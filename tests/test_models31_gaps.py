"""Gaps the models31 programs (tests/programs/models31) found in tracec,
each checked against torch 2.13."""
import pickle

import numpy as np
import pytest

import tracec

pt = pytest.importorskip("torch")


@pytest.mark.parametrize("lib", [tracec, pt], ids=["tracec", "torch"])
def test_numpy_scalars_in_a_checkpoint_load_only_when_allowed(lib, tmp_path):
    # SwAV writes lr_schedule[iteration], a numpy float64, into
    # param_group["lr"]; the optimizer's state_dict in a checkpoint then
    # holds it.  torch pickles it, so torch.load's default (weights_only)
    # refuses it, naming numpy's scalar global; allowed (or with
    # weights_only=False) it loads back as a numpy float64.  tracec stored
    # it as a Python float and loaded it whatever weights_only said.
    obj = {"param_groups": [{"lr": np.float64(0.25), "step": np.int64(3)}], "ok": np.bool_(True),
           "w": lib.ones(2)}
    lib.save(obj, tmp_path / "ck.pth")
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed") as e:
        lib.load(tmp_path / "ck.pth")
    assert "GLOBAL numpy._core.multiarray.scalar was not an allowed global by default" in str(e.value)
    assert "add_safe_globals([numpy._core.multiarray.scalar])" in str(e.value)
    back = lib.load(tmp_path / "ck.pth", weights_only=False)
    allowed = [np._core.multiarray.scalar, np.dtype, np.dtypes.Float64DType, np.dtypes.Int64DType,
               np.dtypes.BoolDType]
    with lib.serialization.safe_globals(allowed):
        safe = lib.load(tmp_path / "ck.pth")
    for d in (back, safe):
        g = d["param_groups"][0]
        assert type(g["lr"]) is np.float64 and g["lr"] == 0.25
        assert type(g["step"]) is np.int64 and g["step"] == 3
        assert type(d["ok"]) is np.bool_ and d["ok"]
        assert d["w"].tolist() == [1.0, 1.0]


def test_an_optimizer_state_dict_with_a_numpy_lr_round_trips_like_torch(tmp_path):
    # the restart: SGD's state_dict saved after lr = np.float64, loaded
    # with weights_only=False into a fresh optimizer, keeps the numpy type
    types = []
    for lib in (tracec, pt):
        w = lib.nn.Parameter(lib.ones(3))
        opt = lib.optim.SGD([w], lr=0.1, momentum=0.9)
        opt.param_groups[0]["lr"] = np.linspace(0.0, 0.6, 4)[2]
        (w * w).sum().backward()
        opt.step()
        lib.save({"optimizer": opt.state_dict()}, tmp_path / "o.pth")
        fresh = lib.optim.SGD([lib.nn.Parameter(lib.ones(3))], lr=0.1, momentum=0.9)
        fresh.load_state_dict(lib.load(tmp_path / "o.pth", weights_only=False)["optimizer"])
        lr = fresh.param_groups[0]["lr"]
        types.append((type(lr), lr, fresh.state_dict()["state"][0]["momentum_buffer"].tolist()))
    assert types[0] == types[1]


def _conv_cases(lib):
    nn = lib.nn
    out = []

    def case(name, f):
        try:
            r = f()
            out.append((name, "ok", tuple(r) if isinstance(r, (tuple, list)) else r))
        except RuntimeError as e:
            out.append((name, "RuntimeError", str(e).splitlines()[0]))

    gate = nn.Conv1d(3, 4, kernel_size=(1, 2), dilation=2)
    case("tuple kernel weight", lambda: (tuple(gate.weight.shape), gate.kernel_size, gate.dilation,
                                         gate.stride, gate.padding))
    case("tuple kernel on 4-D input", lambda: gate(lib.ones(2, 3, 5, 7)).shape)
    case("tuple kernel on 3-D input", lambda: gate(lib.ones(2, 3, 7)).shape)
    case("tuple kernel unbatched", lambda: gate(lib.ones(3, 7)).shape)
    case("1x1 Conv1d on 4-D input", lambda: nn.Conv1d(3, 4, kernel_size=(1, 1))(lib.ones(2, 3, 5, 7)).shape)
    case("Conv2d kernel [3]", lambda: tuple(nn.Conv2d(3, 4, [3]).weight.shape))
    case("Conv2d kernel [3] forward", lambda: nn.Conv2d(3, 4, [3])(lib.ones(1, 3, 5, 5)).shape)
    case("Conv1d stride (1, 2)", lambda: nn.Conv1d(3, 4, 3, stride=(1, 2))(lib.ones(1, 3, 7)).shape)
    case("F.conv2d 3-D weight", lambda: nn.functional.conv2d(lib.ones(1, 3, 5, 5), lib.ones(4, 3, 2)).shape)
    case("same padding pairs", lambda: nn.Conv2d(3, 4, (3, 4), padding="same",
                                                 dilation=(1, 2))._reversed_padding_repeated_twice)
    return [(n, k, tuple(v) if k == "ok" and not isinstance(v, str) else v) for n, k, v in out]


def test_conv1d_with_a_2d_kernel_like_torch():
    # Graph WaveNet (nnzhan/Graph-WaveNet) builds its gate / residual / skip
    # convolutions as nn.Conv1d(kernel_size=(1, 2)) and (1, 1): PyTorch
    # keeps the kernel as given (a 4-D weight) and refuses the 4-D input in
    # forward, which is what its users meet under torch 2 (issue #34).
    # tracec refused the kernel when building the layer.
    got, want = _conv_cases(tracec), _conv_cases(pt)
    assert [g[:2] for g in got] == [w[:2] for w in want]
    for (name, kind, g), (_, _, w) in zip(got, want):
        if kind == "RuntimeError":
            assert g == w, name
        else:
            assert tuple(int(v) if not isinstance(v, tuple) else v for v in g) == \
                tuple(int(v) if not isinstance(v, tuple) else v for v in w), name


def _multi_output_view_cases(lib):
    out = []

    def case(name, f):
        x = lib.zeros(8, requires_grad=True)
        try:
            f(x)
            out.append((name, "ok", x.tolist()))
        except RuntimeError as e:
            out.append((name, "RuntimeError", str(e).splitlines()[0]))

    case("leaf chunk fill_", lambda x: x.chunk(4)[1].fill_(1))
    case("leaf split fill_", lambda x: x.split(2)[1].fill_(1))
    case("split_with_sizes add_", lambda x: x.split([3, 5])[0].add_(1))
    case("unbind fill_", lambda x: x.view(4, 2).unbind(0)[1].fill_(1))
    case("non-leaf chunk mul_", lambda x: (x * 2).chunk(4)[1].mul_(2))
    case("view of a chunk", lambda x: (x * 1).chunk(2)[0].view(2, 2).fill_(1))
    case("single chunk", lambda x: (x * 1).chunk(1)[0].zero_())
    case("under no_grad", lambda x: _no_grad(lib, lambda: x.chunk(4)[1].fill_(1)))
    case("chunk made, filled under no_grad", lambda x: (lambda v: _no_grad(lib, lambda: v.fill_(1)))(x.chunk(4)[1]))
    case(".data chunk", lambda x: x.data.chunk(4)[1].fill_(1))
    case("detached chunk", lambda x: x.chunk(4)[1].detach().fill_(1))
    case("unsafe_chunk", lambda x: (x * 1).unsafe_chunk(4)[1].fill_(1))
    case("unsafe_split", lambda x: lib.unsafe_split(x * 1, 2)[1].fill_(1))
    case("tensor_split", lambda x: (x * 1).tensor_split(2)[0].fill_(1))
    case("narrow of a leaf", lambda x: x.narrow(0, 2, 2).fill_(1))
    case("no grad anywhere", lambda x: x.detach().clone().chunk(4)[1].fill_(1))
    case("plain chunk, grad value", lambda x: lib.zeros(4).chunk(2)[0].copy_(lib.ones(2, requires_grad=True)))
    case("view of a plain chunk, grad value",
         lambda x: lib.zeros(4).chunk(2)[0][0:1].copy_(lib.ones(1, requires_grad=True)))
    case("plain unbind, grad value", lambda x: lib.zeros(4).unbind(0)[1].add_(lib.ones((), requires_grad=True)))
    return out


def _no_grad(lib, f):
    with lib.no_grad():
        f()


def test_inplace_on_a_multi_output_view_is_refused_like_torch():
    # BiDAF (galsang/BiDAF-pytorch) initializes its LSTMs' forget-gate bias
    # with bias_hh.chunk(4)[1].fill_(1): PyTorch refuses an in-place op on
    # an output of split / chunk / unbind (or a view of one) when autograd
    # tracks it.  tracec let it through on non-leaf tensors, and named the
    # leaf-view rule for leaves.
    got, want = _multi_output_view_cases(tracec), _multi_output_view_cases(pt)
    assert [g[:2] for g in got] == [w[:2] for w in want]
    for (name, kind, g), (_, _, w) in zip(got, want):
        if kind == "RuntimeError":
            assert g.endswith(w), (name, g, w)   # (tracec prefixes the op's name on one)
        else:
            assert g == w, name


@pytest.mark.parametrize("lib", [tracec, pt], ids=["tracec", "torch"])
def test_numpy_arrays_in_a_checkpoint_need_numpys_globals_like_torch(lib, tmp_path):
    # torch.save pickles a NumPy array (numpy._core.multiarray._reconstruct,
    # numpy.ndarray, numpy.dtype, the dtype's class): a weights-only load
    # refuses it until all of them are allowed; tracec stored it as data and
    # loaded it whatever weights_only said.  A NumPy scalar needs its
    # dtype's class too, not only numpy's scalar and dtype.
    lib.save({"a": np.arange(3.0), "b": np.zeros((2, 2), np.int64), "s": np.float32(2.5)}, tmp_path / "n.pth")
    rebuild, scalar = np._core.multiarray._reconstruct, np._core.multiarray.scalar
    steps = [rebuild, np.ndarray, np.dtype, np.dtypes.Float64DType, np.dtypes.Int64DType, scalar,
             np.dtypes.Float32DType]
    for k in range(len(steps)):
        with lib.serialization.safe_globals(steps[:k]):
            with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
                lib.load(tmp_path / "n.pth")
    with lib.serialization.safe_globals(steps):
        d = lib.load(tmp_path / "n.pth")
    assert d["a"].tolist() == [0.0, 1.0, 2.0] and d["b"].dtype == np.int64
    assert type(d["s"]) is np.float32 and d["s"] == 2.5
    assert type(lib.load(tmp_path / "n.pth", weights_only=False)["a"]) is np.ndarray


def _no_grad_view_cases(lib):
    out = []

    def case(name, f):
        try:
            r = f()
            out.append((name, "ok", r))
        except RuntimeError as e:
            out.append((name, "RuntimeError", str(e)))

    def made_in_no_grad(x, view):
        with lib.no_grad():
            return view(x)

    def nonleaf():
        return lib.zeros(8, requires_grad=True) * 1

    case("slice fill_", lambda: made_in_no_grad(nonleaf(), lambda x: x[2:4]).fill_(1).tolist())
    case("view mul_", lambda: made_in_no_grad(nonleaf(), lambda x: x.view(2, 4)).mul_(2).tolist())
    case("leaf slice fill_", lambda: made_in_no_grad(lib.zeros(4, requires_grad=True), lambda x: x[1:3]).fill_(1)
         .tolist())
    case("plain view, grad source", lambda: made_in_no_grad(lib.zeros(4), lambda x: x[1:3])
         .copy_(lib.ones(2, requires_grad=True)).tolist())
    case("plain view, plain source", lambda: made_in_no_grad(lib.zeros(4), lambda x: x[1:3]).fill_(1).tolist())
    case("view of it made with grad", lambda: made_in_no_grad(nonleaf(), lambda x: x[1:5])[0:2].fill_(5).tolist())
    case("detached slice", lambda: made_in_no_grad(nonleaf(), lambda x: x.detach()[1:3]).fill_(3).tolist())
    case("int view", lambda: made_in_no_grad(lib.arange(6), lambda x: x[1:3]).fill_(7).tolist())

    def both_in_no_grad():
        x = nonleaf()
        with lib.no_grad():
            x[1:3].fill_(1)
        return x.tolist()
    case("made and filled in no_grad", both_in_no_grad)
    return out


def test_inplace_on_a_view_made_in_no_grad_is_refused_like_torch():
    # PyTorch refuses an in-place op with grad mode on, on a view made under
    # no_grad, when the write would be tracked (its base requires grad, or
    # the written value does); tracec applied it to the base's graph.
    got, want = _no_grad_view_cases(tracec), _no_grad_view_cases(pt)
    assert got == want
