"""``torch.distributed._composable``: see ``tracec.distributed.fsdp``."""
