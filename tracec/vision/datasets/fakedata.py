"""``FakeData``: item ``i`` is a normal-noise image and a label drawn right
after ``manual_seed(i + random_offset)`` from tracec's generator, whose
state is restored afterwards (so items are reproducible and do not disturb
the caller's stream)."""
from __future__ import annotations

from tracec import dtypes as dt
from tracec.creation import get_rng_state, manual_seed, randint, randn, set_rng_state
from tracec.vision.datasets.vision import VisionDataset
from tracec.vision.transforms import functional as F


class FakeData(VisionDataset):
    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None,
                 target_transform=None, random_offset=0):
        super().__init__(transform=transform, target_transform=target_transform)
        self.size, self.num_classes = size, num_classes
        self.image_size, self.random_offset = image_size, random_offset

    def __getitem__(self, index):
        if index >= len(self):
            raise IndexError(f"{self.__class__.__name__} index out of range")
        state = get_rng_state()
        manual_seed(index + self.random_offset)
        img = randn(*self.image_size)
        target = randint(0, self.num_classes, size=(1,), dtype=dt.int64)[0]
        set_rng_state(state)
        return self._transformed(F.to_pil_image(img), target.item())

    def __len__(self):
        return self.size
