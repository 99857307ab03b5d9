"""Stand-ins for ``torch`` and ``torchvision`` in the Python processes a
``tracec run`` script starts by any means (``subprocess`` with
``sys.executable``, joblib's loky workers that scikit-learn's
``GridSearchCV(n_jobs=2)`` uses, ...): ``tracec run`` puts this folder first
on the ``PYTHONPATH`` its children inherit (``as_torch.children_import_tracec``),
so their first ``import torch`` finds ``torch/__init__.py`` here, which
installs tracec as torch (``install_as_torch``) and hands over tracec's
module: the child computes with the same library as its parent, as a
PyTorch program's children import the same torch.

Nothing imports this package as ``tracec.torch_shim``; its folders are
only ever found as the top-level ``torch`` / ``torchvision``."""
