"""``torch.distributed.rpc``: tracec has no RPC framework, so this is the
module PyTorch builds without one has: ``is_available()`` is False and none
of the RPC API (``init_rpc``, ``rpc_sync``, ``api``...) exists, so code that
probes for it (``hasattr(rpc, "api")``, PyG's distributed helpers) imports
and takes its no-RPC path."""

__all__ = ["is_available"]


def is_available() -> bool:
    return False
