"""Gaps the models30 programs (tests/programs/models30) led to in tracec,
each checked against torch 2.13."""
import warnings

import pytest

import tracec

pt = pytest.importorskip("torch")


def _outcome(fn):
    """What ``fn()`` gives: its value as a list, or the error's type and words."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = fn()
    except Exception as e:  # noqa: BLE001 - the error is the outcome compared
        return type(e).__name__, str(e)
    return r.tolist()


def _refusals(cases, name):
    """The errors torch and tracec raise for ``cases(lib)[name]()``:
    ((type name, words) under torch, the same under tracec)."""
    out = []
    for lib in (pt, tracec):
        with pytest.raises(Exception) as e:
            cases(lib)[name]()
        out.append((type(e.value).__name__, str(e.value)))
    return out


def _keys(lib):
    """Index keys with a boolean mask (or list of bools) that does not fit
    the dims it indexes, once the basic indices (int, None, slice, ellipsis,
    a bool scalar) have been applied, and int index arrays that do not
    broadcast together, for a (2, 3, 4) tensor."""
    m5 = lib.ones(5, dtype=lib.bool)
    return [
        ([True, False],),                           # loralib's lora_ind[enable_lora, :] one short
        (lib.tensor([True, False]),),
        (Ellipsis, m5),
        (0, m5),                                    # the int drops dim 0 first
        (None, lib.ones(2, 5, dtype=lib.bool)),     # None adds a dim first
        (True, m5),
        (slice(None), lib.ones(3, 5, dtype=lib.bool)),
        (lib.ones(2, dtype=lib.bool), 0, lib.ones(3, dtype=lib.bool)),
        (Ellipsis, None, m5),
        (lib.tensor(1), m5),                        # a 0-d int index is an int
        (lib.tensor([0, 1]), m5),
        (lib.ones(3, dtype=lib.uint8),),            # the deprecated uint8 mask too
        (slice(None), [True, True]),
        (lib.tensor([0, 1]), lib.tensor([0, 1, 2])),
        (lib.tensor([[0, 1]]), lib.tensor([[0], [1], [1]])),
        (lib.ones(2, dtype=lib.bool), lib.ones(3, dtype=lib.bool)),
    ]


def _index_outcomes(lib):
    out = []
    for key in _keys(lib):
        t = lib.arange(24.).view(2, 3, 4)

        def put(v, key=key, grad=False):
            u = lib.zeros(2, 3, 4, requires_grad=True).clone() if grad else t.clone()
            u[key] = v
            return u
        out.append([_outcome(lambda: t[key]), _outcome(lambda: put(1.0)),
                    _outcome(lambda: put(lib.ones(7))),
                    _outcome(lambda: put(lib.tensor(1.0, requires_grad=True), grad=True))])
    return out


def test_misfit_boolean_masks_and_index_arrays_are_refused_as_in_pytorch():
    # RAFT / nflows / loralib index with boolean masks (valid.view(-1),
    # inside_interval_mask, lora_ind[enable_lora, :]).  A mask whose shape
    # is not that of the dims it indexes is PyTorch's IndexError naming both
    # shapes; tracec read a short mask as its nonzero positions (x[[True,
    # False]] of a 3-row tensor gave row 0) and refused assignments in
    # NumPy's words.  Index arrays that do not broadcast were NumPy's
    # ValueError.
    got, want = _index_outcomes(tracec), _index_outcomes(pt)
    for key, g, w in zip(_keys(pt), got, want):
        assert g == w, key


def test_misfit_value_of_an_advanced_assignment_is_pytorchs_runtime_error():
    # ``x[idx] = v`` with a v that does not broadcast to the indexed shape:
    # PyTorch's RuntimeError, not NumPy's IndexError (no gradient recorded:
    # tracec writes through NumPy there)
    def put(lib, key):
        t = lib.zeros(2, 3, 4)
        t[key(lib)] = lib.ones(7)

    for key in (lambda lib: (lib.tensor([[0], [1]]), slice(None), lib.tensor([0, 1, 2])),
                lambda lib: (lib.tensor([True, False]), slice(None), lib.tensor([1, 3]))):
        with pytest.raises(RuntimeError) as want:
            put(pt, key)
        with pytest.raises(RuntimeError) as got:
            put(tracec, key)
        assert str(got.value) == str(want.value)


@pytest.mark.parametrize("lib", [tracec, pt], ids=["tracec", "torch"])
def test_fitting_boolean_list_and_mask_indexing_still_reads_and_writes(lib):
    # loralib's MergedLinear: lora_ind from a list of bools, then zero_pad's
    # result[self.lora_ind] = x
    ind = lib.zeros((9,), dtype=lib.bool).view(3, -1)
    ind[[True, False, True], :] = True
    ind = ind.view(-1)
    r = lib.zeros(9, 2)
    r[ind] = lib.arange(12.).view(6, 2)
    assert ind.tolist() == [True] * 3 + [False] * 3 + [True] * 3
    assert r[:, 0].tolist() == [0., 2., 4., 0., 0., 0., 6., 8., 10.]
    t = lib.arange(24.).view(2, 3, 4)
    assert t[0, [True, False, True]].tolist() == [[0., 1., 2., 3.], [8., 9., 10., 11.]]
    assert t[..., lib.tensor([True, False, False, True])].shape == (2, 3, 2)


def _shape_error_cases(lib):
    """Operands that do not broadcast (or broadcast past an in-place op's
    output), and a where() condition that is not boolean."""
    o = lib.ones
    return {
        "masked_fill mask": lambda: o(3, 4).masked_fill(o(3, dtype=lib.bool), 0.),
        "masked_select mask": lambda: lib.masked_select(o(3, 1), o(2, 4, dtype=lib.bool)),
        "where cond / input": lambda: lib.where(o(3, dtype=lib.bool), o(2), o(3)),
        "where after broadcasting": lambda: lib.where(o(3, dtype=lib.bool), o(3), o(2, 2)),
        "where 3-d cond": lambda: lib.where(o(2, 1, 3, dtype=lib.bool), o(4), o(3)),
        "where float condition": lambda: lib.where(o(3), o(3), o(3)),
        "where long condition": lambda: lib.where(o(3, dtype=lib.long), o(3), o(3)),
        "addcmul": lambda: lib.addcmul(o(3), o(2), o(3)),
        "addcdiv": lambda: lib.addcdiv(o(3), o(2), o(3)),
        "lerp weight": lambda: lib.lerp(o(3), o(3), o(4)),
        "add_ grows": lambda: o(3, 4).add_(o(2, 3, 4)),
        "mul_ grows a dim of 1": lambda: o(3, 1).mul_(o(3, 4)),
        "masked_fill_ grows": lambda: o(3, 4).masked_fill_(o(2, 3, 4, dtype=lib.bool), 0.),
        "addcmul_ grows": lambda: o(3).addcmul_(o(2, 3), o(3)),
        "copy_ grows": lambda: o(3, 4).copy_(o(2, 3, 4)),
        "copy_ mismatch": lambda: o(3, 4).copy_(o(3, 5)),
    }


@pytest.mark.parametrize("case", list(_shape_error_cases(pt)))
def test_broadcast_errors_name_the_pair_pytorch_names(case):
    # nflows' torch.where masks, monodepth2's automask, RAFT's valid masks:
    # a shape slip there is PyTorch's RuntimeError naming the sizes of the
    # pair its TensorIterator meets (the shape so far against the next
    # operand: where's condition before its input; a mask before the
    # tensor it selects from; addcmul's input before tensor1), or "output
    # with shape ... doesn't match the broadcast shape ..." for an in-place
    # op whose result would be larger.  tracec named the pair its own
    # composite met first (addcmul's tensor1 * tensor2), NumPy's "Attempting
    # to broadcast ..." / "input operand has more dimensions than allowed by
    # the axis remapping", a "shapes ... cannot be broadcast together" of
    # its own for three operands, and a TypeError for a float condition.
    want, got = _refusals(_shape_error_cases, case)
    assert want[0] == "RuntimeError" and got[0] in ("RuntimeError", "ShapeError")
    assert got[1] == want[1]


@pytest.mark.parametrize("lib", [tracec, pt], ids=["tracec", "torch"])
def test_broadcasting_in_place_ops_and_copies_still_write(lib):
    o = lib.ones
    a = o(3, 4)
    a.copy_(lib.arange(4.))
    a.add_(o(1, 4)).mul_(lib.tensor(2.))
    a.masked_fill_(lib.tensor([True, False, False, True]), -1.)
    b = lib.zeros(2, 3).lerp_(o(3), lib.tensor([[0.5], [1.0]]))
    assert a.tolist() == [[-1., 4., 6., -1.]] * 3
    assert b.tolist() == [[0.5] * 3, [1.0] * 3]
    assert lib.where(lib.tensor([True, False]), o(2), lib.zeros(2, 1)).tolist() == [[1., 0.], [1., 0.]]


#: (input shape, target shape, target dtype name) for class-index losses
_TARGET_CASES = [
    ((2, 3), (2, 4), "long"),        # LoRA's GPT-2 loss on an unflattened target
    ((2, 3), (2, 1), "long"),
    ((2, 3), (2, 4), "float32"),     # the shape is named before the dtype
    ((2, 3), (3,), "float32"),
    ((3,), (2, 2), "long"),
    ((3,), (3,), "int32"),
    ((3,), (2,), "long"),
    ((2, 3, 5), (2,), "long"),
    ((2, 3, 5), (2, 4), "long"),
    ((2, 3, 5), (2, 5, 1), "int32"),
    ((2, 3, 4, 5), (2, 4), "long"),
    ((2, 3, 4, 5), (2, 4, 4), "long"),
    ((2, 3, 4, 5), (2, 4, 4), "float32"),
    ((2, 3, 4, 5, 2), (2, 4, 5, 3), "long"),
    ((3,), (3,), "long"),            # cross_entropy: probabilities of an int dtype
]


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("shapes", _TARGET_CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_class_target_errors_are_pytorchs(loss, shapes):
    # A target of the wrong shape or dtype for cross_entropy / nll_loss:
    # PyTorch's checks in its order (batch size, then the shape checks of
    # the kernel the input's rank picks, then the target dtype, then the
    # 1-D and 4-D size checks) and its words; tracec had its own sentences
    # and checked the dtype first.
    def cases(lib):
        f = getattr(lib.nn.functional, loss)
        return {"": lambda: f(lib.ones(*shapes[0]),
                              lib.zeros(*shapes[1], dtype=getattr(lib, shapes[2])))}
    want, got = _refusals(cases, "")
    assert got == want


@pytest.mark.parametrize("lib", [tracec, pt], ids=["tracec", "torch"])
def test_a_one_element_target_of_a_1d_input_is_unbatched(lib):
    # PyTorch reads a 1-D input with a 1-D target of one element as one
    # unbatched sample (tracec refused every 1-D target of a 1-D input)
    F = lib.nn.functional
    x = lib.tensor([0.5, 1.0, -1.0])
    assert F.cross_entropy(x, lib.tensor([1]), reduction="none").shape == ()
    assert abs(F.cross_entropy(x, lib.tensor([1])).item() -
               F.cross_entropy(x, lib.tensor(1)).item()) < 1e-7
    assert abs(F.nll_loss(x, lib.tensor([2])).item() - 1.0) < 1e-7


def _fold_pad_cases(lib):
    F, o = lib.nn.functional, lib.ones
    return {
        "unfold kernel past the image": lambda: F.unfold(o(1, 2, 4, 4), 5),
        "unfold dilated past the image": lambda: F.unfold(o(1, 2, 4, 4), 3, dilation=2),
        "unfold negative blocks": lambda: F.unfold(o(1, 2, 4, 4), 7),
        "fold channels": lambda: F.fold(o(1, 4, 4), (2, 2), 3),
        "fold zero blocks": lambda: F.fold(o(1, 9, 1), (2, 2), 3),
        "fold negative blocks": lambda: F.fold(o(1, 9, 1), (1, 1), 3),
        "pad mode": lambda: F.pad(o(1, 2, 4), (1, 1), mode="wrap"),
        "pad mode before length": lambda: F.pad(o(1, 2, 4), (1, 1, 1), mode="Reflect"),
    }


@pytest.mark.parametrize("case", list(_fold_pad_cases(pt)))
def test_unfold_fold_and_pad_refusals_are_pytorchs(case):
    # RAFT's F.unfold(8 * flow, [3, 3], padding=1) and the padders' F.pad:
    # PyTorch's words for a kernel larger than the (padded) image, a fold
    # whose block count does not fit (checked before a non-positive count),
    # and an unknown padding mode (checked before the amounts).  tracec
    # prefixed "unfold: " / "fold: ", printed the sizes as lists, checked
    # fold's block shape first and had its own sentence for the mode.
    want, got = _refusals(_fold_pad_cases, case)
    assert got == want
