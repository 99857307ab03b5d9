# torchvision's MobileNetV3-small as published: torchvision/models/_utils.py
# (_make_divisible), torchvision/utils.py (_log_api_usage_once), torchvision/ops/
# misc.py (ConvNormActivation, Conv2dNormActivation, SqueezeExcitation with
# hardsigmoid scale_activation), torchvision/models/mobilenetv3.py
# (InvertedResidualConfig, InvertedResidual, MobileNetV3 with its init and the
# Hardswish / Dropout classifier, _mobilenet_v3_conf with width_mult, reduced_tail
# and dilated), and references/classification/train.py's RMSprop (eps=0.0316,
# alpha=0.9, momentum 0.9) with StepLR, plus SGD nesterov, and its
# train_one_epoch / evaluate steps.  Changes for a CPU test: width_mult 0.5 with
# reduced_tail, 32x32 synthetic images, 10 classes, a few steps, weights from
# numpy.  Dropout's draws differ between tracec and torch: the numeric training
# builds the model with dropout=0.0, and the train-mode forward with the default
# dropout is an [rng] line.  Then the training step under torch.compile against
# the same step run eagerly.
import copy
from functools import partial
from types import FunctionType
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import nn, Tensor


# ---- torchvision/utils.py ----
def _log_api_usage_once(obj: Any) -> None:
    module = obj.__module__
    if not module.startswith("torchvision"):
        module = f"torchvision.internal.{module}"
    name = obj.__class__.__name__
    if isinstance(obj, FunctionType):
        name = obj.__name__
    torch._C._log_api_usage_once(f"{module}.{name}")


def _make_ntuple(x: Any, n: int) -> Tuple[Any, ...]:
    if isinstance(x, (list, tuple)):
        return tuple(x)
    return tuple([x] * n)


# ---- torchvision/models/_utils.py ----
def _make_divisible(v: float, divisor: int, min_value: Optional[int] = None) -> int:
    """
    This function is taken from the original tf repo.
    It ensures that all layers have a channel number that is divisible by 8
    It can be seen here:
    https://github.com/tensorflow/models/blob/master/research/slim/nets/mobilenet/mobilenet.py
    """
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    # Make sure that round down does not go down by more than 10%.
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


# ---- torchvision/ops/misc.py ----
class ConvNormActivation(torch.nn.Sequential):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Union[int, Tuple[int, ...]] = 3,
        stride: Union[int, Tuple[int, ...]] = 1,
        padding: Optional[Union[int, Tuple[int, ...], str]] = None,
        groups: int = 1,
        norm_layer: Optional[Callable[..., torch.nn.Module]] = torch.nn.BatchNorm2d,
        activation_layer: Optional[Callable[..., torch.nn.Module]] = torch.nn.ReLU,
        dilation: Union[int, Tuple[int, ...]] = 1,
        inplace: Optional[bool] = True,
        bias: Optional[bool] = None,
        conv_layer: Callable[..., torch.nn.Module] = torch.nn.Conv2d,
    ) -> None:

        if padding is None:
            if isinstance(kernel_size, int) and isinstance(dilation, int):
                padding = (kernel_size - 1) // 2 * dilation
            else:
                _conv_dim = len(kernel_size) if isinstance(kernel_size, Sequence) else len(dilation)
                kernel_size = _make_ntuple(kernel_size, _conv_dim)
                dilation = _make_ntuple(dilation, _conv_dim)
                padding = tuple((kernel_size[i] - 1) // 2 * dilation[i] for i in range(_conv_dim))
        if bias is None:
            bias = norm_layer is None

        layers = [
            conv_layer(
                in_channels,
                out_channels,
                kernel_size,
                stride,
                padding,
                dilation=dilation,
                groups=groups,
                bias=bias,
            )
        ]

        if norm_layer is not None:
            layers.append(norm_layer(out_channels))

        if activation_layer is not None:
            params = {} if inplace is None else {"inplace": inplace}
            layers.append(activation_layer(**params))
        super().__init__(*layers)
        _log_api_usage_once(self)
        self.out_channels = out_channels


class Conv2dNormActivation(ConvNormActivation):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Union[int, Tuple[int, int]] = 3,
        stride: Union[int, Tuple[int, int]] = 1,
        padding: Optional[Union[int, Tuple[int, int], str]] = None,
        groups: int = 1,
        norm_layer: Optional[Callable[..., torch.nn.Module]] = torch.nn.BatchNorm2d,
        activation_layer: Optional[Callable[..., torch.nn.Module]] = torch.nn.ReLU,
        dilation: Union[int, Tuple[int, int]] = 1,
        inplace: Optional[bool] = True,
        bias: Optional[bool] = None,
    ) -> None:

        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            groups,
            norm_layer,
            activation_layer,
            dilation,
            inplace,
            bias,
            torch.nn.Conv2d,
        )


class SqueezeExcitation(torch.nn.Module):
    """
    This block implements the Squeeze-and-Excitation block from https://arxiv.org/abs/1709.01507 (see Fig. 1).
    Parameters ``activation``, and ``scale_activation`` correspond to ``delta`` and ``sigma`` in eq. 3.
    """

    def __init__(
        self,
        input_channels: int,
        squeeze_channels: int,
        activation: Callable[..., torch.nn.Module] = torch.nn.ReLU,
        scale_activation: Callable[..., torch.nn.Module] = torch.nn.Sigmoid,
    ) -> None:
        super().__init__()
        _log_api_usage_once(self)
        self.avgpool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc1 = torch.nn.Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = torch.nn.Conv2d(squeeze_channels, input_channels, 1)
        self.activation = activation()
        self.scale_activation = scale_activation()

    def _scale(self, input: Tensor) -> Tensor:
        scale = self.avgpool(input)
        scale = self.fc1(scale)
        scale = self.activation(scale)
        scale = self.fc2(scale)
        return self.scale_activation(scale)

    def forward(self, input: Tensor) -> Tensor:
        scale = self._scale(input)
        return scale * input


# ---- torchvision/models/mobilenetv3.py ----
SElayer = SqueezeExcitation


class InvertedResidualConfig:
    # Stores information listed at Tables 1 and 2 of the MobileNetV3 paper
    def __init__(
        self,
        input_channels: int,
        kernel: int,
        expanded_channels: int,
        out_channels: int,
        use_se: bool,
        activation: str,
        stride: int,
        dilation: int,
        width_mult: float,
    ):
        self.input_channels = self.adjust_channels(input_channels, width_mult)
        self.kernel = kernel
        self.expanded_channels = self.adjust_channels(expanded_channels, width_mult)
        self.out_channels = self.adjust_channels(out_channels, width_mult)
        self.use_se = use_se
        self.use_hs = activation == "HS"
        self.stride = stride
        self.dilation = dilation

    @staticmethod
    def adjust_channels(channels: int, width_mult: float):
        return _make_divisible(channels * width_mult, 8)


class InvertedResidual(nn.Module):
    # Implemented as described at section 5 of MobileNetV3 paper
    def __init__(
        self,
        cnf: InvertedResidualConfig,
        norm_layer: Callable[..., nn.Module],
        se_layer: Callable[..., nn.Module] = partial(SElayer, scale_activation=nn.Hardsigmoid),
    ):
        super().__init__()
        if not (1 <= cnf.stride <= 2):
            raise ValueError("illegal stride value")

        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels

        layers: List[nn.Module] = []
        activation_layer = nn.Hardswish if cnf.use_hs else nn.ReLU

        # expand
        if cnf.expanded_channels != cnf.input_channels:
            layers.append(
                Conv2dNormActivation(
                    cnf.input_channels,
                    cnf.expanded_channels,
                    kernel_size=1,
                    norm_layer=norm_layer,
                    activation_layer=activation_layer,
                )
            )

        # depthwise
        stride = 1 if cnf.dilation > 1 else cnf.stride
        layers.append(
            Conv2dNormActivation(
                cnf.expanded_channels,
                cnf.expanded_channels,
                kernel_size=cnf.kernel,
                stride=stride,
                dilation=cnf.dilation,
                groups=cnf.expanded_channels,
                norm_layer=norm_layer,
                activation_layer=activation_layer,
            )
        )
        if cnf.use_se:
            squeeze_channels = _make_divisible(cnf.expanded_channels // 4, 8)
            layers.append(se_layer(cnf.expanded_channels, squeeze_channels))

        # project
        layers.append(
            Conv2dNormActivation(
                cnf.expanded_channels, cnf.out_channels, kernel_size=1, norm_layer=norm_layer, activation_layer=None
            )
        )

        self.block = nn.Sequential(*layers)
        self.out_channels = cnf.out_channels
        self._is_cn = cnf.stride > 1

    def forward(self, input: Tensor) -> Tensor:
        result = self.block(input)
        if self.use_res_connect:
            result += input
        return result


class MobileNetV3(nn.Module):
    def __init__(
        self,
        inverted_residual_setting: List[InvertedResidualConfig],
        last_channel: int,
        num_classes: int = 1000,
        block: Optional[Callable[..., nn.Module]] = None,
        norm_layer: Optional[Callable[..., nn.Module]] = None,
        dropout: float = 0.2,
        **kwargs: Any,
    ) -> None:
        """
        MobileNet V3 main class

        Args:
            inverted_residual_setting (List[InvertedResidualConfig]): Network structure
            last_channel (int): The number of channels on the penultimate layer
            num_classes (int): Number of classes
            block (Optional[Callable[..., nn.Module]]): Module specifying inverted residual building block for mobilenet
            norm_layer (Optional[Callable[..., nn.Module]]): Module specifying the normalization layer to use
            dropout (float): The droupout probability
        """
        super().__init__()
        _log_api_usage_once(self)

        if not inverted_residual_setting:
            raise ValueError("The inverted_residual_setting should not be empty")
        elif not (
            isinstance(inverted_residual_setting, Sequence)
            and all([isinstance(s, InvertedResidualConfig) for s in inverted_residual_setting])
        ):
            raise TypeError("The inverted_residual_setting should be List[InvertedResidualConfig]")

        if block is None:
            block = InvertedResidual

        if norm_layer is None:
            norm_layer = partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)

        layers: List[nn.Module] = []

        # building first layer
        firstconv_output_channels = inverted_residual_setting[0].input_channels
        layers.append(
            Conv2dNormActivation(
                3,
                firstconv_output_channels,
                kernel_size=3,
                stride=2,
                norm_layer=norm_layer,
                activation_layer=nn.Hardswish,
            )
        )

        # building inverted residual blocks
        for cnf in inverted_residual_setting:
            layers.append(block(cnf, norm_layer))

        # building last several layers
        lastconv_input_channels = inverted_residual_setting[-1].out_channels
        lastconv_output_channels = 6 * lastconv_input_channels
        layers.append(
            Conv2dNormActivation(
                lastconv_input_channels,
                lastconv_output_channels,
                kernel_size=1,
                norm_layer=norm_layer,
                activation_layer=nn.Hardswish,
            )
        )

        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(lastconv_output_channels, last_channel),
            nn.Hardswish(inplace=True),
            nn.Dropout(p=dropout, inplace=True),
            nn.Linear(last_channel, num_classes),
        )

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def _forward_impl(self, x: Tensor) -> Tensor:
        x = self.features(x)

        x = self.avgpool(x)
        x = torch.flatten(x, 1)

        x = self.classifier(x)

        return x

    def forward(self, x: Tensor) -> Tensor:
        return self._forward_impl(x)


def _mobilenet_v3_conf(
    arch: str, width_mult: float = 1.0, reduced_tail: bool = False, dilated: bool = False, **kwargs: Any
):
    reduce_divider = 2 if reduced_tail else 1
    dilation = 2 if dilated else 1

    bneck_conf = partial(InvertedResidualConfig, width_mult=width_mult)
    adjust_channels = partial(InvertedResidualConfig.adjust_channels, width_mult=width_mult)

    if arch == "mobilenet_v3_small":
        inverted_residual_setting = [
            bneck_conf(16, 3, 16, 16, True, "RE", 2, 1),  # C1
            bneck_conf(16, 3, 72, 24, False, "RE", 2, 1),  # C2
            bneck_conf(24, 3, 88, 24, False, "RE", 1, 1),
            bneck_conf(24, 5, 96, 40, True, "HS", 2, 1),  # C3
            bneck_conf(40, 5, 240, 40, True, "HS", 1, 1),
            bneck_conf(40, 5, 240, 40, True, "HS", 1, 1),
            bneck_conf(40, 5, 120, 48, True, "HS", 1, 1),
            bneck_conf(48, 5, 144, 48, True, "HS", 1, 1),
            bneck_conf(48, 5, 288 // reduce_divider, 96 // reduce_divider, True, "HS", 2, dilation),  # C4
            bneck_conf(96 // reduce_divider, 5, 576 // reduce_divider, 96 // reduce_divider, True, "HS", 1, dilation),
            bneck_conf(96 // reduce_divider, 5, 576 // reduce_divider, 96 // reduce_divider, True, "HS", 1, dilation),
        ]
        last_channel = adjust_channels(1024 // reduce_divider)  # C5
    else:
        raise ValueError(f"Unsupported model type {arch}")

    return inverted_residual_setting, last_channel


def mobilenet_v3_small(**kwargs: Any) -> MobileNetV3:
    inverted_residual_setting, last_channel = _mobilenet_v3_conf("mobilenet_v3_small", **kwargs)
    return MobileNetV3(inverted_residual_setting, last_channel, **kwargs)


# ---- references/classification/utils.py ----
def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    with torch.inference_mode():
        maxk = max(topk)
        batch_size = target.size(0)
        if target.ndim == 2:
            target = target.max(dim=1)[1]

        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target[None])

        res = []
        for k in topk:
            correct_k = correct[:k].flatten().sum(dtype=torch.float32)
            res.append(correct_k * (100.0 / batch_size))
        return res


# ---- references/classification/train.py ----
def train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, args):
    model.train()
    out = []
    for i, (image, target) in enumerate(data_loader):
        image, target = image.to(device), target.to(device)
        output = model(image)
        loss = criterion(output, target)

        optimizer.zero_grad()
        loss.backward()
        if args.clip_grad_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
        optimizer.step()

        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        out.append((loss.item(), acc1.item(), acc5.item()))
    return out


def evaluate(model, criterion, data_loader, device):
    model.eval()
    total, n = 0.0, 0
    with torch.inference_mode():
        for image, target in data_loader:
            output = model(image.to(device, non_blocking=True))
            total += criterion(output, target).item() * image.shape[0]
            n += image.shape[0]
    return total / n


# ---- the test ----
class Args:
    lr = 0.002
    momentum = 0.9
    weight_decay = 1e-5
    lr_step_size = 2
    lr_gamma = 0.973
    label_smoothing = 0.1
    clip_grad_norm = None


def numpy_weights(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and isinstance(model.get_submodule(name.rsplit(".", 1)[0]), nn.BatchNorm2d):
                if name.endswith("weight"):
                    p.copy_(torch.from_numpy((1.0 + 0.1 * r.standard_normal(p.shape)).astype(np.float32)))
                else:
                    p.copy_(torch.from_numpy((0.1 * r.standard_normal(p.shape)).astype(np.float32)))
            else:
                fan = p[0].numel() if p.dim() > 1 else 16
                p.copy_(torch.from_numpy((r.standard_normal(tuple(p.shape)) / np.sqrt(fan)).astype(np.float32)))
    return model


print("_make_divisible", [_make_divisible(v, 8) for v in (3, 16 * 0.5, 72 * 0.5, 88 * 0.75, 1024 * 0.35, 13.2)])
settings, last_channel = _mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.5, reduced_tail=True)
print("configs", [(c.input_channels, c.kernel, c.expanded_channels, c.out_channels, c.use_se, c.use_hs, c.stride)
                  for c in settings[:4]], last_channel)
try:
    MobileNetV3([], 10)
except ValueError as e:
    print("ValueError:", e)
try:
    MobileNetV3([(16, 3)], 10)
except TypeError as e:
    print("TypeError:", e)

torch.manual_seed(0)
model = mobilenet_v3_small(width_mult=0.5, reduced_tail=True, num_classes=10)
print("params", sum(p.numel() for p in model.parameters()), len(model.features),
      sum(isinstance(m, SqueezeExcitation) for m in model.modules()),
      sum(isinstance(m, nn.Hardswish) for m in model.modules()),
      [type(m).__name__ for m in model.features[1].block], model.features[1].use_res_connect,
      model.features[5].use_res_connect, model.features[4]._is_cn)
print("init", all(bool((m.bias == 0).all()) for m in model.modules() if isinstance(m, nn.Linear)),
      f"{model.classifier[0].weight.std().item():.3f}", model.classifier[2].inplace, model.classifier[2].p)
print("norm", model.features[0][1].eps, model.features[0][1].momentum)

g = np.random.default_rng(0)
images = torch.from_numpy(g.standard_normal((32, 3, 32, 32)).astype(np.float32))
labels = torch.from_numpy(g.integers(0, 10, 32))
x = images[:4]
model.train()
print("train-mode dropout logits", f"{model(x).sum().item():.4f}")

model = numpy_weights(mobilenet_v3_small(width_mult=0.5, reduced_tail=True, num_classes=10, dropout=0.0), 1)
model.eval()
with torch.no_grad():
    out = model(x)
print("eval logits", tuple(out.shape), [f"{v:.4f}" for v in out[0, :5].tolist()])
se = model.features[1].block[1]
with torch.no_grad():
    s = se._scale(torch.relu(torch.from_numpy(g.standard_normal((2, se.fc1.in_channels, 4, 4)).astype(np.float32))))
print("se scale", tuple(s.shape), f"{s.min().item():.4f}", f"{s.max().item():.4f}", f"{s.mean().item():.4f}")

args = Args()
criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
optimizer = torch.optim.RMSprop(model.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay, eps=0.0316, alpha=0.9)
lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.lr_step_size, gamma=args.lr_gamma)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images[:16], labels[:16]), batch_size=8)
val_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images[16:], labels[16:]), batch_size=8)
for epoch in range(3):
    stats = train_one_epoch(model, criterion, optimizer, loader, "cpu", epoch, args)
    lr_scheduler.step()
    print("epoch", epoch, [(f"{l:.4f}", a1, a5) for l, a1, a5 in stats], f"lr {lr_scheduler.get_last_lr()[0]:.6f}",
          f"val {evaluate(model, criterion, val_loader, 'cpu'):.4f}")
print("bn stats", f"{model.features[0][1].running_mean.abs().sum().item():.4f}",
      model.features[0][1].num_batches_tracked.item())

# SGD nesterov with clipping
args.clip_grad_norm = 1.0
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, nesterov=True, weight_decay=1e-4)
lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
stats = train_one_epoch(model, criterion, optimizer, loader, "cpu", 0, args)
lr_scheduler.step()
print("sgd nesterov", [f"{l:.4f}" for l, _, _ in stats], lr_scheduler.get_last_lr())


# the training step under torch.compile against the same step run eagerly, on a
# MobileNetV3 built from the first three blocks of the small configuration (C1 with its
# Hardsigmoid squeeze-excitation, C2 and its residual block; Hardswish in the stem, last
# conv and classifier): the whole network's backward
# takes tracec ~20 s to compile from a cold cache
cmodel = numpy_weights(MobileNetV3(settings[:3], last_channel, num_classes=10, dropout=0.0), 2)
coptimizer = torch.optim.SGD(cmodel.parameters(), lr=0.02, momentum=0.9, nesterov=True, weight_decay=1e-4)


def train_step(image, target):
    output = cmodel(image)
    loss = criterion(output, target)
    coptimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(cmodel.parameters(), 1.0)
    coptimizer.step()
    return loss


cmodel.train()
state, opt_state = copy.deepcopy(cmodel.state_dict()), copy.deepcopy(coptimizer.state_dict())
eager = [train_step(images[i * 8:(i + 1) * 8], labels[i * 8:(i + 1) * 8]).item() for i in range(3)]
after = copy.deepcopy(cmodel.state_dict())
cmodel.load_state_dict(state)
coptimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(images[i * 8:(i + 1) * 8], labels[i * 8:(i + 1) * 8]).item() for i in range(3)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(cmodel.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
