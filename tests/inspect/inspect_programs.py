"""Programs the inspection tests (names, profile, graph view, explain) share;
also a FILE.py for ``tracec dump`` / ``tracec explain`` (its module-level
``step`` and ``chain``)."""
import tracec
import tracec.nn as nn
import tracec.nn.functional as F


def mlp_step(optimizer: str = "sgd", sizes=(32, 16, 10)):
    """``(step, model, opt)``: an MLP training step whose closure names its
    model ``model`` and its optimizer ``opt``."""
    tracec.manual_seed(0)
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    opt = (tracec.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if optimizer == "sgd"
           else tracec.optim.Adam(model.parameters(), lr=1e-3))

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step, model, opt


def batch(n: int = 8, features: int = 32, classes: int = 10):
    g = tracec.Generator().manual_seed(1)
    return (tracec.randn((n, features), generator=g),
            tracec.randint(0, classes, (n,), generator=g))


step, model, opt = mlp_step("sgd")


def chain(x, b):
    """bias + relu + scale: one fused kernel (DESIGN.md "Passes")."""
    return (x + b).relu() * 2.0


def chain_mm(x, w, b):
    """A matmul (its own kernel) then the bias+relu+scale chain (one kernel)."""
    return (x @ w + b).relu() * 2.0
