# pmixer/SASRec.pytorch (Self-Attentive Sequential Recommendation) the way
# its model.py, utils.py and main.py write it: item embeddings with
# padding_idx=0 scaled by embedding_dim ** 0.5 in place (seqs *=), learned
# positions from an np.tile'd numpy array zeroed at padding (poss *=
# (log_seqs != 0)), the timeline mask from torch.BoolTensor(log_seqs == 0)
# multiplied in as ~mask.unsqueeze(-1), nn.MultiheadAttention over
# (T, B, C) transposes with a causal ~torch.tril(bool) attn_mask and the
# layernormed query as the residual, the point-wise feed-forward as
# Conv1d(kernel_size=1) between transposes with outputs += inputs,
# LayerNorm(eps=1e-8); main.py's xavier_normal_ over named_parameters with
# a bare except for the 1-d ones, the padding rows zeroed through .data,
# BCEWithLogitsLoss on pos / neg logits indexed by indices = np.where(pos
# != 0), the l2_emb term over item_emb.parameters(), Adam(betas=(0.9,
# 0.98)); utils.py's sample_function / random_neq and evaluate (101
# candidates, -model.predict(...)[0], argsort().argsort()[0] ranks, NDCG@10
# and HR@10), predict through item_embs.matmul(final_feat.unsqueeze(-1)).
# Changes for a CPU test: a tiny synthetic dataset from numpy, the
# sampler called in-process (no multiprocessing WarpSampler), weights from
# numpy after the xavier pass, dropout 0 while the losses are compared (one
# train-mode forward with dropout is checked for shape only), a few steps;
# then one training step under torch.compile against eager.
import copy
import random
from types import SimpleNamespace

import numpy as np
import torch


# ---- model.py ----

class PointWiseFeedForward(torch.nn.Module):
    def __init__(self, hidden_units, dropout_rate):

        super(PointWiseFeedForward, self).__init__()

        self.conv1 = torch.nn.Conv1d(hidden_units, hidden_units, kernel_size=1)
        self.dropout1 = torch.nn.Dropout(p=dropout_rate)
        self.relu = torch.nn.ReLU()
        self.conv2 = torch.nn.Conv1d(hidden_units, hidden_units, kernel_size=1)
        self.dropout2 = torch.nn.Dropout(p=dropout_rate)

    def forward(self, inputs):
        outputs = self.dropout2(self.conv2(self.relu(self.dropout1(self.conv1(inputs.transpose(-1, -2))))))
        outputs = outputs.transpose(-1, -2) # as Conv1D requires (N, C, Length)
        outputs += inputs
        return outputs

# pls use the following self-made multihead attention layer
# in case your pytorch version is below 1.16 or for other reasons
# https://github.com/pmixer/TiSASRec.pytorch/blob/master/model.py

class SASRec(torch.nn.Module):
    def __init__(self, user_num, item_num, args):
        super(SASRec, self).__init__()

        self.user_num = user_num
        self.item_num = item_num
        self.dev = args.device

        # TODO: loss += args.l2_emb for regularizing embedding vectors during training
        # https://stackoverflow.com/questions/42704283/adding-l1-l2-regularization-in-pytorch
        self.item_emb = torch.nn.Embedding(self.item_num+1, args.hidden_units, padding_idx=0)
        self.pos_emb = torch.nn.Embedding(args.maxlen+1, args.hidden_units, padding_idx=0)
        self.emb_dropout = torch.nn.Dropout(p=args.dropout_rate)

        self.attention_layernorms = torch.nn.ModuleList() # to be Q for self-attention
        self.attention_layers = torch.nn.ModuleList()
        self.forward_layernorms = torch.nn.ModuleList()
        self.forward_layers = torch.nn.ModuleList()

        self.last_layernorm = torch.nn.LayerNorm(args.hidden_units, eps=1e-8)

        for _ in range(args.num_blocks):
            new_attn_layernorm = torch.nn.LayerNorm(args.hidden_units, eps=1e-8)
            self.attention_layernorms.append(new_attn_layernorm)

            new_attn_layer =  torch.nn.MultiheadAttention(args.hidden_units,
                                                            args.num_heads,
                                                            args.dropout_rate)
            self.attention_layers.append(new_attn_layer)

            new_fwd_layernorm = torch.nn.LayerNorm(args.hidden_units, eps=1e-8)
            self.forward_layernorms.append(new_fwd_layernorm)

            new_fwd_layer = PointWiseFeedForward(args.hidden_units, args.dropout_rate)
            self.forward_layers.append(new_fwd_layer)

            # self.pos_sigmoid = torch.nn.Sigmoid()
            # self.neg_sigmoid = torch.nn.Sigmoid()

    def log2feats(self, log_seqs): # TODO: fp64 and int64 as default in python, trim?
        seqs = self.item_emb(torch.LongTensor(log_seqs).to(self.dev))
        seqs *= self.item_emb.embedding_dim ** 0.5
        poss = np.tile(np.arange(1, log_seqs.shape[1] + 1), [log_seqs.shape[0], 1])
        # TODO: directly do tensor = torch.arange(1, xxx, device='cuda') to save extra overheads
        poss *= (log_seqs != 0)
        seqs += self.pos_emb(torch.LongTensor(poss).to(self.dev))
        seqs = self.emb_dropout(seqs)

        timeline_mask = torch.BoolTensor(log_seqs == 0).to(self.dev)
        seqs *= ~timeline_mask.unsqueeze(-1) # broadcast in last dim

        tl = seqs.shape[1] # time dim len for enforce causality
        attention_mask = ~torch.tril(torch.ones((tl, tl), dtype=torch.bool, device=self.dev))

        for i in range(len(self.attention_layers)):
            seqs = torch.transpose(seqs, 0, 1)
            Q = self.attention_layernorms[i](seqs)
            mha_outputs, _ = self.attention_layers[i](Q, seqs, seqs,
                                            attn_mask=attention_mask)
                                            # need_weights=False) this arg do not work?
            seqs = Q + mha_outputs
            seqs = torch.transpose(seqs, 0, 1)

            seqs = self.forward_layernorms[i](seqs)
            seqs = self.forward_layers[i](seqs)
            seqs *=  ~timeline_mask.unsqueeze(-1)

        log_feats = self.last_layernorm(seqs) # (U, T, C) -> (U, -1, C)

        return log_feats

    def forward(self, user_ids, log_seqs, pos_seqs, neg_seqs): # for training
        log_feats = self.log2feats(log_seqs) # user_ids hasn't been used yet

        pos_embs = self.item_emb(torch.LongTensor(pos_seqs).to(self.dev))
        neg_embs = self.item_emb(torch.LongTensor(neg_seqs).to(self.dev))

        pos_logits = (log_feats * pos_embs).sum(dim=-1)
        neg_logits = (log_feats * neg_embs).sum(dim=-1)

        # pos_pred = self.pos_sigmoid(pos_logits)
        # neg_pred = self.neg_sigmoid(neg_logits)

        return pos_logits, neg_logits # pos_pred, neg_pred

    def predict(self, user_ids, log_seqs, item_indices): # for inference
        log_feats = self.log2feats(log_seqs) # user_ids hasn't been used yet

        final_feat = log_feats[:, -1, :] # only use last QKV classifier, a waste

        item_embs = self.item_emb(torch.LongTensor(item_indices).to(self.dev)) # (U, I, C)

        logits = item_embs.matmul(final_feat.unsqueeze(-1)).squeeze(-1)

        # preds = self.pos_sigmoid(logits) # rank same item list for different users

        return logits # preds # (U, I)


# ---- utils.py ----

def random_neq(l, r, s):
    t = np.random.randint(l, r)
    while t in s:
        t = np.random.randint(l, r)
    return t


def sample_function(user_train, usernum, itemnum, batch_size, maxlen):
    def sample(uid):

        # uid = np.random.randint(1, usernum + 1)
        while len(user_train[uid]) <= 1: uid = np.random.randint(1, usernum + 1)

        seq = np.zeros([maxlen], dtype=np.int32)
        pos = np.zeros([maxlen], dtype=np.int32)
        neg = np.zeros([maxlen], dtype=np.int32)
        nxt = user_train[uid][-1]
        idx = maxlen - 1

        ts = set(user_train[uid])
        for i in reversed(user_train[uid][:-1]):
            seq[idx] = i
            pos[idx] = nxt
            if nxt != 0: neg[idx] = random_neq(1, itemnum + 1, ts)
            nxt = i
            idx -= 1
            if idx == -1: break

        return (uid, seq, pos, neg)

    uids = np.arange(1, usernum+1, dtype=np.int32)
    counter = 0
    while True:
        if counter % usernum == 0:
            np.random.shuffle(uids)
        one_batch = []
        for i in range(batch_size):
            one_batch.append(sample(uids[counter % usernum]))
            counter += 1
        yield zip(*one_batch)


def evaluate(model, dataset, args):
    [train, valid, test, usernum, itemnum] = copy.deepcopy(dataset)

    NDCG = 0.0
    HT = 0.0
    valid_user = 0.0

    if usernum>10000:
        users = random.sample(range(1, usernum + 1), 10000)
    else:
        users = range(1, usernum + 1)
    for u in users:

        if len(train[u]) < 1 or len(test[u]) < 1: continue

        seq = np.zeros([args.maxlen], dtype=np.int32)
        idx = args.maxlen - 1
        seq[idx] = valid[u][0]
        idx -= 1
        for i in reversed(train[u]):
            seq[idx] = i
            idx -= 1
            if idx == -1: break
        rated = set(train[u])
        rated.add(0)
        item_idx = [test[u][0]]
        for _ in range(100):
            t = np.random.randint(1, itemnum + 1)
            while t in rated: t = np.random.randint(1, itemnum + 1)
            item_idx.append(t)

        predictions = -model.predict(*[np.array(l) for l in [[u], [seq], item_idx]])
        predictions = predictions[0] # - for 1st argsort DESC

        rank = predictions.argsort().argsort()[0].item()

        valid_user += 1

        if rank < 10:
            NDCG += 1 / np.log2(rank + 2)
            HT += 1

    return NDCG / valid_user, HT / valid_user


# ---- main.py, small ----

def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


np.random.seed(0)
random.seed(0)
torch.manual_seed(0)
args = SimpleNamespace(device='cpu', hidden_units=16, maxlen=10, num_blocks=2, num_heads=2,
                       dropout_rate=0.0, lr=0.005, l2_emb=0.01, batch_size=4)
usernum, itemnum = 8, 150
user_train, user_valid, user_test = {}, {}, {}
for u in range(1, usernum + 1):
    items = list(np.random.choice(np.arange(1, 40), size=np.random.randint(4, 14), replace=False) + 0)
    items = [int(i) for i in items]
    user_train[u], user_valid[u], user_test[u] = items[:-2], [items[-2]], [items[-1]]
dataset = [user_train, user_valid, user_test, usernum, itemnum]
print("users", usernum, "avg len", f"{sum(len(v) for v in user_train.values()) / usernum:.2f}")

model = SASRec(usernum, itemnum, args).to(args.device)
failed = []
for name, param in model.named_parameters():
    try:
        torch.nn.init.xavier_normal_(param.data)
    except:
        failed.append(name)
        pass # just ignore those failed init layers
print("xavier failed", len(failed), failed[:4])
rng = np.random.default_rng(0)
with torch.no_grad():
    for name, param in model.named_parameters():
        if param.dim() > 1 or 'bias' in name:
            param.copy_(torch.from_numpy(rng.normal(0, 0.3, tuple(param.shape)).astype(np.float32)))
model.pos_emb.weight.data[0, :] = 0
model.item_emb.weight.data[0, :] = 0
print("padding rows", model.item_emb.weight[0].abs().sum().item(), model.pos_emb.weight[0].abs().sum().item(),
      model.item_emb.padding_idx, type(model.attention_layers[0].out_proj).__name__)

model.train() # enable model training
bce_criterion = torch.nn.BCEWithLogitsLoss() # torch.nn.BCELoss()
adam_optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98))

sampler = sample_function(user_train, usernum, itemnum, args.batch_size, args.maxlen)
batches = []
for step in range(6):
    u, seq, pos, neg = next(sampler) # tuples to ndarray
    u, seq, pos, neg = np.array(u), np.array(seq), np.array(pos), np.array(neg)
    batches.append((u, seq, pos, neg))
    pos_logits, neg_logits = model(u, seq, pos, neg)
    pos_labels, neg_labels = torch.ones(pos_logits.shape, device=args.device), torch.zeros(neg_logits.shape, device=args.device)
    # print("\neye ball check raw_logits:"); print(pos_logits); print(neg_logits) # check pos_logits > 0, neg_logits < 0
    adam_optimizer.zero_grad()
    indices = np.where(pos != 0)
    loss = bce_criterion(pos_logits[indices], pos_labels[indices])
    loss += bce_criterion(neg_logits[indices], neg_labels[indices])
    for param in model.item_emb.parameters(): loss += args.l2_emb * torch.norm(param)
    loss.backward()
    adam_optimizer.step()
    print("loss in iteration {}: {:.5f}".format(step, loss.item()), tuple(pos_logits.shape),
          len(indices[0]), fmt(pos_logits[indices], 3))

print("item_emb grad at padding", model.item_emb.weight.grad[0].abs().sum().item(),
      fmt(model.item_emb.weight[5], 3))
model.eval()
with torch.no_grad():
    t_test = evaluate(model, dataset, args)
print('test (NDCG@10: %.4f, HR@10: %.4f)' % (t_test[0], t_test[1]))
u, seq, pos, neg = batches[0]
with torch.no_grad():
    logits = model.predict(u, seq, np.tile(np.arange(1, 21), [len(u), 1]))
    feats = model.log2feats(seq)
print("predict", tuple(logits.shape), fmt(logits[0], 4), fmt(feats[0, -1], 3),
      "padded steps", fmt(feats[0, 0], 2))

# dropout in train mode: shape only
drop_args = SimpleNamespace(**{**vars(args), 'dropout_rate': 0.2})
dmodel = SASRec(usernum, itemnum, drop_args)
dmodel.train()
pl, nl = dmodel(u, seq, pos, neg)
print("dropout forward", tuple(pl.shape), tuple(nl.shape), bool(torch.isfinite(pl).all()))

# one training step under torch.compile against the same step eagerly:
# main.py's loop body, on the sampler's numpy arrays
def train_step(u, seq, pos, neg):
    pos_logits, neg_logits = model(u, seq, pos, neg)
    pos_labels, neg_labels = torch.ones(pos_logits.shape, device=args.device), torch.zeros(neg_logits.shape, device=args.device)
    adam_optimizer.zero_grad()
    indices = np.where(pos != 0)
    loss = bce_criterion(pos_logits[indices], pos_labels[indices])
    loss += bce_criterion(neg_logits[indices], neg_labels[indices])
    for param in model.item_emb.parameters(): loss += args.l2_emb * torch.norm(param)
    loss.backward()
    adam_optimizer.step()
    return loss


model.train()
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(adam_optimizer.state_dict())
eager = [train_step(*batches[1]).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
adam_optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(*batches[1]).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
# The key projection's bias gets a gradient that is zero but for rounding
# (softmax over keys ignores a shift shared by all of them), which Adam's
# m / (sqrt(v) + eps) blows up to a step of any sign: it is left out.
H = args.hidden_units
key_grad = max(l.in_proj_bias.grad[H:2 * H].abs().max().item() for l in model.attention_layers)
def close(k):
    a, b = model.state_dict()[k], after[k]
    if k.endswith('in_proj_bias'):
        a, b = torch.cat([a[:H], a[2 * H:]]), torch.cat([b[:H], b[2 * H:]])
    return torch.allclose(a, b, rtol=1e-4, atol=1e-5)
print("key bias grad ~ 0:", key_grad < 1e-5)
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(close(k) for k in after))
