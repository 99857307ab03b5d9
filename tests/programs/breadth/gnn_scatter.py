# A message-passing GNN written in plain PyTorch, as in the "GNNs from scratch"
# write-ups (GCN normalization with degree via scatter_add_, GAT-style edge
# softmax with scatter_reduce amax, index_add_ aggregation, global mean pool
# per graph), trained on random graphs; the step also compiled.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

def add_self_loops(edge_index, num_nodes):
    loop = torch.arange(num_nodes, dtype=edge_index.dtype).unsqueeze(0).repeat(2, 1)
    return torch.cat([edge_index, loop], dim=1)

def degree(index, num_nodes, dtype=torch.float):
    out = torch.zeros((num_nodes,), dtype=dtype)
    return out.scatter_add_(0, index, torch.ones(index.size(0), dtype=dtype))

class GCNConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.empty(out_channels))
        self.reset_parameters()

    def reset_parameters(self):
        self.lin.reset_parameters()
        self.bias.data.zero_()

    def forward(self, x, edge_index):
        edge_index = add_self_loops(edge_index, num_nodes=x.size(0))
        x = self.lin(x)
        row, col = edge_index
        deg = degree(col, x.size(0), dtype=x.dtype)
        deg_inv_sqrt = deg.pow(-0.5)
        deg_inv_sqrt[deg_inv_sqrt == float('inf')] = 0
        norm = deg_inv_sqrt[row] * deg_inv_sqrt[col]
        msg = norm.view(-1, 1) * x[row]
        out = torch.zeros_like(x).index_add_(0, col, msg)
        out = out + self.bias
        return out

class GATConv(nn.Module):
    def __init__(self, in_channels, out_channels, heads=2):
        super().__init__()
        self.heads, self.out_channels = heads, out_channels
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        nn.init.xavier_uniform_(self.att_src)
        nn.init.xavier_uniform_(self.att_dst)

    def forward(self, x, edge_index):
        N = x.size(0)
        edge_index = add_self_loops(edge_index, N)
        src, dst = edge_index
        h = self.lin(x).view(N, self.heads, self.out_channels)
        a_src = (h * self.att_src).sum(-1)
        a_dst = (h * self.att_dst).sum(-1)
        e = F.leaky_relu(a_src[src] + a_dst[dst], 0.2)
        e_max = torch.full((N, self.heads), float('-inf')).scatter_reduce(
            0, dst.unsqueeze(-1).expand_as(e), e, reduce='amax', include_self=True)
        e = (e - e_max[dst]).exp()
        denom = torch.zeros(N, self.heads).scatter_add(0, dst.unsqueeze(-1).expand_as(e), e)
        alpha = e / (denom[dst] + 1e-16)
        out = torch.zeros(N, self.heads, self.out_channels)
        out.index_add_(0, dst, alpha.unsqueeze(-1) * h[src])
        return out.mean(dim=1)

def global_mean_pool(x, batch, size):
    out = torch.zeros(size, x.size(1)).index_add(0, batch, x)
    count = torch.bincount(batch, minlength=size).clamp(min=1).to(x.dtype)
    return out / count.unsqueeze(-1)

class Net(nn.Module):
    def __init__(self, num_features, hidden, num_classes):
        super().__init__()
        self.conv1 = GCNConv(num_features, hidden)
        self.conv2 = GATConv(hidden, hidden)
        self.lin = nn.Linear(hidden, num_classes)

    def forward(self, x, edge_index, batch, num_graphs):
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, p=0.5, training=self.training)
        x = F.elu(self.conv2(x, edge_index))
        x = global_mean_pool(x, batch, num_graphs)
        return F.log_softmax(self.lin(x), dim=-1)

def random_graphs(num_graphs, nodes_per_graph, num_features):
    xs, edges, batch = [], [], []
    for g in range(num_graphs):
        n = nodes_per_graph
        x = torch.randn(n, num_features)
        src = torch.randint(0, n, (3 * n,))
        dst = torch.randint(0, n, (3 * n,))
        edges.append(torch.stack([src, dst]) + g * n)
        xs.append(x)
        batch.append(torch.full((n,), g, dtype=torch.long))
    y = torch.randint(0, 2, (num_graphs,))
    return torch.cat(xs), torch.cat(edges, dim=1), torch.cat(batch), y

x, edge_index, batch, y = random_graphs(8, 6, 5)
model = Net(5, 16, 2)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

def train_step(x, edge_index, batch, y):
    model.train()
    optimizer.zero_grad()
    out = model(x, edge_index, batch, 8)
    loss = F.nll_loss(out, y)
    loss.backward()
    optimizer.step()
    return loss

for epoch in range(1, 6):
    loss = train_step(x, edge_index, batch, y)
    print(f'Epoch: {epoch:03d}, Loss: {loss:.4f}')

model.eval()
with torch.no_grad():
    eager_out = model(x, edge_index, batch, 8)
    compiled_forward = torch.compile(model)
    compiled_out = compiled_forward(x, edge_index, batch, 8)
    print('compiled forward matches:', torch.allclose(eager_out, compiled_out, atol=1e-5))
    pred = eager_out.argmax(dim=1)
    acc = int((pred == y).sum()) / y.size(0)
    print(f'Accuracy: {acc:.4f}')

step = torch.compile(train_step)
for epoch in range(6, 9):
    loss = step(x, edge_index, batch, y)
    print(f'Epoch: {epoch:03d}, Loss: {loss:.4f}')
