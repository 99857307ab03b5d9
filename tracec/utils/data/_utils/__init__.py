"""``torch.utils.data._utils``: the DataLoader's helper modules as
libraries import them (MONAI: ``from torch.utils.data._utils.collate import
default_collate, default_collate_fn_map``), with PyTorch's constants."""
import sys

from tracec.utils.data._utils import collate, fetch, worker  # noqa: F401

IS_WINDOWS = sys.platform == "win32"
HAS_NUMPY = True
#: seconds between a worker's checks that its loader is alive (PyTorch's)
MP_STATUS_CHECK_INTERVAL = 5.0
python_exit_status = False

__all__ = ["collate", "fetch", "worker", "IS_WINDOWS", "HAS_NUMPY", "MP_STATUS_CHECK_INTERVAL",
           "python_exit_status"]
