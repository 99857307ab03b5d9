"""Gaps found by the models16 public programs, each compared with torch."""
import pytest
import torch

import tracec
import tracec.distributions as TD


def test_mixture_same_family_constraint_is_public_like_torch():
    comp_t = torch.distributions.Independent(torch.distributions.Normal(torch.zeros(3, 2), torch.ones(3, 2)), 1)
    comp = TD.Independent(TD.Normal(tracec.zeros(3, 2), tracec.ones(3, 2)), 1)
    mt = torch.distributions.MixtureSameFamily(torch.distributions.Categorical(logits=torch.zeros(3)), comp_t)
    m = TD.MixtureSameFamily(TD.Categorical(logits=tracec.zeros(3)), comp)
    assert type(m.support).__name__ == type(mt.support).__name__ == "MixtureSameFamilyConstraint"
    assert isinstance(m.support, TD.constraints.MixtureSameFamilyConstraint)
    assert "MixtureSameFamilyConstraint" in TD.constraints.__all__
    assert repr(m.support) == repr(mt.support)
    assert m.support.event_dim == mt.support.event_dim == 1
    v = [[0.0, 1.0], [float("nan"), 2.0]]
    assert m.support.check(tracec.tensor(v)).tolist() == mt.support.check(torch.tensor(v)).tolist()
    with pytest.raises(AssertionError, match="base_constraint must be a Constraint, got int"):
        torch.distributions.constraints.MixtureSameFamilyConstraint(3)
    with pytest.raises(AssertionError, match="base_constraint must be a Constraint, got int"):
        TD.constraints.MixtureSameFamilyConstraint(3)
