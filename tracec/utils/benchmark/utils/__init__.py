"""``torch.utils.benchmark.utils``: the Timer's modules."""
