# PyG's "Introduction: Hands-on Graph Neural Networks" (Colab 1 of the
# pytorch_geometric documentation): the Zachary karate club data set that
# ships with PyG (no download), a 3-layer GCNConv network with a 2-d
# embedding, Adam on the four labelled nodes.  Changed for a CPU test: 20
# epochs instead of 401, and one training step under torch.compile checked
# against eager on a copy of the model.  Also the other layers and utilities
# the PyG tutorials use: GATConv, SAGEConv, global pooling, Data's
# properties.
import copy

import torch
from torch.nn import Linear
from torch_geometric.datasets import KarateClub
from torch_geometric.nn import GATConv, GCNConv, SAGEConv, global_mean_pool
from torch_geometric.utils import to_networkx  # noqa: F401  (the tutorial imports it)

dataset = KarateClub()
print(f'Dataset: {dataset}:')
print('======================')
print(f'Number of graphs: {len(dataset)}')
print(f'Number of features: {dataset.num_features}')
print(f'Number of classes: {dataset.num_classes}')

data = dataset[0]  # Get the first graph object.
print(data)
print('==============================================================')
print(f'Number of nodes: {data.num_nodes}')
print(f'Number of edges: {data.num_edges}')
print(f'Average node degree: {data.num_edges / data.num_nodes:.2f}')
print(f'Number of training nodes: {data.train_mask.sum()}')
print(f'Training node label rate: {int(data.train_mask.sum()) / data.num_nodes:.2f}')
print(f'Has isolated nodes: {data.has_isolated_nodes()}')
print(f'Has self-loops: {data.has_self_loops()}')
print(f'Is undirected: {data.is_undirected()}')
edge_index = data.edge_index
print(edge_index.t()[:6])


class GCN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1234)
        self.conv1 = GCNConv(dataset.num_features, 4)
        self.conv2 = GCNConv(4, 4)
        self.conv3 = GCNConv(4, 2)
        self.classifier = Linear(2, dataset.num_classes)

    def forward(self, x, edge_index):
        h = self.conv1(x, edge_index)
        h = h.tanh()
        h = self.conv2(h, edge_index)
        h = h.tanh()
        h = self.conv3(h, edge_index)
        h = h.tanh()  # Final GNN embedding space.

        # Apply a final (linear) classifier.
        out = self.classifier(h)

        return out, h


model = GCN()
print(model)

_, h = model(data.x, data.edge_index)
print(f'Embedding shape: {list(h.shape)}')

criterion = torch.nn.CrossEntropyLoss()  # Define loss criterion.
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)  # Define optimizer.


def train(data):
    optimizer.zero_grad()  # Clear gradients.
    out, h = model(data.x, data.edge_index)  # Perform a single forward pass.
    loss = criterion(out[data.train_mask], data.y[data.train_mask])  # Compute the loss solely based on the training nodes.
    loss.backward()  # Derive gradients.
    optimizer.step()  # Update parameters based on gradients.
    return loss, h


for epoch in range(20):
    loss, h = train(data)
    if epoch % 4 == 0:
        print(f'Epoch: {epoch:03d}, Loss: {loss.item():.4f}')
print('embedding', h[:4])

# One plain SGD step of a copy of the model, compiled against eager.
eager_model = copy.deepcopy(model)
comp_model = copy.deepcopy(model)


def make_step(m):
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def step(x, edge_index, y, mask):
        opt.zero_grad()
        out, _ = m(x, edge_index)
        loss = criterion(out[mask], y[mask])
        loss.backward()
        opt.step()
        return loss
    return step


eager_step = make_step(eager_model)
comp_step = torch.compile(make_step(comp_model))
mask_idx = data.train_mask.nonzero().squeeze(1)
for i in range(3):
    le = eager_step(data.x, data.edge_index, data.y, mask_idx)
    lc = comp_step(data.x, data.edge_index, data.y, mask_idx)
    print('step', i, round(le.item(), 5), 'compiled == eager', torch.allclose(le, lc, atol=1e-5))
print('params compiled == eager', all(torch.allclose(a, b, atol=1e-5) for a, b in
                                      zip(eager_model.parameters(), comp_model.parameters())))

torch.manual_seed(0)
gat = GATConv(dataset.num_features, 8, heads=2, dropout=0.0)
sage = SAGEConv(dataset.num_features, 8, aggr='max')
print(gat, sage)
print('gat', round(gat(data.x, data.edge_index).sum().item(), 3), gat(data.x, data.edge_index).shape)
print('sage', round(sage(data.x, data.edge_index).sum().item(), 3))
out, att = gat(data.x, data.edge_index, return_attention_weights=True)
print('attention', att[0].shape, att[1].shape, round(att[1].sum().item(), 3))
print('pooled', global_mean_pool(h, torch.zeros(data.num_nodes, dtype=torch.long)))
