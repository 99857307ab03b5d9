"""``torch.utils.deterministic``: the ``fill_uninitialized_memory`` switch
(PyTorch fills ``torch.empty`` results with NaN / the largest integer when it
and ``use_deterministic_algorithms`` are on).  tracec keeps the flag for the
code that sets and reads it (ultralytics' ``init_seeds``); its value does
not change what tracec computes."""

#: PyTorch's default is True.
fill_uninitialized_memory = True
