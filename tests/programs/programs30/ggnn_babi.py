# Gated Graph Sequence Neural Networks (Li et al. 2016) in the shape of
# chingyaoc/ggnn.pytorch (model.py: AttrProxy giving in_0 / out_0 ...
# Linear layers registered by add_module, Propogator's GRU-style update
# with reset_gate / update_gate / tansform (sic) Linear layers on
# torch.cat((a_in, a_out, state_cur), 2), the adjacency matrix A split into
# in / out halves A[:, :, :n_node * n_edge_types] and bmm'ed with the
# per-edge-type transformed states, GGNN.forward unrolling n_steps
# propagations, the output MLP on torch.cat((prop_state, annotation), 2)
# with Tanh, summed over nodes, and main.py's training: annotation padded
# with zeros to state_dim, CrossEntropyLoss over the node scores, Adam,
# _initialization normal_(0.0, 0.02) with zero biases). Written for this
# test: a bAbI task-19-like synthetic graph question (which node is reached
# from the annotated node by an edge of type 1), 6 nodes, 2 edge types,
# state_dim 8, 4 steps, 20 epochs of 32 graphs (numpy); one compiled
# training step against eager.
import copy

import numpy as np
import torch
import torch.nn as nn

rng = np.random.RandomState(0)
torch.manual_seed(0)


class AttrProxy(object):
    """Translates index lookups into attribute lookups."""

    def __init__(self, module, prefix):
        self.module = module
        self.prefix = prefix

    def __getitem__(self, i):
        return getattr(self.module, self.prefix + str(i))


class Propogator(nn.Module):
    """Gated Propogator for GGNN, using a GRU-like gating mechanism."""

    def __init__(self, state_dim, n_node, n_edge_types):
        super(Propogator, self).__init__()
        self.n_node = n_node
        self.n_edge_types = n_edge_types
        self.reset_gate = nn.Sequential(nn.Linear(state_dim * 3, state_dim), nn.Sigmoid())
        self.update_gate = nn.Sequential(nn.Linear(state_dim * 3, state_dim), nn.Sigmoid())
        self.tansform = nn.Sequential(nn.Linear(state_dim * 3, state_dim), nn.Tanh())

    def forward(self, state_in, state_out, state_cur, A):
        A_in = A[:, :, :self.n_node * self.n_edge_types]
        A_out = A[:, :, self.n_node * self.n_edge_types:]
        a_in = torch.bmm(A_in, state_in)
        a_out = torch.bmm(A_out, state_out)
        a = torch.cat((a_in, a_out, state_cur), 2)
        r = self.reset_gate(a)
        z = self.update_gate(a)
        joined_input = torch.cat((a_in, a_out, r * state_cur), 2)
        h_hat = self.tansform(joined_input)
        output = (1 - z) * state_cur + z * h_hat
        return output


class GGNN(nn.Module):
    def __init__(self, opt):
        super(GGNN, self).__init__()
        assert (opt.state_dim >= opt.annotation_dim), 'state_dim must be no less than annotation_dim'
        self.state_dim = opt.state_dim
        self.annotation_dim = opt.annotation_dim
        self.n_edge_types = opt.n_edge_types
        self.n_node = opt.n_node
        self.n_steps = opt.n_steps
        for i in range(self.n_edge_types):
            in_fc = nn.Linear(self.state_dim, self.state_dim)
            out_fc = nn.Linear(self.state_dim, self.state_dim)
            self.add_module("in_{}".format(i), in_fc)
            self.add_module("out_{}".format(i), out_fc)
        self.in_fcs = AttrProxy(self, "in_")
        self.out_fcs = AttrProxy(self, "out_")
        self.propogator = Propogator(self.state_dim, self.n_node, self.n_edge_types)
        self.out = nn.Sequential(nn.Linear(self.state_dim + self.annotation_dim, self.state_dim),
                                 nn.Tanh(), nn.Linear(self.state_dim, 1))
        self._initialization()

    def _initialization(self):
        for m in self.modules():
            if isinstance(m, nn.Linear):
                m.weight.data.normal_(0.0, 0.02)
                m.bias.data.fill_(0)

    def forward(self, prop_state, annotation, A):
        for i_step in range(self.n_steps):
            in_states = []
            out_states = []
            for i in range(self.n_edge_types):
                in_states.append(self.in_fcs[i](prop_state))
                out_states.append(self.out_fcs[i](prop_state))
            in_states = torch.stack(in_states).transpose(0, 1).contiguous()
            in_states = in_states.view(-1, self.n_node * self.n_edge_types, self.state_dim)
            out_states = torch.stack(out_states).transpose(0, 1).contiguous()
            out_states = out_states.view(-1, self.n_node * self.n_edge_types, self.state_dim)
            prop_state = self.propogator(in_states, out_states, prop_state, A)
        join_state = torch.cat((prop_state, annotation), 2)
        output = self.out(join_state)
        output = output.sum(2)
        return output


class Opt:
    state_dim, annotation_dim, n_edge_types, n_node, n_steps = 8, 1, 2, 6, 4


opt = Opt()


def create_adjacency_matrix(edges, n_nodes, n_edge_types):
    a = np.zeros([n_nodes, n_nodes * n_edge_types * 2])
    for edge in edges:
        src_idx, e_type, tgt_idx = edge
        a[tgt_idx - 1][(e_type - 1) * n_nodes + src_idx - 1] = 1
        a[src_idx - 1][(e_type - 1 + n_edge_types) * n_nodes + tgt_idx - 1] = 1
    return a


def make_dataset(n):
    As, anns, targets = [], [], []
    for _ in range(n):
        perm = rng.permutation(opt.n_node) + 1
        edges = [(int(perm[k]), 1 + (k % 2), int(perm[k + 1])) for k in range(opt.n_node - 1)]
        start = int(rng.randint(0, opt.n_node - 1))
        if start % 2 == 1:
            start -= 1      # (an edge of type 1 leaves it)
        ann = np.zeros([opt.n_node, opt.annotation_dim])
        ann[perm[start] - 1][0] = 1
        As.append(create_adjacency_matrix(edges, opt.n_node, opt.n_edge_types))
        anns.append(ann)
        targets.append(perm[start + 1] - 1)
    return (torch.tensor(np.array(As), dtype=torch.float), torch.tensor(np.array(anns), dtype=torch.float),
            torch.tensor(targets, dtype=torch.long))


train_A, train_ann, train_y = make_dataset(128)
test_A, test_ann, test_y = make_dataset(64)
net = GGNN(opt)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(net.parameters(), lr=0.01)


def train_step(adj_matrix, annotation, target):
    net.zero_grad()
    padding = torch.zeros(len(annotation), opt.n_node, opt.state_dim - opt.annotation_dim).double()
    init_input = torch.cat((annotation, padding.float()), 2)
    output = net(init_input, annotation, adj_matrix)
    loss = criterion(output, target)
    loss.backward()
    optimizer.step()
    return loss, output


def test():
    net.eval()
    correct = 0
    with torch.no_grad():
        padding = torch.zeros(len(test_ann), opt.n_node, opt.state_dim - opt.annotation_dim)
        output = net(torch.cat((test_ann, padding), 2), test_ann, test_A)
        pred = output.data.max(1, keepdim=True)[1]
        correct += pred.eq(test_y.data.view_as(pred)).cpu().sum()
    net.train()
    return correct.item()


for epoch in range(20):
    total = 0.0
    for i in range(0, 128, 32):
        loss, _ = train_step(train_A[i:i + 32], train_ann[i:i + 32], train_y[i:i + 32])
        total += loss.item()
    if epoch % 5 == 4:
        print('[%d/%d] Loss: %.4f' % (epoch, 20, total / 4), 'Test set: Accuracy: {}/{}'.format(test(), len(test_y)))

print("A", tuple(train_A.shape), "edges per graph", int(train_A[0].sum().item()) // 2)
state, opt_state = copy.deepcopy(net.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c, out_c = torch.compile(train_step)(train_A[:32], train_ann[:32], train_y[:32])
after_c = copy.deepcopy(net.state_dict())
net.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e, out_e = train_step(train_A[:32], train_ann[:32], train_y[:32])
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6), torch.allclose(out_c, out_e, atol=1e-5),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in net.state_dict().items()))
