"""The model-inspection and optimizer packages notebooks import beside
torch, as their READMEs use them: torchinfo's summary (every column, an
LSTM), torchsummary's table, thop's MACs / parameter count, and
torch-optimizer's optimizers (RAdam, Lamb, AdaBound, Yogi, DiffGrad,
Ranger, QHAdam, AdaBelief, SWATS, NovoGrad, Lookahead) three steps each."""
import torch, torch.nn as nn
from torchinfo import summary
from torchsummary import summary as ts_summary
from thop import profile, clever_format
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(8 * 8 * 8, 10))
print(summary(model, input_size=(2, 3, 16, 16), col_names=("input_size", "output_size", "num_params", "kernel_size", "mult_adds"), verbose=0))
ts_summary(model, (3, 16, 16), device="cpu")
macs, params = profile(model, inputs=(torch.randn(1, 3, 16, 16),), verbose=False)
print(clever_format([macs, params], "%.3f"))
lstm = nn.LSTM(4, 8, batch_first=True)
print(summary(lstm, input_size=(2, 5, 4), verbose=0))
import torch_optimizer as optim
for name in ("RAdam", "Lamb", "AdaBound", "Yogi", "DiffGrad", "Ranger", "QHAdam", "AdaBelief", "SWATS", "NovoGrad", "Lookahead"):
    torch.manual_seed(0)
    m = nn.Linear(4, 2)
    if name == "Lookahead":
        opt = optim.Lookahead(torch.optim.SGD(m.parameters(), lr=0.1), k=2, alpha=0.5)
    else:
        opt = getattr(optim, name)(m.parameters(), lr=0.01)
    for _ in range(3):
        opt.zero_grad(); m(torch.ones(3, 4)).pow(2).sum().backward(); opt.step()
    print(name, [round(v, 6) for v in m.weight.flatten().tolist()[:4]])
