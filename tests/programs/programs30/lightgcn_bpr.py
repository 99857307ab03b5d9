# LightGCN (He et al. 2020) with the BPR loss, in the shape of the authors'
# PyTorch code (gusye1234/LightGCN-PyTorch, code/model.py LightGCN and
# code/dataloader.py getSparseGraph, code/procedure.py BPR_train_original):
# the user-item interaction matrix R built into the bipartite adjacency
# [[0, R], [R^T, 0]], symmetric normalisation D^-1/2 A D^-1/2 (rowsum,
# power(-0.5), inf set to 0) as a torch.sparse_coo_tensor (coalesce),
# computer()'s layer propagation torch.sparse.mm(g_droped, all_emb)
# stacked and averaged, torch.split into users / items, bpr_loss with
# softplus(neg_scores - pos_scores) and the ego-embedding L2 term
# (1/2 norm(2).pow(2) / batch), nn.init.normal_(std=0.1) embeddings, Adam,
# uniform triple sampling (user, positive, negative) and Recall@K / NDCG@K
# from torch.topk with the training items masked out (-(1 << 10)).
# Written for this test: 30 users, 40 items, planted block preferences
# (numpy), 3 layers, 64-dim -> 16-dim, 20 epochs; one compiled training
# step against eager.
import copy

import numpy as np
import torch
import torch.nn as nn

rng = np.random.RandomState(0)
torch.manual_seed(0)
n_users, m_items, K_GROUPS = 30, 40, 4
group_u = rng.randint(0, K_GROUPS, n_users)
group_i = np.arange(m_items) % K_GROUPS
prob = np.where(group_u[:, None] == group_i[None, :], 0.45, 0.03)
R = (rng.rand(n_users, m_items) < prob).astype(np.float32)
test_mask = (rng.rand(n_users, m_items) < 0.25) & (R > 0)
train_R = R * ~test_mask
test_R = R * test_mask
trainUser, trainItem = np.nonzero(train_R)
print("interactions", int(train_R.sum()), "test", int(test_R.sum()))


def getSparseGraph():
    adj_mat = np.zeros((n_users + m_items, n_users + m_items), dtype=np.float32)
    adj_mat[:n_users, n_users:] = train_R
    adj_mat[n_users:, :n_users] = train_R.T
    rowsum = np.array(adj_mat.sum(axis=1))
    d_inv = np.power(rowsum, -0.5, where=rowsum > 0, out=np.zeros_like(rowsum))
    d_inv[np.isinf(d_inv)] = 0.
    norm_adj = d_inv[:, None] * adj_mat * d_inv[None, :]
    row, col = np.nonzero(norm_adj)
    index = torch.stack([torch.from_numpy(row).long(), torch.from_numpy(col).long()])
    data = torch.from_numpy(norm_adj[row, col])
    return torch.sparse_coo_tensor(index, data, torch.Size(norm_adj.shape)).coalesce()


class LightGCN(nn.Module):
    def __init__(self, latent_dim=16, n_layers=3):
        super(LightGCN, self).__init__()
        self.num_users, self.num_items = n_users, m_items
        self.latent_dim, self.n_layers = latent_dim, n_layers
        self.embedding_user = torch.nn.Embedding(num_embeddings=self.num_users, embedding_dim=self.latent_dim)
        self.embedding_item = torch.nn.Embedding(num_embeddings=self.num_items, embedding_dim=self.latent_dim)
        nn.init.normal_(self.embedding_user.weight, std=0.1)
        nn.init.normal_(self.embedding_item.weight, std=0.1)
        self.f = nn.Sigmoid()
        self.Graph = getSparseGraph()

    def computer(self):
        users_emb = self.embedding_user.weight
        items_emb = self.embedding_item.weight
        all_emb = torch.cat([users_emb, items_emb])
        embs = [all_emb]
        g_droped = self.Graph
        for layer in range(self.n_layers):
            all_emb = torch.sparse.mm(g_droped, all_emb)
            embs.append(all_emb)
        embs = torch.stack(embs, dim=1)
        light_out = torch.mean(embs, dim=1)
        users, items = torch.split(light_out, [self.num_users, self.num_items])
        return users, items

    def getUsersRating(self, users):
        all_users, all_items = self.computer()
        users_emb = all_users[users.long()]
        items_emb = all_items
        rating = self.f(torch.matmul(users_emb, items_emb.t()))
        return rating

    def getEmbedding(self, users, pos_items, neg_items):
        all_users, all_items = self.computer()
        users_emb = all_users[users]
        pos_emb = all_items[pos_items]
        neg_emb = all_items[neg_items]
        users_emb_ego = self.embedding_user(users)
        pos_emb_ego = self.embedding_item(pos_items)
        neg_emb_ego = self.embedding_item(neg_items)
        return users_emb, pos_emb, neg_emb, users_emb_ego, pos_emb_ego, neg_emb_ego

    def bpr_loss(self, users, pos, neg):
        (users_emb, pos_emb, neg_emb, userEmb0, posEmb0, negEmb0) = self.getEmbedding(users.long(), pos.long(), neg.long())
        reg_loss = (1 / 2) * (userEmb0.norm(2).pow(2) + posEmb0.norm(2).pow(2) +
                              negEmb0.norm(2).pow(2)) / float(len(users))
        pos_scores = torch.mul(users_emb, pos_emb)
        pos_scores = torch.sum(pos_scores, dim=1)
        neg_scores = torch.mul(users_emb, neg_emb)
        neg_scores = torch.sum(neg_scores, dim=1)
        loss = torch.mean(torch.nn.functional.softplus(neg_scores - pos_scores))
        return loss, reg_loss


def UniformSample_original():
    idx = rng.randint(0, len(trainUser), len(trainUser))
    users, pos = trainUser[idx], trainItem[idx]
    neg = rng.randint(0, m_items, len(idx))
    for j in range(len(idx)):
        while train_R[users[j], neg[j]] > 0:
            neg[j] = rng.randint(0, m_items)
    return np.stack([users, pos, neg], 1)


Recmodel = LightGCN()
opt = torch.optim.Adam(Recmodel.parameters(), lr=0.01)
weight_decay = 1e-4


def stageOne(users, pos, neg):
    loss, reg_loss = Recmodel.bpr_loss(users, pos, neg)
    reg_loss = reg_loss * weight_decay
    loss = loss + reg_loss
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def Test(topk=5):
    with torch.no_grad():
        rating = Recmodel.getUsersRating(torch.arange(n_users))
        rating[torch.from_numpy(train_R > 0)] = -(1 << 10)
        _, rating_K = torch.topk(rating, k=topk)
    hits = torch.from_numpy(test_R)[torch.arange(n_users)[:, None], rating_K]
    n_test = torch.from_numpy(test_R).sum(1)
    valid = n_test > 0
    recall = (hits.sum(1)[valid] / n_test[valid]).mean()
    discount = 1.0 / torch.log2(torch.arange(2, topk + 2).float())
    dcg = (hits * discount).sum(1)
    idcg = torch.stack([discount[:int(min(n, topk))].sum() for n in n_test.tolist()])
    ndcg = (dcg[valid] / idcg[valid]).mean()
    return recall.item(), ndcg.item()


batch = 64
for epoch in range(20):
    S = torch.from_numpy(UniformSample_original()).long()
    aver_loss = 0.
    n_batch = (len(S) + batch - 1) // batch
    for b in range(n_batch):
        users, pos, neg = S[b * batch:(b + 1) * batch].t()
        aver_loss += stageOne(users, pos, neg).item()
    if epoch % 5 == 4:
        recall, ndcg = Test()
        print(f"EPOCH[{epoch + 1}] loss{aver_loss / n_batch:.4f} recall@5 {recall:.4f} ndcg@5 {ndcg:.4f}")

S = torch.from_numpy(UniformSample_original()).long()[:64]
users, pos, neg = S.t()
state, opt_state = copy.deepcopy(Recmodel.state_dict()), copy.deepcopy(opt.state_dict())
loss_c = torch.compile(stageOne)(users, pos, neg)
after_c = copy.deepcopy(Recmodel.state_dict())
Recmodel.load_state_dict(state)
opt.load_state_dict(opt_state)
loss_e = stageOne(users, pos, neg)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in Recmodel.state_dict().items()))
