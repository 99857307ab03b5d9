"""``torch.hub``: models from a ``hubconf.py`` (a local directory or a
GitHub repository) and checkpoints from URLs.

Invariants: downloads go to a temporary file in the destination folder and
are renamed into place only when complete (and, with ``hash_prefix`` or a
``-<sha256 prefix>`` file name under ``check_hash``, only when the digest
matches), so an interrupted download never leaves a half file under the
final name.  Checkpoints load through ``tracec.load``: the allow-list
unpickler, which runs no code from the file.  ``source="github"`` imports
the downloaded repository's ``hubconf.py``, which is code from the
internet, exactly as PyTorch does; ``trust_repo`` is accepted for
compatibility.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
# torch.hub's own module-level name: code imports it from there (timm's _hub.py
# does `from torch.hub import HASH_REGEX, download_url_to_file, urlparse`).
from urllib.parse import urlparse

__all__ = ["get_dir", "set_dir", "load", "list", "help", "load_state_dict_from_url",
           "download_url_to_file"]

_HUB_DIR = None
HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")


def get_dir() -> str:
    """``$TORCH_HOME/hub`` (default ``~/.cache/torch/hub``), or ``set_dir``'s."""
    if _HUB_DIR is not None:
        return _HUB_DIR
    home = os.environ.get("TORCH_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "torch")
    return os.path.join(os.path.expanduser(home), "hub")


def set_dir(d) -> None:
    global _HUB_DIR
    _HUB_DIR = os.path.expanduser(os.fspath(d))


def download_url_to_file(url: str, dst, hash_prefix=None, progress: bool = True) -> None:
    # Imported here, not with the module: ~25 ms of every `import tracec`.
    import hashlib
    import tempfile
    import urllib.request
    dst = os.path.expanduser(os.fspath(dst))
    folder = os.path.dirname(os.path.abspath(dst))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".partial-", dir=folder)
    digest = hashlib.sha256()
    try:
        try:
            with urllib.request.urlopen(url, timeout=60) as resp, os.fdopen(fd, "wb") as out:
                while chunk := resp.read(1 << 16):
                    out.write(chunk)
                    digest.update(chunk)
        except OSError as e:
            raise RuntimeError(f"torch.hub: could not download {url}: {e}") from None
        if hash_prefix is not None and not digest.hexdigest().startswith(hash_prefix):
            raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got '
                               f'"{digest.hexdigest()}")')
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_state_dict_from_url(url: str, model_dir=None, map_location=None, progress=True,
                             check_hash=False, file_name=None, weights_only=True):
    """Download ``url`` once into ``model_dir`` (default
    ``get_dir()/checkpoints``) and ``tracec.load`` it."""
    import urllib.parse
    from tracec.serialization import load as load_file
    model_dir = model_dir or os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    name = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    cached = os.path.join(model_dir, name)
    if not os.path.exists(cached):
        match = HASH_REGEX.search(name) if check_hash else None
        download_url_to_file(url, cached, match.group(1) if match else None, progress)
    return load_file(cached, map_location=map_location, weights_only=weights_only)


def _github_dir(repo: str, force_reload: bool) -> str:
    owner_name, _, ref = repo.partition(":")
    if owner_name.count("/") != 1:
        raise ValueError(f'Invalid input: repo_or_dir should be of the form "repo_owner/'
                         f'repo_name[:ref]", got {repo!r}')
    owner, name = owner_name.split("/")
    ref = ref or "main"
    folder = os.path.join(get_dir(), f"{owner}_{name}_{ref.replace('/', '_')}")
    if force_reload or not os.path.isdir(folder):
        import tempfile
        import zipfile
        archive = folder + ".zip"
        download_url_to_file(f"https://github.com/{owner}/{name}/zipball/{ref}", archive)
        staging = tempfile.mkdtemp(prefix=".extract-", dir=get_dir())
        try:
            with zipfile.ZipFile(archive) as z:
                z.extractall(staging)
                top = z.namelist()[0].split("/")[0]
            if os.path.isdir(folder):
                shutil.rmtree(folder)
            os.replace(os.path.join(staging, top), folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            os.unlink(archive)
    return folder


def _hubconf(repo_or_dir: str, source: str, force_reload: bool):
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    folder = (os.path.expanduser(repo_or_dir) if source == "local"
              else _github_dir(repo_or_dir, force_reload))
    path = os.path.join(folder, "hubconf.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Cannot find hubconf.py in {folder}")
    spec = importlib.util.spec_from_file_location(f"hubconf_{abs(hash(folder))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module


def _entry(module, model: str):
    fn = getattr(module, model, None)
    if fn is None or not callable(fn):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return fn


def list(github, force_reload=False, skip_validation=False, trust_repo=None, verbose=True):  # noqa: A001
    module = _hubconf(github, "github" if not os.path.isdir(github) else "local", force_reload)
    return [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]


def help(github, model, force_reload=False, skip_validation=False, trust_repo=None):  # noqa: A001
    module = _hubconf(github, "github" if not os.path.isdir(github) else "local", force_reload)
    return _entry(module, model).__doc__


def load(repo_or_dir, model, *args, source="github", trust_repo=None, force_reload=False,
         verbose=True, skip_validation=False, **kwargs):
    """``model(*args, **kwargs)`` from the ``hubconf.py`` of ``repo_or_dir``."""
    return _entry(_hubconf(repo_or_dir, source, force_reload), model)(*args, **kwargs)
