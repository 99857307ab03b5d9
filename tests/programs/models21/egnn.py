# vgsatorras/egnn the way its models/egnn_clean/egnn_clean.py, models/gcl.py
# and qm9/models.py + main_qm9.py write it: E_GCL (edge / node / coord
# models, coord2radial with normalize's detached norm, the coord MLP whose
# last Linear has no bias and xavier_uniform_(gain=0.001), tanh, attention
# by a sigmoid gate, residual), unsorted_segment_sum / unsorted_segment_mean
# through new_full and scatter_add_ along an index expanded to the data's
# width, get_edges / get_edges_batch with LongTensor lists, the EGNN stack
# reached through self._modules["gcl_%d" % i]; gcl.py's E_GCL with its
# coords_range (nn.Parameter(torch.ones(1))*3: a plain tensor attribute, not
# a parameter), coords_weight, clamp of trans and the in-place coord +=;
# qm9's E_GCL_mask (del self.coord_mlp, edge_feat * edge_mask) and its EGNN
# over padded molecules (node_mask, edge_mask, h.view(-1, n_nodes, hidden)
# summed to a graph prediction) trained with the L1 loss on (label - meann)
# / mad, Adam and CosineAnnealingLR. Checks E(n) equivariance: rotating and
# translating the input coordinates rotates and translates the output ones
# and leaves the features unchanged. Changes for a CPU test: small sizes,
# weights and graphs from numpy, a few steps; then one training step under
# torch.compile against the same step eagerly.
import copy

import numpy as np
import torch
from torch import nn


# ---- models/egnn_clean/egnn_clean.py ----
class E_GCL(nn.Module):
    """
    E(n) Equivariant Convolutional Layer
    re
    """

    def __init__(self, input_nf, output_nf, hidden_nf, edges_in_d=0, act_fn=nn.SiLU(), residual=True, attention=False, normalize=False, coords_agg='mean', tanh=False):
        super(E_GCL, self).__init__()
        input_edge = input_nf * 2
        self.residual = residual
        self.attention = attention
        self.normalize = normalize
        self.coords_agg = coords_agg
        self.tanh = tanh
        self.epsilon = 1e-8
        edge_coords_nf = 1

        self.edge_mlp = nn.Sequential(
            nn.Linear(input_edge + edge_coords_nf + edges_in_d, hidden_nf),
            act_fn,
            nn.Linear(hidden_nf, hidden_nf),
            act_fn)

        self.node_mlp = nn.Sequential(
            nn.Linear(hidden_nf + input_nf, hidden_nf),
            act_fn,
            nn.Linear(hidden_nf, output_nf))

        layer = nn.Linear(hidden_nf, 1, bias=False)
        torch.nn.init.xavier_uniform_(layer.weight, gain=0.001)

        coord_mlp = []
        coord_mlp.append(nn.Linear(hidden_nf, hidden_nf))
        coord_mlp.append(act_fn)
        coord_mlp.append(layer)
        if self.tanh:
            coord_mlp.append(nn.Tanh())
        self.coord_mlp = nn.Sequential(*coord_mlp)

        if self.attention:
            self.att_mlp = nn.Sequential(
                nn.Linear(hidden_nf, 1),
                nn.Sigmoid())

    def edge_model(self, source, target, radial, edge_attr):
        if edge_attr is None:  # Unused.
            out = torch.cat([source, target, radial], dim=1)
        else:
            out = torch.cat([source, target, radial, edge_attr], dim=1)
        out = self.edge_mlp(out)
        if self.attention:
            att_val = self.att_mlp(out)
            out = out * att_val
        return out

    def node_model(self, x, edge_index, edge_attr, node_attr):
        row, col = edge_index
        agg = unsorted_segment_sum(edge_attr, row, num_segments=x.size(0))
        if node_attr is not None:
            agg = torch.cat([x, agg, node_attr], dim=1)
        else:
            agg = torch.cat([x, agg], dim=1)
        out = self.node_mlp(agg)
        if self.residual:
            out = x + out
        return out, agg

    def coord_model(self, coord, edge_index, coord_diff, edge_feat):
        row, col = edge_index
        trans = coord_diff * self.coord_mlp(edge_feat)
        if self.coords_agg == 'sum':
            agg = unsorted_segment_sum(trans, row, num_segments=coord.size(0))
        elif self.coords_agg == 'mean':
            agg = unsorted_segment_mean(trans, row, num_segments=coord.size(0))
        else:
            raise Exception('Wrong coords_agg parameter' % self.coords_agg)
        coord = coord + agg
        return coord

    def coord2radial(self, edge_index, coord):
        row, col = edge_index
        coord_diff = coord[row] - coord[col]
        radial = torch.sum(coord_diff**2, 1).unsqueeze(1)

        if self.normalize:
            norm = torch.sqrt(radial).detach() + self.epsilon
            coord_diff = coord_diff / norm

        return radial, coord_diff

    def forward(self, h, edge_index, coord, edge_attr=None, node_attr=None):
        row, col = edge_index
        radial, coord_diff = self.coord2radial(edge_index, coord)

        edge_feat = self.edge_model(h[row], h[col], radial, edge_attr)
        coord = self.coord_model(coord, edge_index, coord_diff, edge_feat)
        h, agg = self.node_model(h, edge_index, edge_feat, node_attr)

        return h, coord, edge_attr


class EGNN(nn.Module):
    def __init__(self, in_node_nf, hidden_nf, out_node_nf, in_edge_nf=0, device='cpu', act_fn=nn.SiLU(), n_layers=4, residual=True, attention=False, normalize=False, tanh=False):
        '''

        :param in_node_nf: Number of features for 'h' at the input
        :param hidden_nf: Number of hidden features
        :param out_node_nf: Number of features for 'h' at the output
        :param in_edge_nf: Number of features for the edge features
        :param device: Device (e.g. 'cpu', 'cuda:0',...)
        :param act_fn: Non-linearity
        :param n_layers: Number of layer for the EGNN
        :param residual: Use residual connections, we recommend not changing this one
        :param attention: Whether using attention or not
        :param normalize: Normalizes the coordinates messages such that:
                    instead of: x^{l+1}_i = x^{l}_i + Σ(x_i - x_j)phi_x(m_ij)
                    we get:     x^{l+1}_i = x^{l}_i + Σ(x_i - x_j)phi_x(m_ij)/||x_i - x_j||
                    We noticed it may help in the stability or generalization in some future works.
                    We didn't use it in our paper.
        :param tanh: Sets a tanh activation function at the output of phi_x(m_ij). I.e. it bounds the output of
                        phi_x(m_ij) which definitely improves in stability but it may decrease in accuracy.
                        We didn't use it in our paper.
        '''

        super(EGNN, self).__init__()
        self.hidden_nf = hidden_nf
        self.device = device
        self.n_layers = n_layers
        self.embedding_in = nn.Linear(in_node_nf, self.hidden_nf)
        self.embedding_out = nn.Linear(self.hidden_nf, out_node_nf)
        for i in range(0, n_layers):
            self.add_module("gcl_%d" % i, E_GCL(self.hidden_nf, self.hidden_nf, self.hidden_nf, edges_in_d=in_edge_nf,
                                                act_fn=act_fn, residual=residual, attention=attention,
                                                normalize=normalize, tanh=tanh))
        self.to(self.device)

    def forward(self, h, x, edges, edge_attr):
        h = self.embedding_in(h)
        for i in range(0, self.n_layers):
            h, x, _ = self._modules["gcl_%d" % i](h, edges, x, edge_attr=edge_attr)
        h = self.embedding_out(h)
        return h, x


def unsorted_segment_sum(data, segment_ids, num_segments):
    result_shape = (num_segments, data.size(1))
    result = data.new_full(result_shape, 0)  # Init empty result tensor.
    segment_ids = segment_ids.unsqueeze(-1).expand(-1, data.size(1))
    result.scatter_add_(0, segment_ids, data)
    return result


def unsorted_segment_mean(data, segment_ids, num_segments):
    result_shape = (num_segments, data.size(1))
    segment_ids = segment_ids.unsqueeze(-1).expand(-1, data.size(1))
    result = data.new_full(result_shape, 0)  # Init empty result tensor.
    count = data.new_full(result_shape, 0)
    result.scatter_add_(0, segment_ids, data)
    count.scatter_add_(0, segment_ids, torch.ones_like(data))
    return result / count.clamp(min=1)


def get_edges(n_nodes):
    rows, cols = [], []
    for i in range(n_nodes):
        for j in range(n_nodes):
            if i != j:
                rows.append(i)
                cols.append(j)

    edges = [rows, cols]
    return edges


def get_edges_batch(n_nodes, batch_size):
    edges = get_edges(n_nodes)
    edge_attr = torch.ones(len(edges[0]) * batch_size, 1)
    edges = [torch.LongTensor(edges[0]), torch.LongTensor(edges[1])]
    if batch_size == 1:
        return edges, edge_attr
    elif batch_size > 1:
        rows, cols = [], []
        for i in range(batch_size):
            rows.append(edges[0] + n_nodes * i)
            cols.append(edges[1] + n_nodes * i)
        edges = [torch.cat(rows), torch.cat(cols)]
    return edges, edge_attr


# ---- models/gcl.py ----
class E_GCL_gcl(nn.Module):
    """Graph Neural Net with global state and fixed number of nodes per graph.
    Args:
          hidden_dim: Number of hidden units.
          num_nodes: Maximum number of nodes (for self-attentive pooling).
          global_agg: Global aggregation function ('attn' or 'sum').
          temp: Softmax temperature.
    """

    def __init__(self, input_nf, output_nf, hidden_nf, edges_in_d=0, nodes_att_dim=0, act_fn=nn.ReLU(), recurrent=True, coords_weight=1.0, attention=False, clamp=False, norm_diff=False, tanh=False):
        super(E_GCL_gcl, self).__init__()
        input_edge = input_nf * 2
        self.coords_weight = coords_weight
        self.recurrent = recurrent
        self.attention = attention
        self.norm_diff = norm_diff
        self.tanh = tanh
        edge_coords_nf = 1


        self.edge_mlp = nn.Sequential(
            nn.Linear(input_edge + edge_coords_nf + edges_in_d, hidden_nf),
            act_fn,
            nn.Linear(hidden_nf, hidden_nf),
            act_fn)

        self.node_mlp = nn.Sequential(
            nn.Linear(hidden_nf + input_nf + nodes_att_dim, hidden_nf),
            act_fn,
            nn.Linear(hidden_nf, output_nf))

        layer = nn.Linear(hidden_nf, 1, bias=False)
        torch.nn.init.xavier_uniform_(layer.weight, gain=0.001)

        self.clamp = clamp
        coord_mlp = []
        coord_mlp.append(nn.Linear(hidden_nf, hidden_nf))
        coord_mlp.append(act_fn)
        coord_mlp.append(layer)
        if self.tanh:
            coord_mlp.append(nn.Tanh())
            self.coords_range = nn.Parameter(torch.ones(1))*3
        self.coord_mlp = nn.Sequential(*coord_mlp)


        if self.attention:
            self.att_mlp = nn.Sequential(
                nn.Linear(hidden_nf, 1),
                nn.Sigmoid())

        #if recurrent:
        #    self.gru = nn.GRUCell(hidden_nf, hidden_nf)


    def edge_model(self, source, target, radial, edge_attr):
        if edge_attr is None:  # Unused.
            out = torch.cat([source, target, radial], dim=1)
        else:
            out = torch.cat([source, target, radial, edge_attr], dim=1)
        out = self.edge_mlp(out)
        if self.attention:
            att_val = self.att_mlp(out)
            out = out * att_val
        return out

    def node_model(self, x, edge_index, edge_attr, node_attr):
        row, col = edge_index
        agg = unsorted_segment_sum(edge_attr, row, num_segments=x.size(0))
        if node_attr is not None:
            agg = torch.cat([x, agg, node_attr], dim=1)
        else:
            agg = torch.cat([x, agg], dim=1)
        out = self.node_mlp(agg)
        if self.recurrent:
            out = x + out
        return out, agg

    def coord_model(self, coord, edge_index, coord_diff, edge_feat):
        row, col = edge_index
        trans = coord_diff * self.coord_mlp(edge_feat)
        trans = torch.clamp(trans, min=-100, max=100) #This is never activated but just in case it case it explosed it may save the train
        agg = unsorted_segment_mean(trans, row, num_segments=coord.size(0))
        coord += agg*self.coords_weight
        return coord


    def coord2radial(self, edge_index, coord):
        row, col = edge_index
        coord_diff = coord[row] - coord[col]
        radial = torch.sum((coord_diff)**2, 1).unsqueeze(1)

        if self.norm_diff:
            norm = torch.sqrt(radial) + 1
            coord_diff = coord_diff/(norm)

        return radial, coord_diff

    def forward(self, h, edge_index, coord, edge_attr=None, node_attr=None):
        row, col = edge_index
        radial, coord_diff = self.coord2radial(edge_index, coord)

        edge_feat = self.edge_model(h[row], h[col], radial, edge_attr)
        coord = self.coord_model(coord, edge_index, coord_diff, edge_feat)
        h, agg = self.node_model(h, edge_index, edge_feat, node_attr)
        # coord = self.node_coord_model(h, coord)
        # x = self.node_model(x, edge_index, x[col], u, batch)  # GCN
        return h, coord, edge_attr


# ---- qm9/models.py ----
class E_GCL_mask(E_GCL_gcl):
    """Graph Neural Net with global state and fixed number of nodes per graph.
    Args:
          hidden_dim: Number of hidden units.
          num_nodes: Maximum number of nodes (for self-attentive pooling).
          global_agg: Global aggregation function ('attn' or 'sum').
          temp: Softmax temperature.
    """

    def __init__(self, input_nf, output_nf, hidden_nf, edges_in_d=0, nodes_attr_dim=0, act_fn=nn.ReLU(), recurrent=True, coords_weight=1.0, attention=False):
        E_GCL_gcl.__init__(self, input_nf, output_nf, hidden_nf, edges_in_d=edges_in_d, nodes_att_dim=nodes_attr_dim, act_fn=act_fn, recurrent=recurrent, coords_weight=coords_weight, attention=attention)

        del self.coord_mlp
        self.act_fn = act_fn

    def coord_model(self, coord, edge_index, coord_diff, edge_feat, edge_mask):
        row, col = edge_index
        trans = coord_diff * self.coord_mlp(edge_feat) * edge_mask
        agg = unsorted_segment_sum(trans, row, num_segments=coord.size(0))
        coord += agg*self.coords_weight
        return coord

    def forward(self, h, edge_index, coord, node_mask, edge_mask, edge_attr=None, node_attr=None, n_nodes=None):
        row, col = edge_index
        radial, coord_diff = self.coord2radial(edge_index, coord)

        edge_feat = self.edge_model(h[row], h[col], radial, edge_attr)

        edge_feat = edge_feat * edge_mask

        # TO DO: edge_feat = edge_feat * edge_mask

        #coord = self.coord_model(coord, edge_index, coord_diff, edge_feat, edge_mask)
        h, agg = self.node_model(h, edge_index, edge_feat, node_attr)

        return h, coord, edge_attr


class EGNN_qm9(nn.Module):
    def __init__(self, in_node_nf, in_edge_nf, hidden_nf, device='cpu', act_fn=nn.SiLU(), n_layers=4, coords_weight=1.0, attention=False, node_attr=1):
        super(EGNN_qm9, self).__init__()
        self.hidden_nf = hidden_nf
        self.device = device
        self.n_layers = n_layers

        ### Encoder
        self.embedding = nn.Linear(in_node_nf, hidden_nf)
        self.node_attr = node_attr
        if node_attr:
            n_node_attr = in_node_nf
        else:
            n_node_attr = 0
        for i in range(0, n_layers):
            self.add_module("gcl_%d" % i, E_GCL_mask(self.hidden_nf, self.hidden_nf, self.hidden_nf, edges_in_d=in_edge_nf, nodes_attr_dim=n_node_attr, act_fn=act_fn, recurrent=True, coords_weight=coords_weight, attention=attention))

        self.node_dec = nn.Sequential(nn.Linear(self.hidden_nf, self.hidden_nf),
                                      act_fn,
                                      nn.Linear(self.hidden_nf, self.hidden_nf))

        self.graph_dec = nn.Sequential(nn.Linear(self.hidden_nf, self.hidden_nf),
                                       act_fn,
                                       nn.Linear(self.hidden_nf, 1))
        self.to(self.device)

    def forward(self, h0, x, edges, edge_attr, node_mask, edge_mask, n_nodes):
        h = self.embedding(h0)
        for i in range(0, self.n_layers):
            if self.node_attr:
                h, _, _ = self._modules["gcl_%d" % i](h, edges, x, node_mask, edge_mask, edge_attr=edge_attr, node_attr=h0, n_nodes=n_nodes)
            else:
                h, _, _ = self._modules["gcl_%d" % i](h, edges, x, node_mask, edge_mask, edge_attr=edge_attr,
                                                      node_attr=None, n_nodes=n_nodes)

        h = self.node_dec(h)
        h = h * node_mask
        h = h.view(-1, n_nodes, self.hidden_nf)
        h = torch.sum(h, dim=1)
        pred = self.graph_dec(h)
        return pred.squeeze(1)


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, r, std=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


r = np.random.default_rng(0)

# the segment ops against index_add_ / a loop
data = torch.from_numpy(r.normal(size=(7, 3)).astype(np.float32))
seg = torch.LongTensor([0, 2, 2, 0, 4, 2, 0])
ss = unsorted_segment_sum(data, seg, 5)
sm = unsorted_segment_mean(data, seg, 5)
print("segment_sum", tuple(ss.shape), fmt(ss[2], 3), torch.allclose(ss, torch.zeros(5, 3).index_add_(0, seg, data)))
print("segment_mean", fmt(sm[0], 3), sm[1].tolist(), sm[3].tolist(), torch.allclose(sm[2], data[seg == 2].mean(0)))
print("new_full", data.new_full((2, 2), 0).dtype, data.new_full((2,), 0).tolist(), seg.new_full((2,), 0).dtype)

# the clean EGNN on the repository's dummy batch
batch_size, n_nodes, n_feat, x_dim = 3, 4, 1, 3
edges, edge_attr = get_edges_batch(n_nodes, batch_size)
print("edges", [e.dtype for e in edges], [tuple(e.shape) for e in edges], edges[0][:8].tolist(), edges[1][12:16].tolist(),
      tuple(edge_attr.shape))
egnn = EGNN(in_node_nf=n_feat, hidden_nf=16, out_node_nf=1, in_edge_nf=1, n_layers=2)
print("coord layer init", tuple(egnn.gcl_0.coord_mlp[2].weight.shape), egnn.gcl_0.coord_mlp[2].bias,
      bool(egnn.gcl_0.coord_mlp[2].weight.abs().max() < 0.001))
load_numpy(egnn, r)
h = torch.ones(batch_size * n_nodes, n_feat)
x = torch.from_numpy(r.normal(size=(batch_size * n_nodes, x_dim)).astype(np.float32))
h_out, x_out = egnn(h, x, edges, edge_attr)
print("egnn", tuple(h_out.shape), tuple(x_out.shape), fmt(h_out, 4), fmt(x_out[5], 3))

# E(n) equivariance of every variant: rotate + translate the coordinates
q, _ = np.linalg.qr(r.normal(size=(3, 3)))
if np.linalg.det(q) < 0:
    q[:, 0] = -q[:, 0]
Q = torch.from_numpy(q.astype(np.float32))
t = torch.from_numpy(r.normal(size=(1, 3)).astype(np.float32))
for kw in (dict(), dict(attention=True), dict(normalize=True, tanh=True), dict(attention=True, residual=False)):
    m = EGNN(in_node_nf=2, hidden_nf=8, out_node_nf=2, in_edge_nf=1, n_layers=2, **kw)
    load_numpy(m, r)
    hh = torch.from_numpy(r.normal(size=(batch_size * n_nodes, 2)).astype(np.float32))
    h1, x1 = m(hh, x, edges, edge_attr)
    h2, x2 = m(hh, x @ Q.T + t, edges, edge_attr)
    print("equivariant", sorted(kw), torch.allclose(h1, h2, atol=1e-4), torch.allclose(x1 @ Q.T + t, x2, atol=1e-4),
          fmt(x1[0], 3), fmt(h1[0], 2))

# train the clean EGNN to move the nodes towards the graph centroid
gen = np.random.default_rng(1)
model = EGNN(in_node_nf=n_feat, hidden_nf=16, out_node_nf=1, in_edge_nf=1, n_layers=2, attention=True, tanh=True)
load_numpy(model, r, std=0.2)
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=1e-12)
loss_mse = nn.MSELoss()
for step in range(6):
    xs = torch.from_numpy(gen.normal(size=(batch_size, n_nodes, 3)).astype(np.float32))
    target = xs.mean(1, keepdim=True).expand_as(xs).reshape(-1, 3)
    optimizer.zero_grad()
    _, x_pred = model(h, xs.view(batch_size * n_nodes, -1), edges, edge_attr)
    loss = loss_mse(x_pred, target)
    loss.backward()
    optimizer.step()
    if step % 2 == 1:
        print(f"step {step} loss {loss.item():.5f}")
print("grad", fmt(model.gcl_1.coord_mlp[2].weight.grad, 4), fmt(model.gcl_0.att_mlp[0].weight.grad, 3))

# gcl.py's layer: coords_range is no parameter, coord += edits the input
g = E_GCL_gcl(4, 4, 8, edges_in_d=1, tanh=True, attention=True, norm_diff=True, coords_weight=0.5)
load_numpy(g, r)
print("coords_range", type(g.coords_range).__name__, isinstance(g.coords_range, nn.Parameter), g.coords_range.tolist(),
      g.coords_range.requires_grad, g.coords_range.is_leaf, 'coords_range' in dict(g.named_parameters()),
      len(list(g.parameters())))
e1, _ = get_edges_batch(3, 1)
hx = torch.from_numpy(r.normal(size=(3, 4)).astype(np.float32))
cx = torch.from_numpy(r.normal(size=(3, 3)).astype(np.float32))
cx0 = cx.clone()
hg, cg, _ = g(hx, e1, cx, edge_attr=torch.ones(6, 1))
print("gcl", fmt(hg[1], 4), fmt(cg[2], 3), "in place", cg is cx, torch.equal(cx, cx0) is False)

# qm9: padded molecules with node / edge masks
n_mol, max_nodes, n_atom_types = 4, 5, 3
n_real = [5, 3, 4, 2]
node_mask = torch.zeros(n_mol, max_nodes)
for i, n in enumerate(n_real):
    node_mask[i, :n] = 1
edge_mask = node_mask.unsqueeze(1) * node_mask.unsqueeze(2)
diag_mask = ~torch.eye(edge_mask.size(1), dtype=torch.bool).unsqueeze(0)
edge_mask *= diag_mask
one_hot = torch.from_numpy(np.eye(n_atom_types, dtype=np.float32)[gen.integers(0, n_atom_types, (n_mol, max_nodes))])
one_hot = one_hot * node_mask.unsqueeze(-1)
charges = torch.from_numpy(gen.integers(1, 9, (n_mol, max_nodes)).astype(np.float32)) * node_mask
atom_positions = torch.from_numpy(gen.normal(size=(n_mol, max_nodes, 3)).astype(np.float32))
label = torch.from_numpy(gen.normal(size=(n_mol,)).astype(np.float32)) * 2 + 1
meann, mad = torch.mean(label), torch.mean(torch.abs(label - torch.mean(label)))
print("mask", int(edge_mask.sum()), edge_mask.dtype, diag_mask.dtype, f"meann {meann.item():.4f} mad {mad.item():.4f}")

charge_power, charge_scale = 2, 9.0


def preprocess_input(one_hot, charges, charge_power, charge_scale, device):
    charge_tensor = (charges.unsqueeze(-1) / charge_scale).pow(
        torch.arange(charge_power + 1., device=device, dtype=torch.float32))
    charge_tensor = charge_tensor.view(charges.shape + (1, charge_power + 1))
    atom_scalars = (one_hot.unsqueeze(-1) * charge_tensor).view(charges.shape[:2] + (-1,))
    return atom_scalars


qm9 = EGNN_qm9(in_node_nf=n_atom_types * (charge_power + 1), in_edge_nf=0, hidden_nf=16, n_layers=2,
               coords_weight=1.0, attention=True, node_attr=0)
load_numpy(qm9, r, std=0.2)
print("qm9 has coord_mlp", hasattr(qm9.gcl_0, "coord_mlp"), len(list(qm9.parameters())))
optimizer = torch.optim.Adam(qm9.parameters(), lr=1e-3, weight_decay=1e-16)
lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, 4)
loss_l1 = nn.L1Loss()


# ---- qm9/utils.py ----
edges_dic = {}


def get_adj_matrix(n_nodes, batch_size, device):
    if n_nodes in edges_dic:
        edges_dic_b = edges_dic[n_nodes]
        if batch_size in edges_dic_b:
            return edges_dic_b[batch_size]
        else:
            # get edges for a single sample
            rows, cols = [], []
            for batch_idx in range(batch_size):
                for i in range(n_nodes):
                    for j in range(n_nodes):
                        rows.append(i + batch_idx*n_nodes)
                        cols.append(j + batch_idx*n_nodes)

    else:
        edges_dic[n_nodes] = {}
        return get_adj_matrix(n_nodes, batch_size, device)


    edges = [torch.LongTensor(rows).to(device), torch.LongTensor(cols).to(device)]
    return edges


edges_q = get_adj_matrix(max_nodes, n_mol, 'cpu')


def qm9_step(partition='train'):
    batch_size, n_nodes, _ = atom_positions.size()
    atom_positions_ = atom_positions.view(batch_size * n_nodes, -1)
    atom_mask = node_mask.view(batch_size * n_nodes, -1)
    edge_mask_ = edge_mask.view(batch_size * n_nodes * n_nodes, -1)
    nodes = preprocess_input(one_hot, charges, charge_power, charge_scale, 'cpu')
    nodes = nodes.view(batch_size * n_nodes, -1)
    pred = qm9(h0=nodes, x=atom_positions_, edges=edges_q, edge_attr=None, node_mask=atom_mask,
               edge_mask=edge_mask_, n_nodes=n_nodes)
    if partition == 'train':
        loss = loss_l1(pred, (label - meann) / mad)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    else:
        loss = loss_l1(mad * pred + meann, label)
    return loss, pred


for epoch in range(4):
    loss, pred = qm9_step()
    lr_scheduler.step()
print(f"qm9 loss {loss.item():.5f} lr {optimizer.param_groups[0]['lr']:.6f}", fmt(pred, 4))
with torch.no_grad():
    test_loss, pred = qm9_step('test')
print(f"qm9 test MAE {test_loss.item():.5f}")
# the padding nodes do not change the prediction
one_hot[1, 3:] = 5.0
with torch.no_grad():
    _, pred2 = qm9_step('test')
print("padding ignored", torch.allclose(pred, pred2, atol=1e-5))

# one training step under torch.compile against the same step eagerly
xs = torch.from_numpy(gen.normal(size=(batch_size, n_nodes, 3)).astype(np.float32)).view(-1, 3)
target = xs.view(batch_size, n_nodes, 3).mean(1, keepdim=True).expand(batch_size, n_nodes, 3).reshape(-1, 3)
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)


def train_step(xs, target):
    optimizer.zero_grad()
    _, x_pred = model(h, xs, edges, edge_attr)
    loss = loss_mse(x_pred, target)
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(xs, target).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(xs, target).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
