"""``torch.distributed.elastic``: what programs and ``torchrun`` use of it
(``multiprocessing.errors``: ``record``, ``ChildFailedError``).  tracec's
launcher is ``tracec.distributed.run``."""
