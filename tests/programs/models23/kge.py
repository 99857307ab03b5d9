# Knowledge-graph embeddings the way mklimasz/TransE-PyTorch (model.py,
# metric.py, main.py) and DeepGraphLearning/KnowledgeGraphEmbedding
# (codes/model.py: KGEModel with TransE / RotatE, train_step, test_step)
# write them: nn.Embedding entities / relations with padding_idx and
# .weight.data.uniform_ init, the relations' and (every forward) the
# entities' in-place p-norm renormalization through .data[:-1, :].div_,
# negatives by corrupting heads or tails with torch.randint + torch.where,
# MarginRankingLoss(reduction='none') with a target of -1, SGD; hits@k via
# topk(largest=False) and MRR via argsort + nonzero; KGEModel's
# nn.Parameter(torch.Tensor([gamma]), requires_grad=False), nn.init.uniform_
# on a Parameter, index_select in 'single' / 'head-batch' / 'tail-batch'
# modes, RotatE's chunk / cos / sin / stack(...).norm(dim=0), the
# self-adversarial loss softmax(neg * alpha).detach() * logsigmoid(-neg),
# subsampling weights, the L3 regularization, and test_step's filter_bias,
# argsort(descending=True) and ranks. Changes for a CPU test: a tiny
# random graph from numpy, weights from numpy, the training negatives'
# draws from numpy (torch.randint's own draws are only checked for range),
# a few steps; then one training step under torch.compile against eager.
import copy
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


# ---- mklimasz/TransE-PyTorch: model.py ----

class TransE(nn.Module):

    def __init__(self, entity_count, relation_count, device, norm=1, dim=100, margin=1.0):
        super(TransE, self).__init__()
        self.entity_count = entity_count
        self.relation_count = relation_count
        self.device = device
        self.norm = norm
        self.dim = dim
        self.entities_emb = self._init_enitity_emb()
        self.relations_emb = self._init_relation_emb()
        self.criterion = nn.MarginRankingLoss(margin=margin, reduction='none')

    def _init_enitity_emb(self):
        entities_emb = nn.Embedding(num_embeddings=self.entity_count + 1,
                                    embedding_dim=self.dim,
                                    padding_idx=self.entity_count)
        uniform_range = 6 / np.sqrt(self.dim)
        entities_emb.weight.data.uniform_(-uniform_range, uniform_range)
        return entities_emb

    def _init_relation_emb(self):
        relations_emb = nn.Embedding(num_embeddings=self.relation_count + 1,
                                     embedding_dim=self.dim,
                                     padding_idx=self.relation_count)
        uniform_range = 6 / np.sqrt(self.dim)
        relations_emb.weight.data.uniform_(-uniform_range, uniform_range)
        # -1 to avoid nan for OOV vector
        relations_emb.weight.data[:-1, :].div_(relations_emb.weight.data[:-1, :].norm(p=1, dim=1, keepdim=True))
        return relations_emb

    def forward(self, positive_triplets: torch.LongTensor, negative_triplets: torch.LongTensor):
        """Return model losses based on the input."""
        # -1 to avoid nan for OOV vector
        self.entities_emb.weight.data[:-1, :].div_(self.entities_emb.weight.data[:-1, :].norm(p=2, dim=1, keepdim=True))

        assert positive_triplets.size()[1] == 3
        positive_distances = self._distance(positive_triplets)

        assert negative_triplets.size()[1] == 3
        negative_distances = self._distance(negative_triplets)

        return self.loss(positive_distances, negative_distances), positive_distances, negative_distances

    def predict(self, triplets: torch.LongTensor):
        """Calculated dissimilarity score for given triplets."""
        return self._distance(triplets)

    def loss(self, positive_distances, negative_distances):
        target = torch.tensor([-1], dtype=torch.long, device=self.device)
        return self.criterion(positive_distances, negative_distances, target)

    def _distance(self, triplets):
        """Triplets should have shape Bx3 where dim 3 are head id, relation id, tail id."""
        assert triplets.size()[1] == 3
        heads = triplets[:, 0]
        relations = triplets[:, 1]
        tails = triplets[:, 2]
        return (self.entities_emb(heads) + self.relations_emb(relations) - self.entities_emb(tails)).norm(p=self.norm,
                                                                                                          dim=1)


# ---- metric.py ----

def hit_at_k(predictions: torch.Tensor, ground_truth_idx: torch.Tensor, device: torch.device, k: int = 10) -> int:
    assert predictions.size(0) == ground_truth_idx.size(0)

    zero_tensor = torch.tensor([0], device=device)
    one_tensor = torch.tensor([1], device=device)
    _, indices = predictions.topk(k=k, largest=False)
    return torch.where(indices == ground_truth_idx, one_tensor, zero_tensor).sum().item()


def mrr(predictions: torch.Tensor, ground_truth_idx: torch.Tensor) -> float:
    indices = predictions.argsort()
    return (1.0 / (indices == ground_truth_idx).nonzero()[:, 1].float().add(1.0)).sum().item()


# ---- main.py ----

def test(model, data_generator, entities_count, device):
    examples_count = 0.0
    hits_at_1 = 0.0
    hits_at_3 = 0.0
    hits_at_10 = 0.0
    mrr_sum = 0.0

    entity_ids = torch.arange(end=entities_count, device=device).unsqueeze(0)
    for head, relation, tail in data_generator:
        current_batch_size = head.size()[0]

        head, relation, tail = head.to(device), relation.to(device), tail.to(device)
        all_entities = entity_ids.repeat(current_batch_size, 1)
        heads = head.reshape(-1, 1).repeat(1, all_entities.size()[1])
        relations = relation.reshape(-1, 1).repeat(1, all_entities.size()[1])
        tails = tail.reshape(-1, 1).repeat(1, all_entities.size()[1])

        # Check all possible tails
        triplets = torch.stack((heads, relations, all_entities), dim=2).reshape(-1, 3)
        tails_predictions = model.predict(triplets).reshape(current_batch_size, -1)
        # Check all possible heads
        triplets = torch.stack((all_entities, relations, tails), dim=2).reshape(-1, 3)
        heads_predictions = model.predict(triplets).reshape(current_batch_size, -1)

        # Concat predictions
        predictions = torch.cat((tails_predictions, heads_predictions), dim=0)
        ground_truth_entity_id = torch.cat((tail.reshape(-1, 1), head.reshape(-1, 1)))

        hits_at_1 += hit_at_k(predictions, ground_truth_entity_id, device=device, k=1)
        hits_at_3 += hit_at_k(predictions, ground_truth_entity_id, device=device, k=3)
        hits_at_10 += hit_at_k(predictions, ground_truth_entity_id, device=device, k=10)
        mrr_sum += mrr(predictions, ground_truth_entity_id)

        examples_count += predictions.size()[0]

    hits_at_1_score = hits_at_1 / examples_count * 100
    hits_at_3_score = hits_at_3 / examples_count * 100
    hits_at_10_score = hits_at_10 / examples_count * 100
    mrr_score = mrr_sum / examples_count * 100
    return hits_at_1_score, hits_at_3_score, hits_at_10_score, mrr_score


# ---- DeepGraphLearning/KnowledgeGraphEmbedding: codes/model.py ----

class KGEModel(nn.Module):
    def __init__(self, model_name, nentity, nrelation, hidden_dim, gamma,
                 double_entity_embedding=False, double_relation_embedding=False):
        super(KGEModel, self).__init__()
        self.model_name = model_name
        self.nentity = nentity
        self.nrelation = nrelation
        self.hidden_dim = hidden_dim
        self.epsilon = 2.0

        self.gamma = nn.Parameter(
            torch.Tensor([gamma]),
            requires_grad=False
        )

        self.embedding_range = nn.Parameter(
            torch.Tensor([(self.gamma.item() + self.epsilon) / hidden_dim]),
            requires_grad=False
        )

        self.entity_dim = hidden_dim*2 if double_entity_embedding else hidden_dim
        self.relation_dim = hidden_dim*2 if double_relation_embedding else hidden_dim

        self.entity_embedding = nn.Parameter(torch.zeros(nentity, self.entity_dim))
        nn.init.uniform_(
            tensor=self.entity_embedding,
            a=-self.embedding_range.item(),
            b=self.embedding_range.item()
        )

        self.relation_embedding = nn.Parameter(torch.zeros(nrelation, self.relation_dim))
        nn.init.uniform_(
            tensor=self.relation_embedding,
            a=-self.embedding_range.item(),
            b=self.embedding_range.item()
        )

        if model_name not in ['TransE', 'DistMult', 'ComplEx', 'RotatE', 'pRotatE']:
            raise ValueError('model %s not supported' % model_name)

        if model_name == 'RotatE' and (not double_entity_embedding or double_relation_embedding):
            raise ValueError('RotatE should use --double_entity_embedding')

    def forward(self, sample, mode='single'):
        if mode == 'single':
            batch_size, negative_sample_size = sample.size(0), 1

            head = torch.index_select(
                self.entity_embedding,
                dim=0,
                index=sample[:,0]
            ).unsqueeze(1)

            relation = torch.index_select(
                self.relation_embedding,
                dim=0,
                index=sample[:,1]
            ).unsqueeze(1)

            tail = torch.index_select(
                self.entity_embedding,
                dim=0,
                index=sample[:,2]
            ).unsqueeze(1)

        elif mode == 'head-batch':
            tail_part, head_part = sample
            batch_size, negative_sample_size = head_part.size(0), head_part.size(1)

            head = torch.index_select(
                self.entity_embedding,
                dim=0,
                index=head_part.view(-1)
            ).view(batch_size, negative_sample_size, -1)

            relation = torch.index_select(
                self.relation_embedding,
                dim=0,
                index=tail_part[:, 1]
            ).unsqueeze(1)

            tail = torch.index_select(
                self.entity_embedding,
                dim=0,
                index=tail_part[:, 2]
            ).unsqueeze(1)

        elif mode == 'tail-batch':
            head_part, tail_part = sample
            batch_size, negative_sample_size = tail_part.size(0), tail_part.size(1)

            head = torch.index_select(
                self.entity_embedding,
                dim=0,
                index=head_part[:, 0]
            ).unsqueeze(1)

            relation = torch.index_select(
                self.relation_embedding,
                dim=0,
                index=head_part[:, 1]
            ).unsqueeze(1)

            tail = torch.index_select(
                self.entity_embedding,
                dim=0,
                index=tail_part.view(-1)
            ).view(batch_size, negative_sample_size, -1)

        else:
            raise ValueError('mode %s not supported' % mode)

        model_func = {
            'TransE': self.TransE,
            'RotatE': self.RotatE,
        }

        if self.model_name in model_func:
            score = model_func[self.model_name](head, relation, tail, mode)
        else:
            raise ValueError('model %s not supported' % self.model_name)

        return score

    def TransE(self, head, relation, tail, mode):
        if mode == 'head-batch':
            score = head + (relation - tail)
        else:
            score = (head + relation) - tail

        score = self.gamma.item() - torch.norm(score, p=1, dim=2)
        return score

    def RotatE(self, head, relation, tail, mode):
        pi = 3.14159265358979323846

        re_head, im_head = torch.chunk(head, 2, dim=2)
        re_tail, im_tail = torch.chunk(tail, 2, dim=2)

        #Make phases of relations uniformly distributed in [-pi, pi]

        phase_relation = relation/(self.embedding_range.item()/pi)

        re_relation = torch.cos(phase_relation)
        im_relation = torch.sin(phase_relation)

        if mode == 'head-batch':
            re_score = re_relation * re_tail + im_relation * im_tail
            im_score = re_relation * im_tail - im_relation * re_tail
            re_score = re_score - re_head
            im_score = im_score - im_head
        else:
            re_score = re_head * re_relation - im_head * im_relation
            im_score = re_head * im_relation + im_head * re_relation
            re_score = re_score - re_tail
            im_score = im_score - im_tail

        score = torch.stack([re_score, im_score], dim = 0)
        score = score.norm(dim = 0)

        score = self.gamma.item() - score.sum(dim = 2)
        return score

    @staticmethod
    def train_step(model, optimizer, train_iterator, args):
        '''
        A single train step. Apply back-propation and return the loss
        '''

        model.train()

        optimizer.zero_grad()

        positive_sample, negative_sample, subsampling_weight, mode = next(train_iterator)

        negative_score = model((positive_sample, negative_sample), mode=mode)

        if args.negative_adversarial_sampling:
            #In self-adversarial sampling, we do not apply back-propagation on the sampling weight
            negative_score = (F.softmax(negative_score * args.adversarial_temperature, dim = 1).detach()
                              * F.logsigmoid(-negative_score)).sum(dim = 1)
        else:
            negative_score = F.logsigmoid(-negative_score).mean(dim = 1)

        positive_score = model(positive_sample)

        positive_score = F.logsigmoid(positive_score).squeeze(dim = 1)

        if args.uni_weight:
            positive_sample_loss = - positive_score.mean()
            negative_sample_loss = - negative_score.mean()
        else:
            positive_sample_loss = - (subsampling_weight * positive_score).sum()/subsampling_weight.sum()
            negative_sample_loss = - (subsampling_weight * negative_score).sum()/subsampling_weight.sum()

        loss = (positive_sample_loss + negative_sample_loss)/2

        if args.regularization != 0.0:
            #Use L3 regularization for ComplEx and DistMult
            regularization = args.regularization * (
                model.entity_embedding.norm(p = 3)**3 +
                model.relation_embedding.norm(p = 3).norm(p = 3)**3
            )
            loss = loss + regularization
            regularization_log = {'regularization': regularization.item()}
        else:
            regularization_log = {}

        loss.backward()

        optimizer.step()

        log = {
            **regularization_log,
            'positive_sample_loss': positive_sample_loss.item(),
            'negative_sample_loss': negative_sample_loss.item(),
            'loss': loss.item()
        }

        return log

    @staticmethod
    def test_step(model, test_triples, all_true_triples, args):
        model.eval()
        logs = []
        true = set(all_true_triples)
        with torch.no_grad():
            for mode in ('head-batch', 'tail-batch'):
                for h, r, t in test_triples:
                    # TestDataset: every entity, filtered ones moved out of the way
                    if mode == 'head-batch':
                        tmp = [(0, rand_head) if (rand_head, r, t) not in true else (-1, h)
                               for rand_head in range(args.nentity)]
                        tmp[h] = (0, h)
                    else:
                        tmp = [(0, rand_tail) if (h, r, rand_tail) not in true else (-1, t)
                               for rand_tail in range(args.nentity)]
                        tmp[t] = (0, t)
                    tmp = torch.LongTensor(tmp)
                    filter_bias = tmp[:, 0].float().unsqueeze(0)
                    negative_sample = tmp[:, 1].unsqueeze(0)
                    positive_sample = torch.LongTensor([[h, r, t]])

                    batch_size = positive_sample.size(0)

                    score = model((positive_sample, negative_sample), mode)
                    score += filter_bias

                    #Explicitly sort all the entities to ensure that there is no test exposure bias
                    argsort = torch.argsort(score, dim = 1, descending=True)

                    if mode == 'head-batch':
                        positive_arg = positive_sample[:, 0]
                    elif mode == 'tail-batch':
                        positive_arg = positive_sample[:, 2]
                    else:
                        raise ValueError('mode %s not supported' % mode)

                    for i in range(batch_size):
                        #Notice that argsort is not ranking
                        ranking = (argsort[i, :] == positive_arg[i]).nonzero()
                        assert ranking.size(0) == 1

                        #ranking + 1 is the true ranking used in evaluation metrics
                        ranking = 1 + ranking.item()
                        logs.append({
                            'MRR': 1.0/ranking,
                            'MR': float(ranking),
                            'HITS@1': 1.0 if ranking <= 1 else 0.0,
                            'HITS@3': 1.0 if ranking <= 3 else 0.0,
                            'HITS@10': 1.0 if ranking <= 10 else 0.0,
                        })

        metrics = {}
        for metric in logs[0].keys():
            metrics[metric] = sum([log[metric] for log in logs])/len(logs)

        return metrics


# ---- the test ----

def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


r = np.random.default_rng(0)
device = torch.device('cpu')
N_ENT, N_REL, DIM = 12, 3, 8
triples = sorted({(int(h), int(rel), int(t)) for h, rel, t in
                  zip(r.integers(0, N_ENT, 40), r.integers(0, N_REL, 40), r.integers(0, N_ENT, 40)) if h != t})
train_triples, test_triples = triples[:-6], triples[-6:]
print("triples", len(train_triples), len(test_triples))

torch.manual_seed(0)
model = TransE(N_ENT, N_REL, device, norm=1, dim=DIM, margin=1.0)
w = model.relations_emb.weight
print("init in range", bool((model.entities_emb.weight.abs() <= 6 / np.sqrt(DIM)).all()),
      [f"{v:.4f}" for v in w.data[:-1].norm(p=1, dim=1).tolist()], w.requires_grad, model.entities_emb.padding_idx)
# weights from numpy, renormalized the way _init_relation_emb does
with torch.no_grad():
    model.entities_emb.weight.copy_(torch.from_numpy(r.uniform(-1, 1, (N_ENT + 1, DIM)).astype(np.float32)))
    model.relations_emb.weight.copy_(torch.from_numpy(r.uniform(-1, 1, (N_REL + 1, DIM)).astype(np.float32)))
model.relations_emb.weight.data[:-1, :].div_(model.relations_emb.weight.data[:-1, :].norm(p=1, dim=1, keepdim=True))
print("relations", fmt(model.relations_emb.weight[0]), fmt(model.relations_emb.weight[-1]))

optimizer = optim.SGD(model.parameters(), lr=0.05)
train = torch.tensor(train_triples)
local_heads, local_relations, local_tails = train[:, 0], train[:, 1], train[:, 2]

# torch.randint's corruption, checked for range only
head_or_tail = torch.randint(high=2, size=local_heads.size(), device=device)
random_entities = torch.randint(high=N_ENT, size=local_heads.size(), device=device)
print("randint", head_or_tail.dtype, tuple(random_entities.shape), int(head_or_tail.min()) >= 0,
      int(head_or_tail.max()) <= 1, int(random_entities.max()) < N_ENT)

# the same corruption with numpy's draws
draws = [(torch.from_numpy(r.integers(0, 2, len(train_triples))), torch.from_numpy(r.integers(0, N_ENT, len(train_triples))))
         for _ in range(5)]
model.train()
for epoch_id, (head_or_tail, random_entities) in enumerate(draws):
    positive_triples = torch.stack((local_heads, local_relations, local_tails), dim=1)
    broken_heads = torch.where(head_or_tail == 1, random_entities, local_heads)
    broken_tails = torch.where(head_or_tail == 0, random_entities, local_tails)
    negative_triples = torch.stack((broken_heads, local_relations, broken_tails), dim=1)

    optimizer.zero_grad()
    loss, pd, nd = model(positive_triples, negative_triples)
    loss.mean().backward()
    loss = loss.data.cpu()
    optimizer.step()
    print("epoch", epoch_id, f"loss {loss.mean().item():.5f} sum {loss.sum().item():.4f}", tuple(loss.shape),
          fmt(pd, 3), fmt(nd, 3))

print("entity norms", [f"{v:.4f}" for v in model.entities_emb.weight.data[:4].norm(dim=1).tolist()],
      fmt(model.entities_emb.weight[-1]), model.entities_emb.weight.grad[-1].abs().sum().item())
model.eval()
test_t = torch.tensor(test_triples)
with torch.no_grad():
    h1, h3, h10, mrr_score = test(model, [(test_t[:3, 0], test_t[:3, 1], test_t[:3, 2]),
                                         (test_t[3:, 0], test_t[3:, 1], test_t[3:, 2])], N_ENT, device)
print(f"hits@1 {h1:.3f} hits@3 {h3:.3f} hits@10 {h10:.3f} mrr {mrr_score:.4f}")
crit = nn.MarginRankingLoss(margin=0.5)
a, b = torch.tensor([1.0, 2.0, 3.0], requires_grad=True), torch.tensor([2.0, 2.0, 1.0])
l = crit(a, b, torch.tensor([1.0, -1.0, 1.0]))
l.backward()
print("margin ranking", f"{l.item():.4f}", a.grad.tolist(),
      F.margin_ranking_loss(a, b, torch.tensor([-1.0]), reduction='sum').item())

# KGEModel: RotatE with self-adversarial negative sampling, TransE without
Args = namedtuple('Args', 'negative_adversarial_sampling adversarial_temperature uni_weight regularization nentity')


def batches(mode_cycle, neg_size, steps):
    for step in range(steps):
        mode = mode_cycle[step % 2]
        idx = r.choice(len(train_triples), 6, replace=False)
        positive_sample = torch.LongTensor([train_triples[i] for i in idx])
        negative_sample = torch.from_numpy(r.integers(0, N_ENT, (6, neg_size)))
        subsampling_weight = torch.sqrt(1 / torch.from_numpy(r.integers(2, 6, 6).astype(np.float32)))
        yield positive_sample, negative_sample, subsampling_weight, mode


for name, args, double in (('RotatE', Args(True, 1.0, False, 0.0, N_ENT), True),
                           ('TransE', Args(False, 1.0, True, 1e-3, N_ENT), False)):
    kge = KGEModel(name, N_ENT, N_REL, hidden_dim=DIM, gamma=6.0, double_entity_embedding=double)
    rng_ok = bool((kge.entity_embedding.abs() <= kge.embedding_range.item()).all())
    with torch.no_grad():
        kge.entity_embedding.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(kge.entity_embedding.shape)).astype(np.float32)))
        kge.relation_embedding.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(kge.relation_embedding.shape)).astype(np.float32)))
    print(name, "params", [(n, tuple(p.shape), p.requires_grad) for n, p in kge.named_parameters()], rng_ok,
          f"{kge.embedding_range.item():.4f}")
    optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, kge.parameters()), lr=0.01)
    it = batches(('head-batch', 'tail-batch'), 5, 4)
    for step in range(4):
        log = KGEModel.train_step(kge, optimizer, it, args)
        print(name, step, {k: f"{v:.5f}" for k, v in log.items()})
    metrics = KGEModel.test_step(kge, test_triples, triples, args)
    print(name, {k: f"{v:.4f}" for k, v in metrics.items()})
    try:
        kge((torch.LongTensor([[0, 0, 1]]), torch.LongTensor([[1, 2]])), mode='both')
    except ValueError as e:
        print("error", e)


# one training step under torch.compile against the same step eagerly
kge = KGEModel('RotatE', N_ENT, N_REL, hidden_dim=DIM, gamma=6.0, double_entity_embedding=True)
with torch.no_grad():
    kge.entity_embedding.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(kge.entity_embedding.shape)).astype(np.float32)))
    kge.relation_embedding.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(kge.relation_embedding.shape)).astype(np.float32)))
optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, kge.parameters()), lr=0.01)
args = Args(True, 1.0, False, 0.0, N_ENT)
fixed = list(batches(('tail-batch', 'tail-batch'), 5, 1))[0]


def train_step(positive_sample, negative_sample, subsampling_weight):
    optimizer.zero_grad()
    negative_score = kge((positive_sample, negative_sample), mode='tail-batch')
    negative_score = (F.softmax(negative_score * args.adversarial_temperature, dim = 1).detach()
                      * F.logsigmoid(-negative_score)).sum(dim = 1)
    positive_score = F.logsigmoid(kge(positive_sample)).squeeze(dim = 1)
    positive_sample_loss = - (subsampling_weight * positive_score).sum()/subsampling_weight.sum()
    negative_sample_loss = - (subsampling_weight * negative_score).sum()/subsampling_weight.sum()
    loss = (positive_sample_loss + negative_sample_loss)/2
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(kge.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(*fixed[:3]).item() for _ in range(2)]
after = {k: v.clone() for k, v in kge.state_dict().items()}
kge.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(*fixed[:3]).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(kge.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))

# TransE-PyTorch's step compiled too: its forward renormalizes the entity
# embeddings in place through .data at every call
model = TransE(N_ENT, N_REL, device, norm=1, dim=DIM, margin=1.0)
with torch.no_grad():
    model.entities_emb.weight.copy_(torch.from_numpy(r.uniform(-1, 1, (N_ENT + 1, DIM)).astype(np.float32)))
    model.relations_emb.weight.copy_(torch.from_numpy(r.uniform(-1, 1, (N_REL + 1, DIM)).astype(np.float32)))
optimizer = optim.SGD(model.parameters(), lr=0.05)
positive_triples = torch.stack((local_heads, local_relations, local_tails), dim=1)
negative_triples = positive_triples.clone()
negative_triples[:, 2] = torch.from_numpy(r.integers(0, N_ENT, len(train_triples)))


def transe_step(positive_triples, negative_triples):
    optimizer.zero_grad()
    loss, pd, nd = model(positive_triples, negative_triples)
    loss.mean().backward()
    optimizer.step()
    return loss.mean()


state = copy.deepcopy(model.state_dict())
eager = [transe_step(positive_triples, negative_triples).item() for _ in range(3)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
cstep = torch.compile(transe_step)
compiled = [cstep(positive_triples, negative_triples).item() for _ in range(3)]
print("TransE compiled losses", [f"{v:.5f}" for v in compiled],
      [f"{v:.4f}" for v in model.entities_emb.weight.data[:3].norm(dim=1).tolist()])
print("TransE compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
