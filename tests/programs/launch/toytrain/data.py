import numpy as np
import torch


def make_data(n: int, n_in: int, seed: int):
    """Synthetic regression data from numpy (the same under any torch)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, n_in)).astype(np.float32)
    y = (x @ rng.standard_normal((n_in, 1)) + 0.1).astype(np.float32)
    return torch.from_numpy(x), torch.from_numpy(y)
