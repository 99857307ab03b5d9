# PyTorch recipe "PyTorch Profiler" (recipes/recipes/profiler_recipe),
# written the way the recipe has it: `from torch.profiler import profile,
# record_function, ProfilerActivity`, a model profiled under
# profile(activities=[ProfilerActivity.CPU], record_shapes=True) with
# record_function("model_inference"), prof.key_averages().table(sort_by=
# "cpu_time_total", row_limit=10), key_averages(group_by_input_shape=True),
# profile_memory=True with sort_by="self_cpu_memory_usage",
# export_chrome_trace("trace.json"), and a schedule(wait=1, warmup=1,
# active=2) with on_trace_ready=trace_handler and p.step().  The recipe
# profiles torchvision's resnet18 on 5x3x224x224 inputs: here a small CNN on
# 5x3x16x16.  Timings and the operators' names differ between runs and
# implementations, so the program prints what the recipe's reader checks:
# the record_function range, its count, the tables' columns, the trace's
# events, the steps at which the schedule hands over a trace (not the
# memory table's columns: tracec's profiler has no CPU Mem columns).  Then a
# profiled training loop (the recipe's model trained with SGD inside
# record_function ranges) and one compiled training step checked against the
# same step run eagerly.
import copy
import json

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(8, 10))
inputs = torch.randn(5, 3, 16, 16)

with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    with record_function("model_inference"):
        model(inputs)

averages = prof.key_averages()
table = averages.table(sort_by="cpu_time_total", row_limit=10)
print(type(averages).__name__, type(table).__name__)
print(table.splitlines()[1].split())
for evt in averages:
    if evt.key == "model_inference":
        print("model_inference", evt.count, evt.cpu_time_total > 0, evt.cpu_time_total >= evt.self_cpu_time_total)

by_shape = prof.key_averages(group_by_input_shape=True)
print("grouped by input shape", [str(e.input_shapes) for e in by_shape if e.key == "model_inference"])

with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True) as prof:
    model(inputs)
memory_table = prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=10)
print("memory table", type(memory_table).__name__, "model" in memory_table or len(memory_table) > 0)

prof.export_chrome_trace("trace.json")
with open("trace.json") as f:
    trace = json.load(f)
print("trace events", isinstance(trace["traceEvents"], list), len(trace["traceEvents"]) > 0)

steps = []


def trace_handler(p):
    output = p.key_averages().table(sort_by="self_cpu_time_total", row_limit=10)
    steps.append(p.step_num)
    p.export_chrome_trace("trace_" + str(p.step_num) + ".json")
    print("[rng] trace ready", p.step_num, len(output) > 0)


with profile(activities=[ProfilerActivity.CPU],
             schedule=torch.profiler.schedule(wait=1, warmup=1, active=2),
             on_trace_ready=trace_handler) as p:
    for idx in range(8):
        model(inputs)
        p.step()
print("handler steps", steps)

optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
labels = torch.randint(0, 10, (5,))


def train_step(x, y):
    with record_function("forward"):
        loss = loss_fn(model(x), y)
    with record_function("backward"):
        optimizer.zero_grad()
        loss.backward()
    with record_function("optimizer_step"):
        optimizer.step()
    return loss


with profile(activities=[ProfilerActivity.CPU]) as prof:
    for step in range(4):
        print("step", step, "loss", round(train_step(inputs, labels).item(), 6))
counts = {e.key: e.count for e in prof.key_averages() if e.key in ("forward", "backward", "optimizer_step")}
print("ranges", sorted(counts.items()))

state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(inputs, labels)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(inputs, labels)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k].float(), v.float(), atol=1e-6) for k, v in model.state_dict().items()))
