# facebookresearch/dlrm: dlrm_s_pytorch.py as published, on one CPU (DLRM_Net with
# create_mlp's numpy-initialized nn.Linear layers assigned through .data into an
# nn.Sequential with ReLU / Sigmoid, create_emb's nn.EmbeddingBag(mode="sum",
# sparse=True) tables from numpy, weighted_pooling "learned" with its
# ParameterList and per_sample_weights gathered from it, apply_emb with offsets,
# interact_features "dot" (bmm, the li / lj index lists, Z[:, li, lj]) and "cat",
# sequential_forward with loss_threshold clamping, the BCE / MSE / weighted-BCE
# losses of loss_fn_wrap, LRPolicyScheduler (warmup and polynomial decay) on
# _LRScheduler, the SGD training loop with its accuracy count) and
# dlrm_data_pytorch.py's generate_random_input_batch / generate_random_output_batch
# with a seeded numpy RandomState.  Changes for a CPU test: tiny tables and MLPs,
# a few iterations.  Then the training step (sparse gradients, SGD momentum) under
# torch.compile against the same step run eagerly.
import copy
import sys

import numpy as np
import torch
import torch.nn as nn
from torch.nn.parameter import Parameter
from torch.optim.lr_scheduler import _LRScheduler


# ---- dlrm_data_pytorch.py ----
def generate_random_input_batch(m_den, ln_emb, n, num_indices_per_lookup, num_indices_per_lookup_fixed):
    # dense feature
    Xt = torch.tensor(ra.rand(n, m_den).astype(np.float32))

    # sparse feature (sparse indices)
    lS_emb_offsets = []
    lS_emb_indices = []
    # for each embedding generate a list of n lookups,
    # where each lookup is composed of multiple sparse indices
    for size in ln_emb:
        lS_batch_offsets = []
        lS_batch_indices = []
        offset = 0
        for _ in range(n):
            # num of sparse indices to be used per embedding (between
            if num_indices_per_lookup_fixed:
                sparse_group_size = np.int64(num_indices_per_lookup)
            else:
                # random between [1,num_indices_per_lookup])
                r = ra.random(1)
                sparse_group_size = np.int64(
                    np.round(max([1.0], r * min(size, num_indices_per_lookup)))
                )
            # sparse indices to be used per embedding
            r = ra.random(sparse_group_size)
            sparse_group = np.unique(np.round(r * (size - 1)).astype(np.int64))
            # reset sparse_group_size in case some index duplicates were removed
            sparse_group_size = np.int64(sparse_group.size)
            # store lengths and indices
            lS_batch_offsets += [offset]
            lS_batch_indices += sparse_group.tolist()
            # update offset for next iteration
            offset += sparse_group_size
        lS_emb_offsets.append(torch.tensor(lS_batch_offsets))
        lS_emb_indices.append(torch.tensor(lS_batch_indices))

    return (Xt, lS_emb_offsets, lS_emb_indices)


def generate_random_output_batch(n, num_targets, round_targets=False):
    # target (probability of a click)
    if round_targets:
        P = np.round(ra.rand(n, num_targets).astype(np.float32)).astype(np.float32)
    else:
        P = ra.rand(n, num_targets).astype(np.float32)

    return torch.tensor(P)


# ---- dlrm_s_pytorch.py ----
class LRPolicyScheduler(_LRScheduler):
    def __init__(self, optimizer, num_warmup_steps, decay_start_step, num_decay_steps):
        self.num_warmup_steps = num_warmup_steps
        self.decay_start_step = decay_start_step
        self.decay_end_step = decay_start_step + num_decay_steps
        self.num_decay_steps = num_decay_steps

        if self.decay_start_step < self.num_warmup_steps:
            sys.exit("Learning rate warmup must finish before the decay starts")

        super(LRPolicyScheduler, self).__init__(optimizer)

    def get_lr(self):
        step_count = self._step_count
        if step_count < self.num_warmup_steps:
            # warmup
            scale = 1.0 - (self.num_warmup_steps - step_count) / self.num_warmup_steps
            lr = [base_lr * scale for base_lr in self.base_lrs]
            self.last_lr = lr
        elif self.decay_start_step <= step_count and step_count < self.decay_end_step:
            # decay
            decayed_steps = step_count - self.decay_start_step
            scale = ((self.num_decay_steps - decayed_steps) / self.num_decay_steps) ** 2
            min_lr = 0.0000001
            lr = [max(min_lr, base_lr * scale) for base_lr in self.base_lrs]
            self.last_lr = lr
        else:
            if self.num_decay_steps > 0:
                # freeze at last, either because we're after decay
                # or because we're between warmup and decay
                lr = self.last_lr
            else:
                # do not adjust
                lr = self.base_lrs
        return lr


class DLRM_Net(nn.Module):
    def create_mlp(self, ln, sigmoid_layer):
        # build MLP layer by layer
        layers = nn.ModuleList()
        for i in range(0, ln.size - 1):
            n = ln[i]
            m = ln[i + 1]

            # construct fully connected operator
            LL = nn.Linear(int(n), int(m), bias=True)

            # initialize the weights
            # with torch.no_grad():
            # custom Xavier input, output or two-sided fill
            mean = 0.0  # std_dev = np.sqrt(variance)
            std_dev = np.sqrt(2 / (m + n))  # np.sqrt(1 / m) # np.sqrt(1 / n)
            W = np.random.normal(mean, std_dev, size=(m, n)).astype(np.float32)
            std_dev = np.sqrt(1 / m)  # np.sqrt(2 / (m + 1))
            bt = np.random.normal(mean, std_dev, size=m).astype(np.float32)
            # approach 1
            LL.weight.data = torch.tensor(W, requires_grad=True)
            LL.bias.data = torch.tensor(bt, requires_grad=True)
            # approach 2
            # LL.weight.data.copy_(torch.tensor(W))
            # LL.bias.data.copy_(torch.tensor(bt))
            # approach 3
            # LL.weight = Parameter(torch.tensor(W),requires_grad=True)
            # LL.bias = Parameter(torch.tensor(bt),requires_grad=True)
            layers.append(LL)

            # construct sigmoid or relu operator
            if i == sigmoid_layer:
                layers.append(nn.Sigmoid())
            else:
                layers.append(nn.ReLU())

        # approach 1: use ModuleList
        # return layers
        # approach 2: use Sequential container to wrap all layers
        return torch.nn.Sequential(*layers)

    def create_emb(self, m, ln, weighted_pooling=None):
        emb_l = nn.ModuleList()
        v_W_l = []
        for i in range(0, ln.size):
            n = ln[i]

            # construct embedding operator
            EE = nn.EmbeddingBag(n, m, mode="sum", sparse=self.sparse)
            # initialize embeddings
            # nn.init.uniform_(EE.weight, a=-np.sqrt(1 / n), b=np.sqrt(1 / n))
            W = np.random.uniform(
                low=-np.sqrt(1 / n), high=np.sqrt(1 / n), size=(n, m)
            ).astype(np.float32)
            # approach 1
            EE.weight.data = torch.tensor(W, requires_grad=True)
            # approach 2
            # EE.weight.data.copy_(torch.tensor(W))
            # approach 3
            # EE.weight = Parameter(torch.tensor(W),requires_grad=True)
            if weighted_pooling is None:
                v_W_l.append(None)
            else:
                v_W_l.append(torch.ones(n, dtype=torch.float32))
            emb_l.append(EE)
        return emb_l, v_W_l

    def __init__(
        self,
        m_spa=None,
        ln_emb=None,
        ln_bot=None,
        ln_top=None,
        arch_interaction_op=None,
        arch_interaction_itself=False,
        sigmoid_bot=-1,
        sigmoid_top=-1,
        loss_threshold=0.0,
        ndevices=-1,
        weighted_pooling=None,
        loss_function="bce",
        loss_weights="1.0-1.0",
        sparse=True,
    ):
        super(DLRM_Net, self).__init__()

        if (
            (m_spa is not None)
            and (ln_emb is not None)
            and (ln_bot is not None)
            and (ln_top is not None)
            and (arch_interaction_op is not None)
        ):
            # save arguments
            self.ndevices = ndevices
            self.output_d = 0
            self.parallel_model_batch_size = -1
            self.parallel_model_is_not_prepared = True
            self.arch_interaction_op = arch_interaction_op
            self.arch_interaction_itself = arch_interaction_itself
            self.loss_threshold = loss_threshold
            self.loss_function = loss_function
            self.sparse = sparse
            if weighted_pooling is not None and weighted_pooling != "fixed":
                self.weighted_pooling = "learned"
            else:
                self.weighted_pooling = weighted_pooling
            # create operators
            self.emb_l, w_list = self.create_emb(m_spa, ln_emb, weighted_pooling)
            if self.weighted_pooling == "learned":
                self.v_W_l = nn.ParameterList()
                for w in w_list:
                    self.v_W_l.append(Parameter(w))
            else:
                self.v_W_l = w_list
            self.bot_l = self.create_mlp(ln_bot, sigmoid_bot)
            self.top_l = self.create_mlp(ln_top, sigmoid_top)

            # specify the loss function
            if self.loss_function == "mse":
                self.loss_fn = torch.nn.MSELoss(reduction="mean")
            elif self.loss_function == "bce":
                self.loss_fn = torch.nn.BCELoss(reduction="mean")
            elif self.loss_function == "wbce":
                self.loss_ws = torch.tensor(
                    np.fromstring(loss_weights, dtype=float, sep="-")
                )
                self.loss_fn = torch.nn.BCELoss(reduction="none")
            else:
                sys.exit(
                    "ERROR: --loss-function=" + self.loss_function + " is not supported"
                )

    def apply_mlp(self, x, layers):
        # approach 1: use ModuleList
        # for layer in layers:
        #     x = layer(x)
        # return x
        # approach 2: use Sequential container to wrap all layers
        return layers(x)

    def apply_emb(self, lS_o, lS_i, emb_l, v_W_l):
        # WARNING: notice that we are processing the batch at once. We implicitly
        # assume that the data is laid out such that:
        # 1. each embedding is indexed with a group of sparse indices,
        #   corresponding to a single lookup
        # 2. for each embedding the lookups are further organized into a batch
        # 3. for a list of embedding tables there is a list of batched lookups

        ly = []
        for k, sparse_index_group_batch in enumerate(lS_i):
            sparse_offset_group_batch = lS_o[k]

            # embedding lookup
            # We are using EmbeddingBag, which implicitly uses sum operator.
            # The embeddings are represented as tall matrices, with sum
            # happening vertically across 0 axis, resulting in a row vector
            # E = emb_l[k]

            if v_W_l[k] is not None:
                per_sample_weights = v_W_l[k].gather(0, sparse_index_group_batch)
            else:
                per_sample_weights = None

            E = emb_l[k]
            V = E(
                sparse_index_group_batch,
                sparse_offset_group_batch,
                per_sample_weights=per_sample_weights,
            )

            ly.append(V)

        # print(ly)
        return ly

    def interact_features(self, x, ly):
        if self.arch_interaction_op == "dot":
            # concatenate dense and sparse features
            (batch_size, d) = x.shape
            T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
            # perform a dot product
            Z = torch.bmm(T, torch.transpose(T, 1, 2))
            # append dense feature with the interactions (into a row vector)
            # approach 1: all
            # Zflat = Z.view((batch_size, -1))
            # approach 2: unique
            _, ni, nj = Z.shape
            # approach 1: tril_indices
            # offset = 0 if self.arch_interaction_itself else -1
            # li, lj = torch.tril_indices(ni, nj, offset=offset)
            # approach 2: custom
            offset = 1 if self.arch_interaction_itself else 0
            li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
            lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
            Zflat = Z[:, li, lj]
            # concatenate dense features and interactions
            R = torch.cat([x] + [Zflat], dim=1)
        elif self.arch_interaction_op == "cat":
            # concatenation features (into a row vector)
            R = torch.cat([x] + ly, dim=1)
        else:
            sys.exit(
                "ERROR: --arch-interaction-op="
                + self.arch_interaction_op
                + " is not supported"
            )

        return R

    def forward(self, dense_x, lS_o, lS_i):
        return self.sequential_forward(dense_x, lS_o, lS_i)

    def sequential_forward(self, dense_x, lS_o, lS_i):
        # process dense features (using bottom mlp), resulting in a row vector
        x = self.apply_mlp(dense_x, self.bot_l)
        # debug prints
        # print("intermediate")
        # print(x.detach().cpu().numpy())

        # process sparse features(using embeddings), resulting in a list of row vectors
        ly = self.apply_emb(lS_o, lS_i, self.emb_l, self.v_W_l)
        # for y in ly:
        #     print(y.detach().cpu().numpy())

        # interact features (dense and sparse)
        z = self.interact_features(x, ly)
        # print(z.detach().cpu().numpy())

        # obtain probability of a click (using top mlp)
        p = self.apply_mlp(z, self.top_l)

        # clamp output if needed
        if 0.0 < self.loss_threshold and self.loss_threshold < 1.0:
            z = torch.clamp(p, min=self.loss_threshold, max=(1.0 - self.loss_threshold))
        else:
            z = p

        return z


def dlrm_wrap(dlrm, X, lS_o, lS_i):
    return dlrm(X, lS_o, lS_i)


def loss_fn_wrap(dlrm, Z, T):
    if dlrm.loss_function == "mse" or dlrm.loss_function == "bce":
        return dlrm.loss_fn(Z, T)
    elif dlrm.loss_function == "wbce":
        loss_ws_ = dlrm.loss_ws[T.data.view(-1).long()].view_as(T)
        loss_fn_ = dlrm.loss_fn(Z, T)
        loss_sc_ = loss_ws_ * loss_fn_
        return loss_sc_.mean()


# ---- the test: run_and_time's training loop, at a tiny size ----
np.random.seed(123)
ra = np.random.RandomState(3)
m_spa = 4
ln_emb = np.array([10, 7, 13])
m_den = 5
ln_bot = np.array([m_den, 8, m_spa])
num_fea = ln_emb.size + 1
num_int = (num_fea * (num_fea - 1)) // 2 + ln_bot[-1]
ln_top = np.array([num_int, 8, 4, 1])
print("ln_top", ln_top.tolist(), "num_int", int(num_int))

dlrm = DLRM_Net(m_spa, ln_emb, ln_bot, ln_top, arch_interaction_op="dot",
                arch_interaction_itself=False, sigmoid_bot=-1, sigmoid_top=ln_top.size - 2,
                loss_threshold=0.0, loss_function="bce")
print(dlrm.bot_l)
print("params", [(n, tuple(p.shape)) for n, p in dlrm.named_parameters()][:4],
      sum(p.numel() for p in dlrm.parameters()))
print("emb", dlrm.emb_l[0], dlrm.emb_l[0].sparse, dlrm.emb_l[0].mode)

batches = []
for j in range(6):
    X, lS_o, lS_i = generate_random_input_batch(m_den, ln_emb, 4, 3, False)
    T = generate_random_output_batch(4, 1, round_targets=True)
    batches.append((X, lS_o, lS_i, T))
X, lS_o, lS_i, T = batches[0]
print("batch", tuple(X.shape), [o.tolist() for o in lS_o], [i.tolist() for i in lS_i], T.flatten().tolist())

with torch.no_grad():
    x = dlrm.apply_mlp(X, dlrm.bot_l)
    ly = dlrm.apply_emb(lS_o, lS_i, dlrm.emb_l, dlrm.v_W_l)
    R = dlrm.interact_features(x, ly)
    print("interact dot", tuple(R.shape), f"{R.sum().item():.5f}", [f"{v:.5f}" for v in R[0, -6:].tolist()])
    dlrm.arch_interaction_itself = True
    print("interact dot itself", tuple(dlrm.interact_features(x, ly).shape))
    dlrm.arch_interaction_itself = False
    print("emb rows", [f"{v.sum().item():.5f}" for v in ly])

optimizer = torch.optim.SGD(dlrm.parameters(), lr=0.1)
lr_scheduler = LRPolicyScheduler(optimizer, 2, 3, 3)
print("lr after init", optimizer.param_groups[0]["lr"], lr_scheduler.get_last_lr())

total_loss, total_accu, total_samp = 0.0, 0, 0
for j, (X, lS_o, lS_i, T) in enumerate(batches):
    Z = dlrm_wrap(dlrm, X, lS_o, lS_i)
    E = loss_fn_wrap(dlrm, Z, T)
    L = E.detach().cpu().numpy()  # numpy array
    S = Z.detach().cpu().numpy()  # numpy array
    Tn = T.detach().cpu().numpy()  # numpy array
    mbs = Tn.shape[0]  # = args.mini_batch_size except maybe for last
    A = np.sum((np.round(S, 0) == Tn).astype(np.uint8))
    optimizer.zero_grad()
    E.backward()
    if j == 0:
        g = dlrm.emb_l[1].weight.grad
        print("emb grad", g.is_sparse, g.layout, tuple(g.shape), f"{g.to_dense().abs().sum().item():.6f}",
              "top grad", f"{dlrm.top_l[0].weight.grad.norm().item():.6f}")
    optimizer.step()
    lr_scheduler.step()
    total_loss += L * mbs
    total_accu += A
    total_samp += mbs
    print("iter", j, f"loss {L:.6f}", "acc", int(A), "lr", f"{optimizer.param_groups[0]['lr']:.6f}")
print("train loss", f"{total_loss / total_samp:.6f}", "accuracy", f"{total_accu / total_samp:.4f}")
print("emb table", f"{dlrm.emb_l[2].weight.sum().item():.6f}")

# weighted pooling "learned", the cat interaction, loss_threshold, mse / wbce losses
np.random.seed(7)
dlrm_w = DLRM_Net(m_spa, ln_emb, ln_bot, np.array([m_spa * num_fea, 6, 1]), arch_interaction_op="cat",
                  sigmoid_top=1, loss_threshold=1e-3, weighted_pooling="learned", loss_function="wbce",
                  loss_weights="1.0-3.0")
print("weighted", [tuple(p.shape) for p in dlrm_w.v_W_l], dlrm_w.loss_ws.tolist())
opt_w = torch.optim.SGD(dlrm_w.parameters(), lr=0.5)
for j, (X, lS_o, lS_i, T) in enumerate(batches[:3]):
    Z = dlrm_w(X, lS_o, lS_i)
    E = loss_fn_wrap(dlrm_w, Z, T)
    opt_w.zero_grad()
    E.backward()
    opt_w.step()
    print("weighted iter", j, f"{E.item():.6f}", f"{Z.min().item():.6f}",
          f"{dlrm_w.v_W_l[0].grad.norm().item():.6f}")
print("pooling weights", [f"{v:.5f}" for v in dlrm_w.v_W_l[0].tolist()[:5]])
dlrm_w.loss_function = "mse"
dlrm_w.loss_fn = torch.nn.MSELoss(reduction="mean")
print("mse", f"{loss_fn_wrap(dlrm_w, dlrm_w(*batches[3][:3]), batches[3][3]).item():.6f}")

# the training step (sparse embedding gradients, SGD with momentum) under torch.compile
# against the same step run eagerly
np.random.seed(11)
dlrm_d = DLRM_Net(m_spa, ln_emb, ln_bot, ln_top, arch_interaction_op="dot",
                  sigmoid_top=ln_top.size - 2, loss_function="bce")
opt_d = torch.optim.SGD(dlrm_d.parameters(), lr=0.1, momentum=0.9)


def train_step(X, lS_o, lS_i, T):
    Z = dlrm_wrap(dlrm_d, X, lS_o, lS_i)
    E = loss_fn_wrap(dlrm_d, Z, T)
    opt_d.zero_grad()
    E.backward()
    opt_d.step()
    return E, Z


# fixed-size lookups so the compiled step sees one set of shapes
fixed = []
for j in range(3):
    X, lS_o, lS_i = generate_random_input_batch(m_den, ln_emb, 4, 2, True)
    fixed.append((X, lS_o, lS_i, generate_random_output_batch(4, 1, round_targets=True)))
print("fixed lookups", [tuple(i.shape) for i in fixed[0][2]])
state, opt_state = copy.deepcopy(dlrm_d.state_dict()), copy.deepcopy(opt_d.state_dict())
eager = [train_step(*b)[0].item() for b in fixed]
after = copy.deepcopy(dlrm_d.state_dict())
dlrm_d.load_state_dict(state)
opt_d.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(*b)[0].item() for b in fixed]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(dlrm_d.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
