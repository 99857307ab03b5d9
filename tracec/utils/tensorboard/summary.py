"""``torch.utils.tensorboard.summary``: the summary protos the writer logs
that libraries build themselves.  ``hparams`` is PyTorch's: the three
``Summary`` protos of TensorBoard's hparams plugin (experiment, session
start, session end), which ``SummaryWriter.add_hparams`` writes and
Stable-Baselines3's logger writes through ``writer.file_writer``.
Invariant: the protos equal PyTorch's for the same inputs (bools count as
numbers, as PyTorch's ``isinstance(v, (int, float))`` test takes them)."""
from __future__ import annotations

import logging

import numpy as np
from google.protobuf import struct_pb2
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata

__all__ = ["hparams"]

logger = logging.getLogger(__name__)


def _plugin_summary(tag, **content):
    from tensorboard.plugins.hparams.metadata import PLUGIN_DATA_VERSION, PLUGIN_NAME
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
    data = HParamsPluginData(version=PLUGIN_DATA_VERSION, **content)
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(
        plugin_name=PLUGIN_NAME, content=data.SerializeToString()))
    return Summary(value=[Summary.Value(tag=tag, metadata=meta)])


def hparams(hparam_dict=None, metric_dict=None, hparam_domain_discrete=None):
    """(experiment, session_start_info, session_end_info) ``Summary`` protos
    for ``hparam_dict`` (int / float / bool / str / one-element tensor values;
    None skipped) and ``metric_dict``'s tags, as PyTorch makes them."""
    from tensorboard.plugins.hparams.api_pb2 import (DataType, Experiment, HParamInfo,
                                                     MetricInfo, MetricName, Status)
    from tensorboard.plugins.hparams.metadata import (EXPERIMENT_TAG, SESSION_END_INFO_TAG,
                                                      SESSION_START_INFO_TAG)
    from tensorboard.plugins.hparams.plugin_data_pb2 import SessionEndInfo, SessionStartInfo

    from tracec.tensor import Tensor

    if not isinstance(hparam_dict, dict):
        logger.warning("parameter: hparam_dict should be a dictionary, nothing logged.")
        raise TypeError("parameter: hparam_dict should be a dictionary, nothing logged.")
    if not isinstance(metric_dict, dict):
        logger.warning("parameter: metric_dict should be a dictionary, nothing logged.")
        raise TypeError("parameter: metric_dict should be a dictionary, nothing logged.")
    hparam_domain_discrete = hparam_domain_discrete or {}
    if not isinstance(hparam_domain_discrete, dict):
        raise TypeError("parameter: hparam_domain_discrete should be a dictionary, nothing logged.")
    for k, v in hparam_domain_discrete.items():
        if k not in hparam_dict or not isinstance(v, list) or \
                not all(isinstance(d, type(hparam_dict[k])) for d in v):
            raise TypeError(f"parameter: hparam_domain_discrete[{k}] should be a list of same "
                            f"type as hparam_dict[{k}].")

    hps, ssi = [], SessionStartInfo()
    for k, v in hparam_dict.items():
        if v is None:
            continue
        # (PyTorch's order: a bool is an int, so it is logged as a number)
        for kinds, field, dtype in (((int, float), "number_value", "DATA_TYPE_FLOAT64"),
                                    ((str,), "string_value", "DATA_TYPE_STRING"),
                                    ((bool,), "bool_value", "DATA_TYPE_BOOL")):
            if isinstance(v, kinds):
                setattr(ssi.hparams[k], field, v)
                domain = None
                if k in hparam_domain_discrete:
                    domain = struct_pb2.ListValue(values=[
                        struct_pb2.Value(**{field: d}) for d in hparam_domain_discrete[k]])
                hps.append(HParamInfo(name=k, type=DataType.Value(dtype), domain_discrete=domain))
                break
        else:
            if not isinstance(v, Tensor):
                raise ValueError("value should be one of int, float, str, bool, or torch.Tensor")
            ssi.hparams[k].number_value = np.asarray(v.detach().numpy()).reshape(-1)[0]
            hps.append(HParamInfo(name=k, type=DataType.Value("DATA_TYPE_FLOAT64")))

    ssi = _plugin_summary(SESSION_START_INFO_TAG, session_start_info=ssi)
    exp = Experiment(hparam_infos=hps, metric_infos=[MetricInfo(name=MetricName(tag=k))
                                                     for k in metric_dict])
    exp = _plugin_summary(EXPERIMENT_TAG, experiment=exp)
    sei = _plugin_summary(SESSION_END_INFO_TAG,
                          session_end_info=SessionEndInfo(status=Status.Value("STATUS_SUCCESS")))
    return exp, ssi, sei
