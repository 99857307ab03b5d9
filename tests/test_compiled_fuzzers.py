"""A few seeds of the random compiled-training-step fuzzers
(``compiled_convnet_fuzz.py``, ``compiled_seq_fuzz.py``): compiled steps
equal eager ones.  Campaigns of 900 conv-net and 315 sequence-model seeds
found no difference (2026-12-01); these keep the fuzzers running."""
import pytest

import compiled_convnet_fuzz
import compiled_seq_fuzz


@pytest.mark.parametrize("seed", [3, 11])
def test_random_convnet_steps_compiled_equal_eager(seed):
    bad, desc = compiled_convnet_fuzz.run_one(seed)
    assert bad is not None, "the seed no longer makes a valid net: pick another"
    assert not bad, (bad, desc)


@pytest.mark.parametrize("seed", [2, 5])
def test_random_sequence_model_steps_compiled_equal_eager(seed):
    bad, desc = compiled_seq_fuzz.run_one(seed)
    assert bad is not None
    assert not bad, (bad, desc)
