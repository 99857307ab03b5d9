"""Gaps the models19 programs (tests/programs/models19) found in tracec."""
import warnings

import numpy as np

import tracec as torch

CACHE: dict = {}


def test_compiled_call_storing_a_new_tensor_in_a_global_dict_is_replayed():
    # hifi-gan's mel_spectrogram: hann_window[str(y.device)] = torch.hann_window(...)
    # at every call (its `fmax not in mel_basis` test never holds); dynamo
    # replays such a store after each compiled call, so must tracec.compile.
    CACHE["w"] = torch.ones(3)
    CACHE["last"] = torch.zeros(3)

    def step(x):
        CACHE["w"] = torch.arange(3.0) * 2        # a constant, new each call
        CACHE["last"] = x * CACHE["w"]            # depends on the argument
        return CACHE["last"].sum()

    f = torch.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outs = []
        for i in range(4):
            before = CACHE["w"]
            outs.append(f(torch.full((3,), float(i))).item())
            assert CACHE["w"] is not before
            np.testing.assert_array_equal(CACHE["w"].numpy(), [0.0, 2.0, 4.0])
            np.testing.assert_array_equal(CACHE["last"].numpy(), [0.0, 2.0 * i, 4.0 * i])
    assert outs == [0.0, 6.0, 12.0, 18.0]
    assert f.traces == 1


def test_compiled_call_that_reads_the_dict_tensor_it_replaces_is_not_replayed():
    # a running value kept in a dict (read, then replaced): replaying the
    # store would bake in the first call's tensor, so it stays a refused
    # side effect and runs eagerly, with eager's numbers.
    CACHE["h"] = torch.zeros(2)

    def step(x):
        CACHE["h"] = CACHE["h"] * 0.5 + x
        return CACHE["h"].sum()

    f = torch.compile(step, fallback="eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [f(torch.ones(2)).item() for _ in range(4)]
    assert outs == [2.0, 3.0, 3.5, 3.75]
    assert any("a Python side effect" in str(w.message) for w in caught)
