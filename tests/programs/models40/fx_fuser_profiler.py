# PyTorch tutorials "(beta) Building a Convolution/Batch Norm fuser in FX"
# and "(beta) Building a Simple CPU Performance Profiler with FX"
# (intermediate/fx_conv_bn_fuser, intermediate/fx_profiling_tutorial),
# written the way the tutorials have them: the WrappedBatchNorm / nested
# Sequential model M in eval mode, the tutorial's own fuse_conv_bn_eval and
# fuse_conv_bn_weights (rsqrt of running_var + eps, the reshaped scale, new
# nn.Parameters) beside torch.nn.utils.fusion.fuse_conv_bn_eval,
# _parent_name's rsplit, replace_node_module's setattr on
# the parent from dict(fx_model.named_modules()), fuse() iterating
# fx_model.graph.nodes with node.op == 'call_module', type(...) is
# nn.BatchNorm2d / nn.Conv2d checks, len(node.args[0].users) > 1,
# node.replace_all_uses_with(node.args[0]), fx_model.graph.erase_node(node),
# graph.lint() and recompile(), copy.deepcopy(model), and the fused model
# checked against the unfused one with the tutorial's (deprecated)
# torch.testing.assert_allclose; then the
# ProfilingInterpreter (a torch.fx.Interpreter subclass overriding run and
# run_node, a per-node list of runtimes keyed by the Node, a summary table)
# over a symbolic_trace'd ResNet, with print(traced.graph).  Changes for a
# CPU test: a small ResNet-like model (torchvision's BasicBlock layout, one
# block per stage, 8 / 16 channels) in place of resnet18 for both the fuser
# benchmark and the profiler, tabulate replaced by plain formatting, and the
# summary printing each node's call count and share of calls instead of
# times; the fused model's forward compiled with torch.compile and checked
# against the eager fused model.
import copy
import statistics
import time
from typing import Any, Dict, List, Tuple

import torch
import torch.fx as fx
import torch.nn as nn
from torch import Tensor
from torch.fx import Interpreter

torch.manual_seed(0)


# Creates a model with nested modules
class WrappedBatchNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = nn.BatchNorm2d(1)

    def forward(self, x):
        return self.mod(x)


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 1, 1)
        self.bn1 = nn.BatchNorm2d(1)
        self.conv2 = nn.Conv2d(1, 1, 1)
        self.nested = nn.Sequential(
            nn.BatchNorm2d(1),
            nn.Conv2d(1, 1, 1),
        )
        self.wrapped = WrappedBatchNorm()

    def forward(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.conv2(x)
        x = self.nested(x)
        x = self.wrapped(x)
        return x


model = M()

model.eval()


def fuse_conv_bn_eval(conv, bn):
    """
    Given a conv Module `A` and an batch_norm module `B`, returns a conv
    module `C` such that C(x) == B(A(x)) in inference mode.
    """
    assert (not (conv.training or bn.training)), "Fusion only for eval!"
    fused_conv = copy.deepcopy(conv)

    fused_conv.weight, fused_conv.bias = \
        fuse_conv_bn_weights(fused_conv.weight, fused_conv.bias,
                             bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)

    return fused_conv


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    if conv_b is None:
        conv_b = torch.zeros_like(bn_rm)
    bn_var_rsqrt = torch.rsqrt(bn_rv + bn_eps)

    conv_w = conv_w * (bn_w * bn_var_rsqrt).reshape([-1] + [1] * (len(conv_w.shape) - 1))
    conv_b = (conv_b - bn_rm) * bn_var_rsqrt * bn_w + bn_b

    return torch.nn.Parameter(conv_w), torch.nn.Parameter(conv_b)


def _parent_name(target: str) -> Tuple[str, str]:
    """
    Splits a qualname into parent path and last atom.
    For example, `foo.bar.baz` -> (`foo.bar`, `baz`)
    """
    *parent, name = target.rsplit('.', 1)
    return parent[0] if parent else '', name


def replace_node_module(node: fx.Node, modules: Dict[str, Any], new_module: torch.nn.Module):
    assert (isinstance(node.target, str))
    parent_name, name = _parent_name(node.target)
    setattr(modules[parent_name], name, new_module)


def fuse(model: torch.nn.Module) -> torch.nn.Module:
    model = copy.deepcopy(model)
    # The first step of most FX passes is to symbolically trace our model to
    # obtain a `GraphModule`. This is a representation of our original model
    # that is functionally identical to our original model, except that we now
    # also have a graph representation of our forward pass.
    fx_model: fx.GraphModule = fx.symbolic_trace(model)
    modules = dict(fx_model.named_modules())

    # The primary representation for working with FX are the `Graph` and the
    # `Node`. Each `GraphModule` has a `Graph` associated with it - this
    # `Graph` is also what generates `GraphModule.code`.
    # The `Graph` itself is represented as a list of `Node` objects. Thus, to
    # iterate through all of the operations in our graph, we iterate over each
    # `Node` in our `Graph`.
    for node in fx_model.graph.nodes:
        # The FX IR contains several types of nodes, which generally represent
        # call sites to modules, functions, or methods. The type of node is
        # determined by `Node.op`.
        if node.op != 'call_module':  # If our current node isn't calling a Module then we can ignore it.
            continue
        # For call sites, `Node.target` represents the module/function/method
        # that's being called. Here, we check `Node.target` to see if it's a
        # batch norm module, and then check `Node.args[0].target` to see if the
        # input `Node` is a convolution.
        if type(modules[node.target]) is nn.BatchNorm2d and type(modules[node.args[0].target]) is nn.Conv2d:
            if len(node.args[0].users) > 1:  # Output of conv is used by other nodes
                continue
            conv = modules[node.args[0].target]
            bn = modules[node.target]
            fused_conv = fuse_conv_bn_eval(conv, bn)
            replace_node_module(node.args[0], modules, fused_conv)
            # As we've folded the batch nor into the conv, we need to replace all uses
            # of the batch norm with the conv.
            node.replace_all_uses_with(node.args[0])
            # Now that all uses of the batch norm have been replaced, we can
            # safely remove the batch norm.
            fx_model.graph.erase_node(node)
    fx_model.graph.lint()
    # After we've modified our graph, we need to recompile our graph in order
    # to keep the generated code in sync.
    fx_model.recompile()
    return fx_model


# make the BatchNorms' running statistics and affine parameters non-trivial
for m in model.modules():
    if isinstance(m, nn.BatchNorm2d):
        m.running_mean.uniform_(-1, 1)
        m.running_var.uniform_(0.5, 2)
        nn.init.uniform_(m.weight, 0.5, 1.5)
        nn.init.uniform_(m.bias, -0.5, 0.5)

fused_model = fuse(model)
print(fused_model.code)
inp = torch.randn(5, 1, 1, 1)
torch.testing.assert_allclose(fused_model(inp), model(inp))
print('fused == unfused', torch.allclose(fused_model(inp), model(inp), atol=1e-6))
print('fused modules', [name for name, _ in fused_model.named_children()])
print('original untouched', [type(m).__name__ for m in model.nested])
# PyTorch ships the same fusion: torch.nn.utils.fusion.fuse_conv_bn_eval
lib_fused = torch.nn.utils.fusion.fuse_conv_bn_eval(model.conv1, model.bn1)
own_fused = fuse_conv_bn_eval(model.conv1, model.bn1)
print('library fusion', type(lib_fused).__name__, lib_fused.weight.requires_grad,
      torch.allclose(lib_fused.weight, own_fused.weight), torch.allclose(lib_fused.bias, own_fused.bias),
      lib_fused.weight.flatten().tolist(), lib_fused.bias.tolist())


# ---- Benchmarking our Fusion on a ResNet-like model ----
def conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """3x3 convolution with padding"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """1x1 convolution"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion: int = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample=None) -> None:
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        identity = x

        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)

        out = self.conv2(out)
        out = self.bn2(out)

        if self.downsample is not None:
            identity = self.downsample(x)

        out += identity
        out = self.relu(out)

        return out


class ResNet(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.inplanes = 8
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(8, 1)
        self.layer2 = self._make_layer(16, 1, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16 * BasicBlock.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * BasicBlock.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * BasicBlock.expansion, stride),
                nn.BatchNorm2d(planes * BasicBlock.expansion),
            )
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * BasicBlock.expansion
        for _ in range(1, blocks):
            layers.append(BasicBlock(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.maxpool(x)

        x = self.layer1(x)
        x = self.layer2(x)

        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.fc(x)

        return x


rn18 = ResNet()
# a few training-mode forwards give the BatchNorms running statistics
with torch.no_grad():
    for _ in range(3):
        rn18(torch.randn(4, 3, 32, 32))
rn18.eval()
inp = torch.randn(2, 3, 32, 32)
fused_rn18 = fuse(rn18)
print('resnet fused == unfused', torch.allclose(fused_rn18(inp), rn18(inp), atol=1e-5))
print('call_module targets', [n.target for n in fused_rn18.graph.nodes if n.op == 'call_module'])
print('BatchNorm2d left', sum(isinstance(m, nn.BatchNorm2d) for m in fused_rn18.modules()))
print(fused_rn18.code)

# ---- Building a Simple CPU Performance Profiler with FX ----
traced_rn18 = torch.fx.symbolic_trace(rn18)
print(traced_rn18.graph)


class ProfilingInterpreter(Interpreter):
    def __init__(self, mod: torch.nn.Module):
        # Rather than have the user symbolically trace their model,
        # we're going to do it in the constructor. As a result, the
        # user can pass in any ``Module`` without having to worry about
        # symbolic tracing APIs
        gm = torch.fx.symbolic_trace(mod)
        super().__init__(gm)

        # We are going to store away two things here:
        #
        # 1. A list of total runtimes for ``mod``. In other words, we are
        #    storing away the time ``mod(...)`` took each time this
        #    interpreter is called.
        self.total_runtime_sec: List[float] = []
        # 2. A map from ``Node`` to a list of times (in seconds) that
        #    node took to run. This can be seen as similar to (1) but
        #    for specific sub-parts of the model.
        self.runtimes_sec: Dict[torch.fx.Node, List[float]] = {}

    ######################################################################
    # Next, let's override our first method: ``run()``. ``Interpreter``'s ``run``
    # method is the top-level entry point for execution of the model. We will
    # want to intercept this so that we can record the total runtime of the
    # model.

    def run(self, *args) -> Any:
        # Record the time we started running the model
        t_start = time.time()
        # Run the model by delegating back into Interpreter.run()
        return_val = super().run(*args)
        # Record the time we finished running the model
        t_end = time.time()
        # Store the total elapsed time this model execution took in the
        # ``ProfilingInterpreter``
        self.total_runtime_sec.append(t_end - t_start)
        return return_val

    ######################################################################
    # Now, let's override ``run_node``. ``Interpreter`` calls ``run_node`` each
    # time it executes a single node. We will intercept this so that we
    # can measure and record the time taken for each individual call in
    # the model.

    def run_node(self, n: torch.fx.Node) -> Any:
        # Record the time we started running the op
        t_start = time.time()
        # Run the op by delegating back into Interpreter.run_node()
        return_val = super().run_node(n)
        # Record the time we finished running the op
        t_end = time.time()
        # If we don't have an entry for this node in our runtimes_sec
        # data structure, add one with an empty list value.
        self.runtimes_sec.setdefault(n, [])
        # Record the total elapsed time for this single invocation
        # in the runtimes_sec data structure
        self.runtimes_sec[n].append(t_end - t_start)
        return return_val

    ######################################################################
    # Finally, we are going to define a method (one which doesn't override
    # any ``Interpreter`` method) that provides us a nice, organized view of
    # the data we have collected.

    def summary(self, should_sort: bool = False) -> str:
        # Build up a list of summary information for each node
        node_summaries: List[List[Any]] = []
        # Calculate the mean runtime for the whole network. Because the
        # network may have been called multiple times during profiling,
        # we need to summarize the runtimes. We choose to use the
        # arithmetic mean for this.
        mean_total_runtime = statistics.mean(self.total_runtime_sec)

        # For each node, record summary statistics
        for node, runtimes in self.runtimes_sec.items():
            # Similarly, compute the mean runtime for ``node``
            mean_runtime = statistics.mean(runtimes)
            # For easier understanding, we also compute the percentage
            # time each node took with respect to the whole network.
            pct_total = mean_runtime / mean_total_runtime * 100
            # Record the node's type, name of the node, mean runtime, and
            # percent runtime. (Printed here: the node's call count and its
            # share of all node calls, which do not depend on the machine.)
            node_summaries.append(
                [node.op, str(node), len(runtimes), len(runtimes) / sum(map(len, self.runtimes_sec.values())) * 100])

        # One of the most important questions to answer when doing performance
        # profiling is "Which op(s) took the longest?". We can make this easy
        # to see by providing sorting functionality in our summary view
        if should_sort:
            node_summaries.sort(key=lambda s: s[2], reverse=True)

        # Use the ``tabulate`` library to create a well-formatted table
        # presenting our summary information
        headers: List[str] = [
            'Op type', 'Op', 'Calls', 'Pct total calls'
        ]
        rows = [headers] + [[str(c) if not isinstance(c, float) else f'{c:.2f}' for c in s]
                            for s in node_summaries]
        return '\n'.join('  '.join(f'{c:<20}' for c in r) for r in rows)


interp = ProfilingInterpreter(rn18)
for _ in range(2):
    out = interp.run(inp)
print(interp.summary(True))
print('interpreter == module', torch.allclose(out, rn18(inp), atol=1e-6), len(interp.total_runtime_sec))
print('interpreted nodes', len(interp.runtimes_sec), [n.name for n in list(interp.runtimes_sec)[:4]])

# compiled: the fused ResNet's forward, checked against the eager fused model
with torch.no_grad():
    out_c = torch.compile(fused_rn18)(inp)
    out_e = fused_rn18(inp)
print('compiled == eager', torch.allclose(out_c, out_e, atol=1e-5))
