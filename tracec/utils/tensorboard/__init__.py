"""``torch.utils.tensorboard``: ``SummaryWriter`` writing TensorBoard event
files through the ``tensorboard`` package (as PyTorch's does; install it,
or the ``tensorboard`` extra, to log).

Covered: scalars (``add_scalar``, ``add_scalars`` with its one sub-run per
tag), histograms (``add_histogram``, TensorBoard's default exponential
buckets), images (``add_image`` / ``add_images``, through ``images``),
text, hyperparameters (``add_hparams``; ``summary.hparams``' protos written
through ``file_writer``, as Stable-Baselines3 does), ``flush``/``close``
and the context manager; the run folder defaults to
``runs/<date>_<host><comment>``.
Figure, audio, graph, embedding and mesh summaries raise
``NotImplementedError`` naming the method rather than writing nothing.
Invariant: values are read eagerly (``.item()``/NumPy) -- a writer called
inside ``tracec.compile`` is a Python side effect, which the tracer refuses.
"""
from __future__ import annotations

import os
import socket
import time
from datetime import datetime

import numpy as np

try:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
except ImportError:  # PyTorch's own message
    raise ImportError("TensorBoard logging requires TensorBoard version 1.15 or above") from None

__all__ = ["SummaryWriter"]


def _np(x) -> np.ndarray:
    from tracec.tensor import Tensor
    if isinstance(x, Tensor):
        return x.detach().numpy()
    return np.asarray(x)


def _default_bins() -> list:
    # TensorBoard's (and PyTorch's "tensorflow") bucket limits: +-1e-12 * 1.1^k.
    v, pos = 1e-12, []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return [-p for p in reversed(pos)] + [0.0] + pos


def _histogram(values: np.ndarray, bins, max_bins=None) -> HistogramProto:
    values = values.reshape(-1).astype(np.float64)
    if values.size == 0:
        raise ValueError("The input has no element.")
    counts, limits = np.histogram(values, bins=_default_bins() if bins == "tensorflow" else bins)
    if max_bins is not None and len(counts) > max_bins:
        sub = len(counts) // max_bins
        if len(counts) % sub:
            counts = np.pad(counts, (0, sub - len(counts) % sub))
        counts = counts.reshape(-1, sub).sum(-1)
        limits = np.concatenate([limits[:-1:sub], limits[-1:]])
    nz = np.cumsum(counts > 0)
    start, end = np.searchsorted(nz, [0, nz[-1] - 1], side="right")
    start, end = int(start), int(end) + 1
    counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = limits[start:end + 1]
    return HistogramProto(min=values.min(), max=values.max(), num=len(values),
                          sum=values.sum(), sum_squares=values.dot(values),
                          bucket_limit=limits.tolist(), bucket=counts.tolist())


class _FileWriter:
    def __init__(self, log_dir, max_queue, flush_secs, filename_suffix):
        self.log_dir = str(log_dir)
        self.events = EventFileWriter(self.log_dir, max_queue, flush_secs, filename_suffix)

    def get_logdir(self) -> str:
        return self.log_dir

    def add_summary(self, summary, global_step=None, walltime=None):
        """PyTorch's ``FileWriter.add_summary``: one event for ``summary``."""
        step = global_step
        event = Event(summary=summary, wall_time=time.time() if walltime is None else walltime)
        if step is not None:
            event.step = int(step)
        self.events.add_event(event)


class SummaryWriter:
    """PyTorch's ``SummaryWriter(log_dir=None, comment='', purge_step=None,
    max_queue=10, flush_secs=120, filename_suffix='')``."""

    def __init__(self, log_dir=None, comment: str = "", purge_step=None, max_queue: int = 10,
                 flush_secs: int = 120, filename_suffix: str = ""):
        if not log_dir:
            now = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", now + "_" + socket.gethostname() + comment)
        self.log_dir = str(log_dir)
        self.purge_step, self.max_queue = purge_step, max_queue
        self.flush_secs, self.filename_suffix = flush_secs, filename_suffix
        self._writers: dict = {}
        self._main()

    def _main(self) -> _FileWriter:
        return self._sub(self.log_dir)

    def _sub(self, path: str) -> _FileWriter:
        w = self._writers.get(path)
        if w is None:
            w = self._writers[path] = _FileWriter(path, self.max_queue, self.flush_secs,
                                                  self.filename_suffix)
        return w

    def get_logdir(self) -> str:
        return self.log_dir

    @property
    def file_writer(self) -> _FileWriter:
        """The run folder's event writer (PyTorch's ``FileWriter``)."""
        return self._main()

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None,
                    global_step=None) -> None:
        """PyTorch's: the hparams protos and the metrics as scalars, in a
        sub-run ``run_name`` (default: the current time)."""
        from tracec.utils.tensorboard.summary import hparams
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        exp, ssi, sei = hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        logdir = os.path.join(self.log_dir, run_name or str(time.time()))
        with SummaryWriter(log_dir=logdir) as w_hp:
            for s in (exp, ssi, sei):
                w_hp.file_writer.add_summary(s, global_step)
            for k, v in metric_dict.items():
                w_hp.add_scalar(k, v, global_step)

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None,
                   new_style: bool = False, double_precision: bool = False) -> None:
        v = _np(scalar_value).squeeze()
        if v.ndim != 0:
            raise AssertionError(f"Tensor should contain one element (0 dimensions). Was given "
                                 f"size: {v.size} and {v.ndim} dimensions.")
        v = float(v)
        if new_style:
            proto = (TensorProto(double_val=[v], dtype="DT_DOUBLE") if double_precision
                     else TensorProto(float_val=[v], dtype="DT_FLOAT"))
            meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
            summary = Summary(value=[Summary.Value(tag=tag, tensor=proto, metadata=meta)])
        else:
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=v)])
        self._main().add_summary(summary, global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None) -> None:
        walltime = time.time() if walltime is None else walltime
        for tag, value in tag_scalar_dict.items():
            path = os.path.join(self.log_dir, main_tag.replace("/", "_") + "_" + tag)
            v = float(_np(value).squeeze())
            self._sub(path).add_summary(
                Summary(value=[Summary.Value(tag=main_tag, simple_value=v)]), global_step,
                walltime)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins=None) -> None:
        hist = _histogram(_np(values), bins, max_bins)
        self._main().add_summary(Summary(value=[Summary.Value(tag=tag, histo=hist)]),
                                 global_step, walltime)

    def add_text(self, tag, text_string, global_step=None, walltime=None) -> None:
        meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(
            plugin_name="text", content=TextPluginData(version=0).SerializeToString()))
        proto = TensorProto(dtype="DT_STRING", string_val=[text_string.encode("utf_8")],
                            tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
        self._main().add_summary(Summary(value=[Summary.Value(
            tag=tag + "/text_summary", metadata=meta, tensor=proto)]), global_step, walltime)

    def add_image(self, tag, img_tensor, global_step=None, walltime=None,
                  dataformats="CHW") -> None:
        from tracec.utils.tensorboard.images import image
        self._main().add_summary(image(tag, _np(img_tensor), dataformats), global_step,
                                 walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None,
                   dataformats="NCHW") -> None:
        from tracec.utils.tensorboard.images import image
        self._main().add_summary(image(tag, _np(img_tensor), dataformats), global_step,
                                 walltime)

    def _unsupported(self, name):
        def method(*args, **kwargs):
            raise NotImplementedError(f"SummaryWriter.{name}: tracec's writer logs scalars, "
                                      "histograms, images, text and hparams only")
        return method

    def __getattr__(self, name):
        if name in ("add_figure", "add_video", "add_audio",
                    "add_graph", "add_embedding", "add_mesh", "add_pr_curve",
                    "add_custom_scalars", "add_image_with_boxes"):
            return self._unsupported(name)
        raise AttributeError(name)

    def flush(self) -> None:
        for w in self._writers.values():
            w.events.flush()

    def close(self) -> None:
        for w in self._writers.values():
            w.events.flush()
            w.events.close()
        self._writers = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
