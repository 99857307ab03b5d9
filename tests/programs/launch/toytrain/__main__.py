"""``python -m toytrain --steps N --lr LR``: argparse, relative imports."""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

from . import __version__
from .data import make_data
from .model import TinyNet


def main(argv=None):
    parser = argparse.ArgumentParser(prog="toytrain", description="train a tiny net")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--hidden", type=int, default=8)
    args = parser.parse_args(argv)
    print(f"toytrain {__version__} | __name__={__name__} | package={__package__} | "
          f"spec={__spec__.name}")
    print(f"argv0={os.path.relpath(sys.argv[0])} | args={sys.argv[1:]} | "
          f"path0 is cwd: {os.path.abspath(sys.path[0]) == os.getcwd()}")
    torch.manual_seed(0)
    x, y = make_data(64, 6, seed=1)
    model = TinyNet(6, args.hidden, 1)
    with torch.no_grad():      # deterministic weights, from numpy
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (i + 1) / 3)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    for step in range(args.steps):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.6f}")
    print("final", [f"{v:.5f}" for v in model.net[2].weight.flatten().tolist()])
    if loss.item() > 100:
        sys.exit(3)


if __name__ == "__main__":
    main()
