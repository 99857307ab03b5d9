"""``torch.distributed.elastic.multiprocessing``: its ``errors`` only."""
