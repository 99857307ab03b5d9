"""Pretrained-weight enums (``ResNet18_Weights.IMAGENET1K_V1`` ...) with
torchvision's names and URLs.  tracec never downloads weights: a builder
given ``weights=`` loads the checkpoint from torch.hub's cache
(``<hub dir>/checkpoints/<file name of the URL>``, where PyTorch would
have saved it) and raises a RuntimeError naming that path when it is absent.
"""
from __future__ import annotations

import os
import urllib.parse
import warnings
from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True, eq=True)
class Weights:
    url: str
    meta: dict = field(default_factory=dict, compare=False, hash=False)
    # the checkpoint's input transform (a preset class; None: the
    # classifiers' ImageClassification with the checkpoint's sizes)
    preset: object = field(default=None, compare=False, hash=False)

    def __hash__(self):
        return hash(self.url)


class WeightsEnum(Enum):
    @classmethod
    def verify(cls, obj):
        if obj is None or isinstance(obj, cls):
            return obj
        if isinstance(obj, str):
            name = obj.replace(cls.__name__ + ".", "")
            if name not in cls.__members__:
                raise ValueError(f"Unknown weights {obj!r} for {cls.__name__}: choose from "
                                 f"{', '.join(cls.__members__)}")
            return cls[name]
        raise TypeError(f"Invalid Weight class provided; expected {cls.__name__} but "
                        f"received {obj.__class__.__name__}.")

    @property
    def url(self):
        return self.value.url

    @property
    def meta(self):
        return self.value.meta

    def transforms(self, **kwargs):
        """The checkpoint's evaluation transform (torchvision's sizes and
        interpolation for it; ``kwargs`` override them)."""
        from tracec.vision.models._presets import PRESETS, ImageClassification
        if self.value.preset is not None:
            return self.value.preset(**kwargs)
        name = os.path.basename(urllib.parse.urlparse(self.url).path)
        return ImageClassification(**{**PRESETS.get(name, {}), **kwargs})

    def get_state_dict(self, progress: bool = True, check_hash: bool = False):
        from tracec import hub
        name = os.path.basename(urllib.parse.urlparse(self.url).path)
        cached = os.path.join(hub.get_dir(), "checkpoints", name)
        if not os.path.isfile(cached):
            raise RuntimeError(
                f"{self}: pretrained weights are not downloaded by tracec; put the file "
                f"{self.url} at {cached} (torch.hub's cache) to load them")
        return hub.load_state_dict_from_url(self.url, progress=progress, check_hash=check_hash)

    def __repr__(self):
        return f"{self.__class__.__name__}.{self._name_}"


def make_weights(name: str, urls: dict, num_classes: int = 1000, meta: dict | None = None,
                 default: str | None = None, preset=None):
    """A WeightsEnum named ``name``: one member per ``urls`` entry (in
    torchvision's order, the order of its releases), and ``DEFAULT`` for the
    member named ``default`` (torchvision's best one), the first when not
    given.  ``meta`` adds entries to some members' meta
    (``{"IMAGENET1K_SWAG_E2E_V1": {"min_size": (384, 384)}}``); ``preset`` is
    the members' transform class when it is not ImageClassification."""
    meta = meta or {}
    members = {k: Weights(u, {"num_classes": num_classes, **meta.get(k, {})}, preset)
               for k, u in urls.items()}
    members["DEFAULT"] = members[default or next(iter(urls))]
    return WeightsEnum(name, members)


def resolve(weights_enum, weights, kwargs):
    """The weights to load (``pretrained=True`` means DEFAULT, with
    torchvision's deprecation warning), and ``num_classes`` checked."""
    if "pretrained" in kwargs:
        pretrained = kwargs.pop("pretrained")
        warnings.warn("The parameter 'pretrained' is deprecated since 0.13, please use "
                      "'weights' instead.", UserWarning, stacklevel=3)
        if pretrained and weights is None:
            weights = weights_enum.DEFAULT
    weights = weights_enum.verify(weights)
    if weights is not None:
        expected = weights.meta["num_classes"]
        if kwargs.get("num_classes", expected) != expected:
            raise ValueError(f"The parameter 'num_classes' expected value {expected} but got "
                             f"{kwargs['num_classes']} instead.")
        kwargs["num_classes"] = expected
    return weights


def load_into(model, weights, progress=True):
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
    return model


def overwrite_named_param(kwargs, param, new_value):
    """torchvision's ``_ovewrite_named_param``: a pretrained checkpoint fixes
    ``param``; a conflicting value from the caller is an error."""
    if param in kwargs and kwargs[param] != new_value:
        raise ValueError(f"The parameter '{param}' expected value {new_value} but got "
                         f"{kwargs[param]} instead.")
    kwargs[param] = new_value
