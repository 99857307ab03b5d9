# PyG's "Graph Classification with Graph Neural Networks" (Colab 3 of the
# pytorch_geometric documentation) and the layers of its examples
# (examples/gin.py, examples/proteins_topk_pool.py, a custom MessagePassing
# EdgeConv as in "Creating Message Passing Networks"), on random graphs
# instead of TUDataset's MUTAG (a download): mini-batching with PyG's
# DataLoader (shuffle=True), GINConv / GraphConv / ChebConv /
# TransformerConv / GATv2Conv, BatchNorm, GraphNorm, TopKPooling and the
# global readouts; and the torch_geometric.utils functions those examples
# call.  Changed for a CPU test: tiny graphs, 2 epochs, SGD with momentum
# (the tutorial's Adam turns the rounding noise of gradients that are zero in
# exact arithmetic -- a bias before BatchNorm -- into full steps, in torch
# as in any other implementation).
import torch
import torch.nn.functional as F
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader
from torch_geometric.nn import (BatchNorm, ChebConv, GATv2Conv, GINConv, GraphConv, GraphNorm,
                                MessagePassing, TopKPooling, TransformerConv, global_add_pool,
                                global_max_pool, global_mean_pool)
from torch_geometric.utils import (add_self_loops, degree, dropout_edge, k_hop_subgraph, scatter,
                                   softmax, subgraph, to_dense_adj, to_dense_batch, to_undirected)

torch.manual_seed(0)


def rand_graph(n, e, f):
    ei = torch.randint(0, n, (2, e))
    return Data(x=torch.randn(n, f), edge_index=to_undirected(ei), y=torch.randint(0, 3, (1,)))


graphs = [rand_graph(int(torch.randint(4, 9, ()).item()), 10, 5) for _ in range(12)]
loader = DataLoader(graphs, batch_size=4, shuffle=True)


class EdgeConv(MessagePassing):
    def __init__(self, in_channels, out_channels):
        super().__init__(aggr='max')  # "Max" aggregation.
        self.mlp = torch.nn.Sequential(torch.nn.Linear(2 * in_channels, out_channels), torch.nn.ReLU())

    def forward(self, x, edge_index):
        edge_index, _ = add_self_loops(edge_index, num_nodes=x.size(0))
        return self.propagate(edge_index, x=x)

    def message(self, x_i, x_j):
        tmp = torch.cat([x_i, x_j - x_i], dim=1)  # tmp has shape [E, 2 * in_channels]
        return self.mlp(tmp)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = GINConv(torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.ReLU(),
                                              torch.nn.Linear(16, 16)), train_eps=True)
        self.bn = BatchNorm(16)
        self.c2 = GraphConv(16, 16, aggr='mean')
        self.c3 = ChebConv(16, 16, K=2)
        self.c4 = TransformerConv(16, 8, heads=2)
        self.c5 = GATv2Conv(16, 16)
        self.e = EdgeConv(16, 16)
        self.gn = GraphNorm(16)
        self.pool = TopKPooling(16, ratio=0.5)
        self.out = torch.nn.Linear(48, 3)

    def forward(self, x, ei, b):
        x = self.bn(self.c1(x, ei)).relu()
        x = self.c2(x, ei).relu()
        x = self.c3(x, ei).relu()
        x = self.c4(x, ei).relu()
        x = self.c5(x, ei).relu()
        x = self.gn(self.e(x, ei), b)
        x, ei, _, b, _, _ = self.pool(x, ei, None, b)
        return self.out(torch.cat([global_add_pool(x, b), global_max_pool(x, b),
                                   global_mean_pool(x, b)], 1))


model = Net()
print(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(2):
    model.train()
    for data in loader:
        optimizer.zero_grad()
        out = model(data.x, data.edge_index, data.batch)
        loss = F.cross_entropy(out, data.y)
        loss.backward()
        optimizer.step()
        print(f'Epoch: {epoch:03d}, graphs {data.num_graphs}, nodes {data.num_nodes}, Loss: {loss.item():.4f}')
    model.eval()
    correct = 0
    for data in DataLoader(graphs, batch_size=6):
        pred = model(data.x, data.edge_index, data.batch).argmax(dim=1)
        correct += int((pred == data.y).sum())
    print(f'Epoch: {epoch:03d}, Train Acc: {correct / len(graphs):.4f}')

b = Batch.from_data_list(graphs[:3])
print(b, b.ptr, to_dense_adj(b.edge_index, b.batch).shape, to_dense_batch(b.x, b.batch)[1].sum(1))
print(b.get_example(1), b[2].num_nodes, b.to_data_list()[0])
print(degree(b.edge_index[0], b.num_nodes)[:8], softmax(torch.arange(6.), torch.tensor([0, 0, 1, 1, 1, 2])))
idx = torch.tensor([0, 0, 1, 1, 1, 2])
print(scatter(torch.arange(6.), idx, reduce='mean'), scatter(torch.arange(6.), idx, reduce='max'),
      scatter(torch.arange(6.), idx, dim=0, dim_size=4, reduce='sum'))
print(dropout_edge(b.edge_index, p=0.5)[0].shape, subgraph(torch.tensor([0, 1, 2]), b.edge_index)[0].shape,
      k_hop_subgraph(0, 2, b.edge_index)[0])
print(sum(p.numel() for p in model.parameters()), model.c4, model.pool)
