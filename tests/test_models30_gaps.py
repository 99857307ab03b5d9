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
