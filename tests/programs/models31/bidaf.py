# BiDAF the way galsang/BiDAF-pytorch (model/model.py, utils/nn.py, run.py,
# evaluation.py) writes it, with the AllenNLP-style masked span logits and
# best-span search beside its own decoding: the character CNN
# (nn.Embedding(padding_idx=1) with uniform_(-0.001, 0.001), the
# x.view(-1, char_dim, x.size(2)).unsqueeze(1) reshape as the repo has it,
# nn.Conv2d(1, C, (char_dim, width)) + ReLU, .squeeze(), F.max_pool1d(x,
# x.size(2)).squeeze()), nn.Embedding.from_pretrained(vectors, freeze=True),
# the two-layer highway built with setattr / getattr (g * h + (1 - g) * x),
# the LSTM wrapper (orthogonal_ / kaiming_normal_ / constant_ init with the
# forget-gate bias chunk(4)[1].fill_(1); torch.sort by length, index_select,
# pack_padded_sequence / pad_packed_sequence, the final states permuted and
# squeezed), the trilinear attention flow (cq.append of
# att_weight_cq(c * qi).squeeze() per query word, torch.stack, s =
# att_weight_c(c).expand(-1, -1, q_len) + att_weight_q(q).permute(0, 2,
# 1).expand(-1, c_len, -1) + cq, F.softmax(s, dim=2), torch.max(s,
# dim=2)[0], the query-to-context b.unsqueeze(1) bmm and expand), the
# modeling and output LSTMs, Linear layers with kaiming_normal_ init and
# optional dropout found by hasattr, nn.CrossEntropyLoss on start / end
# logits, Adadelta(lr=0.5) over the parameters filter()ed by requires_grad,
# the parameter EMA (register / shadow dict / update, and test()'s swap
# through param.data.copy_ with a backup EMA(0)), the dev decoding with
# (torch.ones(c_len, c_len) * float('-inf')).tril(-1), score.max twice and
# torch.gather, answers joined from itos, the predictions json and SQuAD
# v1.1's exact-match / F1. The repo's reset_params writes the forget-gate
# bias through chunk(4)[1].fill_(1) with autograd on, which torch 2 refuses:
# the program shows that, then runs reset_params under torch.no_grad() as
# users patch it; the output LSTM packs with enforce_sorted=False and
# pad_packed_sequence(total_length=...) instead of sorting, as AllenNLP-era
# code does. Changes for a CPU test: torchtext's fields and iterators
# replaced by a small batching of synthetic SQuAD-like examples (torchtext
# conventions: <unk> 0, <pad> 1, char words padded to the batch's longest),
# vectors from numpy, hidden 8, dropout 0, two epochs; then one training
# step under torch.compile against the same step eagerly.
import copy
import json
import re
import string
import sys
from collections import Counter

import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


# ---------------------------------------------------------------- utils/nn.py
class LSTM(nn.Module):
    def __init__(self, input_size, hidden_size, batch_first=False, num_layers=1, bidirectional=False, dropout=0.2):
        super(LSTM, self).__init__()

        self.rnn = nn.LSTM(input_size=input_size,
                           hidden_size=hidden_size,
                           num_layers=num_layers,
                           bidirectional=bidirectional,
                           batch_first=batch_first)
        self.reset_params()
        self.dropout = nn.Dropout(p=dropout)

    def reset_params(self):
        for i in range(self.rnn.num_layers):
            nn.init.orthogonal_(getattr(self.rnn, f'weight_hh_l{i}'))
            nn.init.kaiming_normal_(getattr(self.rnn, f'weight_ih_l{i}'))
            nn.init.constant_(getattr(self.rnn, f'bias_hh_l{i}'), val=0)
            nn.init.constant_(getattr(self.rnn, f'bias_ih_l{i}'), val=0)
            getattr(self.rnn, f'bias_hh_l{i}').chunk(4)[1].fill_(1)

            if self.rnn.bidirectional:
                nn.init.orthogonal_(getattr(self.rnn, f'weight_hh_l{i}_reverse'))
                nn.init.kaiming_normal_(getattr(self.rnn, f'weight_ih_l{i}_reverse'))
                nn.init.constant_(getattr(self.rnn, f'bias_hh_l{i}_reverse'), val=0)
                nn.init.constant_(getattr(self.rnn, f'bias_ih_l{i}_reverse'), val=0)
                getattr(self.rnn, f'bias_hh_l{i}_reverse').chunk(4)[1].fill_(1)

    def forward(self, x):
        x, x_len = x
        x = self.dropout(x)

        x_len_sorted, x_idx = torch.sort(x_len, descending=True)
        x_sorted = x.index_select(dim=0, index=x_idx)
        _, x_ori_idx = torch.sort(x_idx)

        x_packed = nn.utils.rnn.pack_padded_sequence(x_sorted, x_len_sorted, batch_first=True)
        x_packed, (h, c) = self.rnn(x_packed)

        x = nn.utils.rnn.pad_packed_sequence(x_packed, batch_first=True)[0]
        x = x.index_select(dim=0, index=x_ori_idx)
        h = h.permute(1, 0, 2).contiguous().view(-1, h.size(0) * h.size(2)).squeeze()
        h = h.index_select(dim=0, index=x_ori_idx)

        return x, h


class UnsortedLSTM(LSTM):
    """The output LSTM: packing without sorting (enforce_sorted=False),
    padded back to the passage length."""

    def forward(self, x):
        x, x_len = x
        total_length = x.size(1)
        x = self.dropout(x)
        x_packed = nn.utils.rnn.pack_padded_sequence(x, x_len, batch_first=True, enforce_sorted=False)
        x_packed, (h, c) = self.rnn(x_packed)
        x, _ = nn.utils.rnn.pad_packed_sequence(x_packed, batch_first=True, total_length=total_length)
        h = h.permute(1, 0, 2).contiguous().view(-1, h.size(0) * h.size(2)).squeeze()
        return x, h


class Linear(nn.Module):
    def __init__(self, in_features, out_features, dropout=0.0):
        super(Linear, self).__init__()

        self.linear = nn.Linear(in_features=in_features, out_features=out_features)
        if dropout > 0:
            self.dropout = nn.Dropout(p=dropout)
        self.reset_params()

    def reset_params(self):
        nn.init.kaiming_normal_(self.linear.weight)
        nn.init.constant_(self.linear.bias, 0)

    def forward(self, x):
        if hasattr(self, 'dropout'):
            x = self.dropout(x)
        x = self.linear(x)
        return x


# ---------------------------------------------------------------- model/model.py
class BiDAF(nn.Module):
    def __init__(self, args, pretrained):
        super(BiDAF, self).__init__()
        self.args = args

        # 1. Character Embedding Layer
        self.char_emb = nn.Embedding(args.char_vocab_size, args.char_dim, padding_idx=1)
        nn.init.uniform_(self.char_emb.weight, -0.001, 0.001)

        self.char_conv = nn.Sequential(
            nn.Conv2d(1, args.char_channel_size, (args.char_dim, args.char_channel_width)),
            nn.ReLU()
        )

        # 2. Word Embedding Layer
        # initialize word embedding with GloVe
        self.word_emb = nn.Embedding.from_pretrained(pretrained, freeze=True)

        # highway network
        assert self.args.hidden_size * 2 == (self.args.char_channel_size + self.args.word_dim)
        for i in range(2):
            setattr(self, 'highway_linear{}'.format(i),
                    nn.Sequential(Linear(args.hidden_size * 2, args.hidden_size * 2),
                                  nn.ReLU()))
            setattr(self, 'highway_gate{}'.format(i),
                    nn.Sequential(Linear(args.hidden_size * 2, args.hidden_size * 2),
                                  nn.Sigmoid()))

        # 3. Contextual Embedding Layer
        self.context_LSTM = LSTM(input_size=args.hidden_size * 2,
                                 hidden_size=args.hidden_size,
                                 bidirectional=True,
                                 batch_first=True,
                                 dropout=args.dropout)

        # 4. Attention Flow Layer
        self.att_weight_c = Linear(args.hidden_size * 2, 1)
        self.att_weight_q = Linear(args.hidden_size * 2, 1)
        self.att_weight_cq = Linear(args.hidden_size * 2, 1)

        # 5. Modeling Layer
        self.modeling_LSTM1 = LSTM(input_size=args.hidden_size * 8,
                                   hidden_size=args.hidden_size,
                                   bidirectional=True,
                                   batch_first=True,
                                   dropout=args.dropout)

        self.modeling_LSTM2 = LSTM(input_size=args.hidden_size * 2,
                                   hidden_size=args.hidden_size,
                                   bidirectional=True,
                                   batch_first=True,
                                   dropout=args.dropout)

        # 6. Output Layer
        self.p1_weight_g = Linear(args.hidden_size * 8, 1, dropout=args.dropout)
        self.p1_weight_m = Linear(args.hidden_size * 2, 1, dropout=args.dropout)
        self.p2_weight_g = Linear(args.hidden_size * 8, 1, dropout=args.dropout)
        self.p2_weight_m = Linear(args.hidden_size * 2, 1, dropout=args.dropout)

        self.output_LSTM = UnsortedLSTM(input_size=args.hidden_size * 2,
                                        hidden_size=args.hidden_size,
                                        bidirectional=True,
                                        batch_first=True,
                                        dropout=args.dropout)

        self.dropout = nn.Dropout(p=args.dropout)

    def forward(self, batch):
        # TODO: More memory-efficient architecture
        def char_emb_layer(x):
            """
            :param x: (batch, seq_len, word_len)
            :return: (batch, seq_len, char_channel_size)
            """
            batch_size = x.size(0)
            # (batch, seq_len, word_len, char_dim)
            x = self.dropout(self.char_emb(x))
            # (batch * seq_len, 1, char_dim, word_len)
            x = x.view(-1, self.args.char_dim, x.size(2)).unsqueeze(1)
            # (batch * seq_len, char_channel_size, 1, conv_len) -> (batch * seq_len, char_channel_size, conv_len)
            x = self.char_conv(x).squeeze()
            # (batch * seq_len, char_channel_size, 1) -> (batch * seq_len, char_channel_size)
            x = F.max_pool1d(x, x.size(2)).squeeze()
            # (batch, seq_len, char_channel_size)
            x = x.view(batch_size, -1, self.args.char_channel_size)

            return x

        def highway_network(x1, x2):
            """
            :param x1: (batch, seq_len, char_channel_size)
            :param x2: (batch, seq_len, word_dim)
            :return: (batch, seq_len, hidden_size * 2)
            """
            # (batch, seq_len, char_channel_size + word_dim)
            x = torch.cat([x1, x2], dim=-1)
            for i in range(2):
                h = getattr(self, 'highway_linear{}'.format(i))(x)
                g = getattr(self, 'highway_gate{}'.format(i))(x)
                x = g * h + (1 - g) * x
            # (batch, seq_len, hidden_size * 2)
            return x

        def att_flow_layer(c, q):
            """
            :param c: (batch, c_len, hidden_size * 2)
            :param q: (batch, q_len, hidden_size * 2)
            :return: (batch, c_len, q_len)
            """
            c_len = c.size(1)
            q_len = q.size(1)

            # (batch, c_len, q_len, hidden_size * 2)
            # c_tiled = c.unsqueeze(2).expand(-1, -1, q_len, -1)
            # (batch, c_len, q_len, hidden_size * 2)
            # q_tiled = q.unsqueeze(1).expand(-1, c_len, -1, -1)
            # (batch, c_len, q_len, hidden_size * 2)
            # cq_tiled = c_tiled * q_tiled
            # cq_tiled = c.unsqueeze(2).expand(-1, -1, q_len, -1) * q.unsqueeze(1).expand(-1, c_len, -1, -1)

            cq = []
            for i in range(q_len):
                # (batch, 1, hidden_size * 2)
                qi = q.select(1, i).unsqueeze(1)
                # (batch, c_len, 1)
                ci = self.att_weight_cq(c * qi).squeeze()
                cq.append(ci)
            # (batch, c_len, q_len)
            cq = torch.stack(cq, dim=-1)

            # (batch, c_len, q_len)
            s = self.att_weight_c(c).expand(-1, -1, q_len) + \
                self.att_weight_q(q).permute(0, 2, 1).expand(-1, c_len, -1) + \
                cq

            # (batch, c_len, q_len)
            a = F.softmax(s, dim=2)
            # (batch, c_len, q_len) * (batch, q_len, hidden_size * 2) -> (batch, c_len, hidden_size * 2)
            c2q_att = torch.bmm(a, q)
            # (batch, 1, c_len)
            b = F.softmax(torch.max(s, dim=2)[0], dim=1).unsqueeze(1)
            # (batch, 1, c_len) * (batch, c_len, hidden_size * 2) -> (batch, hidden_size * 2)
            q2c_att = torch.bmm(b, c).squeeze()
            # (batch, c_len, hidden_size * 2) (tiled)
            q2c_att = q2c_att.unsqueeze(1).expand(-1, c_len, -1)
            # q2c_att = torch.stack([q2c_att] * c_len, dim=1)

            # (batch, c_len, hidden_size * 8)
            x = torch.cat([c, c2q_att, c * c2q_att, c * q2c_att], dim=-1)
            return x

        def output_layer(g, m, l):
            """
            :param g: (batch, c_len, hidden_size * 8)
            :param m: (batch, c_len ,hidden_size * 2)
            :return: p1: (batch, c_len), p2: (batch, c_len)
            """
            # (batch, c_len)
            p1 = (self.p1_weight_g(g) + self.p1_weight_m(m)).squeeze()
            # (batch, c_len, hidden_size * 2)
            m2 = self.output_LSTM((m, l))[0]
            # (batch, c_len)
            p2 = (self.p2_weight_g(g) + self.p2_weight_m(m2)).squeeze()

            return p1, p2

        # 1. Character Embedding Layer
        c_char = char_emb_layer(batch.c_char)
        q_char = char_emb_layer(batch.q_char)
        # 2. Word Embedding Layer
        c_word = self.word_emb(batch.c_word[0])
        q_word = self.word_emb(batch.q_word[0])
        c_lens = batch.c_word[1]
        q_lens = batch.q_word[1]

        # Highway network
        c = highway_network(c_char, c_word)
        q = highway_network(q_char, q_word)
        # 3. Contextual Embedding Layer
        c = self.context_LSTM((c, c_lens))[0]
        q = self.context_LSTM((q, q_lens))[0]
        # 4. Attention Flow Layer
        g = att_flow_layer(c, q)
        # 5. Modeling Layer
        m = self.modeling_LSTM2((self.modeling_LSTM1((g, c_lens))[0], c_lens))[0]
        # 6. Output Layer
        p1, p2 = output_layer(g, m, c_lens)

        # (batch, c_len), (batch, c_len)
        return p1, p2


# ---------------------------------------------------------------- run.py
class EMA():
    def __init__(self, mu):
        self.mu = mu
        self.shadow = {}

    def register(self, name, val):
        self.shadow[name] = val.clone()

    def get(self, name):
        return self.shadow[name]

    def update(self, name, x):
        assert name in self.shadow
        new_average = (1.0 - self.mu) * x + self.mu * self.shadow[name]
        self.shadow[name] = new_average.clone()


# ---------------------------------------------------------------- evaluation.py (SQuAD v1.1)
def normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace."""
    def remove_articles(text):
        return re.sub(r'\b(a|an|the)\b', ' ', text)

    def white_space_fix(text):
        return ' '.join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def f1_score(prediction, ground_truth):
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def exact_match_score(prediction, ground_truth):
    return (normalize_answer(prediction) == normalize_answer(ground_truth))


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    scores_for_ground_truths = []
    for ground_truth in ground_truths:
        score = metric_fn(prediction, ground_truth)
        scores_for_ground_truths.append(score)
    return max(scores_for_ground_truths)


def evaluate(dataset, predictions):
    f1 = exact_match = total = 0
    for qa in dataset:
        total += 1
        if qa['id'] not in predictions:
            message = 'Unanswered question ' + qa['id'] + ' will receive score 0.'
            print(message, file=sys.stderr)
            continue
        ground_truths = qa['answers']
        prediction = predictions[qa['id']]
        exact_match += metric_max_over_ground_truths(exact_match_score, prediction, ground_truths)
        f1 += metric_max_over_ground_truths(f1_score, prediction, ground_truths)

    exact_match = 100.0 * exact_match / total
    f1 = 100.0 * f1 / total

    return {'exact_match': exact_match, 'f1': f1}


# ---------------------------------------------------------------- data (torchtext's role)
class Args:
    char_dim = 4
    char_channel_width = 3
    char_channel_size = 6
    word_dim = 10
    hidden_size = 8
    dropout = 0.0
    learning_rate = 0.5
    exp_decay_rate = 0.999
    epoch = 2
    print_freq = 2
    gpu = 0
    prediction_file = "prediction.out"


class Batch:
    pass


words = ("the a of in to and is was river city built bridge old north king stone tower year "
         "who what where when river's crossed ?").split()
itos = ["<unk>", "<pad>"] + words
stoi = {w: k for k, w in enumerate(itos)}
chars = ["<unk>", "<pad>"] + sorted(set("".join(words)))
ctoi = {c: k for k, c in enumerate(chars)}

rng = np.random.default_rng(0)


def make_example(k):
    c_len = int(rng.integers(7, 12))
    context = [words[int(i)] for i in rng.integers(0, len(words) - 5, c_len)]
    s = int(rng.integers(0, c_len - 2))
    e = s + int(rng.integers(0, 3))
    question = ["what"] + context[s:e + 1] + ["?"]
    return {"id": f"q{k}", "context": context, "question": question, "s_idx": s, "e_idx": e,
            "answers": [" ".join(context[s:e + 1])]}


train_examples = [make_example(k) for k in range(6)]
dev_examples = [make_example(k) for k in range(6, 9)]


def to_batch(examples):
    batch = Batch()
    batch.id = [ex["id"] for ex in examples]

    def words_field(key):
        lens = [len(ex[key]) for ex in examples]
        ids = [[stoi.get(w, 0) for w in ex[key]] + [1] * (max(lens) - len(ex[key])) for ex in examples]
        return torch.tensor(ids), torch.tensor(lens)

    def chars_field(key):
        max_len = max(len(ex[key]) for ex in examples)
        max_w = max(len(w) for ex in examples for w in ex[key])
        out = np.ones((len(examples), max_len, max_w), dtype=np.int64)
        for i, ex in enumerate(examples):
            for j, w in enumerate(ex[key]):
                out[i, j, :len(w)] = [ctoi.get(ch, 0) for ch in w]
        return torch.from_numpy(out)

    batch.c_word = words_field("context")
    batch.q_word = words_field("question")
    batch.c_char = chars_field("context")
    batch.q_char = chars_field("question")
    batch.s_idx = torch.tensor([ex["s_idx"] for ex in examples])
    batch.e_idx = torch.tensor([ex["e_idx"] for ex in examples])
    return batch


class Data:
    pass


data = Data()
data.train_batches = [to_batch(train_examples[b:b + 3]) for b in range(0, 6, 3)]
data.dev_iter = [to_batch(dev_examples)]
data.dev_examples = dev_examples
data.itos = itos


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            fan_in = int(np.prod(p.shape[1:])) if p.dim() > 1 else 4
            p.copy_(torch.from_numpy(r.normal(0, 1 / np.sqrt(fan_in), tuple(p.shape)).astype(np.float32)))


args = Args()
args.char_vocab_size = len(chars)
pretrained = torch.from_numpy(rng.normal(0, 1, (len(itos), args.word_dim)).astype(np.float32))

# the repo's reset_params under torch 2
try:
    LSTM(input_size=4, hidden_size=3, bidirectional=True, batch_first=True)
except RuntimeError as e:
    print("RuntimeError:", e)
LSTM.reset_params = torch.no_grad()(LSTM.reset_params)
probe = LSTM(input_size=4, hidden_size=3, bidirectional=True, batch_first=True)
print("forget-gate bias", probe.rnn.bias_hh_l0.tolist(), probe.rnn.bias_ih_l0_reverse.abs().sum().item(),
      probe.rnn.bias_hh_l0.requires_grad, probe.rnn.bias_hh_l0.grad_fn)
print("orthogonal", f"{(probe.rnn.weight_hh_l0[:3] @ probe.rnn.weight_hh_l0[:3].t()).trace().item():.3f}")

device = torch.device(f"cuda:{args.gpu}" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = BiDAF(args, pretrained).to(device)
load_numpy(model, 1)
print("word_emb frozen", model.word_emb.weight.requires_grad, torch.equal(model.word_emb.weight, pretrained),
      "params", sum(p.numel() for p in model.parameters() if p.requires_grad),
      [n for n, _ in model.named_children()][:6])

batch = data.train_batches[0]
print("batch", tuple(batch.c_char.shape), batch.c_word[1].tolist(), tuple(batch.q_char.shape), batch.q_word[1].tolist())
p1, p2 = model(batch)
print("logits", tuple(p1.shape), fmt(p1[0]), fmt(p2[2]))

ema = EMA(args.exp_decay_rate)
for name, param in model.named_parameters():
    if param.requires_grad:
        ema.register(name, param.data)
parameters = filter(lambda p: p.requires_grad, model.parameters())
optimizer = optim.Adadelta(parameters, lr=args.learning_rate)
criterion = nn.CrossEntropyLoss()


def get_best_span(span_start_logits, span_end_logits, c_mask):
    # AllenNLP-style: masked log-softmax, then the best start <= end pair
    p1 = F.softmax(span_start_logits.masked_fill(~c_mask, -1e30), dim=1)
    p2 = F.softmax(span_end_logits.masked_fill(~c_mask, -1e30), dim=1)
    c_len = p1.size(1)
    scores = torch.triu(p1.unsqueeze(2) * p2.unsqueeze(1))
    max_score, idx = torch.max(scores.view(scores.size(0), -1), dim=1)
    return idx // c_len, idx % c_len, max_score


def test(model, ema, args, data):
    criterion = nn.CrossEntropyLoss()
    loss = 0
    answers = dict()
    model.eval()

    backup_params = EMA(0)
    for name, param in model.named_parameters():
        if param.requires_grad:
            backup_params.register(name, param.data)
            param.data.copy_(ema.get(name))

    with torch.set_grad_enabled(False):
        for batch in iter(data.dev_iter):
            p1, p2 = model(batch)
            batch_loss = criterion(p1, batch.s_idx) + criterion(p2, batch.e_idx)
            loss += batch_loss.item()

            # (batch, c_len, c_len)
            batch_size, c_len = p1.size()
            ls = nn.LogSoftmax(dim=1)
            mask = (torch.ones(c_len, c_len) * float('-inf')).to(device).tril(-1).unsqueeze(0).expand(batch_size, -1, -1)
            score = (ls(p1).unsqueeze(2) + ls(p2).unsqueeze(1)) + mask
            score, s_idx = score.max(dim=1)
            score, e_idx = score.max(dim=1)
            s_idx = torch.gather(s_idx, 1, e_idx.view(-1, 1)).squeeze()

            c_mask = batch.c_word[0] != 1
            s2, e2, best = get_best_span(p1, p2, c_mask)
            print("  spans", s_idx.tolist(), e_idx.tolist(), "allennlp", s2.tolist(), e2.tolist(), fmt(best, 3))

            for i in range(batch_size):
                id = batch.id[i]
                answer = batch.c_word[0][i][s_idx[i]:e_idx[i] + 1]
                answer = ' '.join([data.itos[idx] for idx in answer])
                answers[id] = answer

        for name, param in model.named_parameters():
            if param.requires_grad:
                param.data.copy_(backup_params.get(name))

    with open(args.prediction_file, 'w', encoding='utf-8') as f:
        print(json.dumps(answers), file=f)

    with open(args.prediction_file, encoding='utf-8') as f:
        predictions = json.load(f)
    results = evaluate(data.dev_examples, predictions)
    return loss, results['exact_match'], results['f1'], answers


model.train()
loss, last_epoch = 0, -1
max_dev_exact, max_dev_f1 = -1, -1
i = 0
for present_epoch in range(args.epoch):
    print('epoch:', present_epoch + 1)
    for batch in data.train_batches:
        p1, p2 = model(batch)

        optimizer.zero_grad()
        batch_loss = criterion(p1, batch.s_idx) + criterion(p2, batch.e_idx)
        loss += batch_loss.item()
        batch_loss.backward()
        optimizer.step()

        for name, param in model.named_parameters():
            if param.requires_grad:
                ema.update(name, param.data)

        if (i + 1) % args.print_freq == 0:
            dev_loss, dev_exact, dev_f1, answers = test(model, ema, args, data)
            c = (i + 1) // args.print_freq

            print(f'train loss: {loss:.3f} / dev loss: {dev_loss:.3f}'
                  f' / dev EM: {dev_exact:.3f} / dev F1: {dev_f1:.3f}', answers)

            if dev_f1 > max_dev_f1:
                max_dev_f1 = dev_f1
                max_dev_exact = dev_exact
                best_model = copy.deepcopy(model)

            loss = 0
            model.train()
        i += 1

print(f'max dev EM: {max_dev_exact:.3f} / max dev F1: {max_dev_f1:.3f}')
print("ema", fmt(ema.get("att_weight_cq.linear.weight")), fmt(model.att_weight_cq.linear.weight))
print("grads", fmt(model.char_emb.weight.grad[1]), fmt(model.char_emb.weight.grad[3]),
      fmt(model.context_LSTM.rnn.weight_hh_l0_reverse.grad), model.word_emb.weight.grad)
print("adadelta", sorted(optimizer.state[model.att_weight_c.linear.weight].keys()),
      fmt(optimizer.state[model.att_weight_c.linear.weight]["acc_delta"]))
print("f1", f"{f1_score('the old stone bridge', 'Stone Bridge!'):.4f}", exact_match_score("The King.", "king"))


# one training step under torch.compile against the same step eagerly
def train_step(batch):
    p1, p2 = model(batch)
    optimizer.zero_grad()
    batch_loss = criterion(p1, batch.s_idx) + criterion(p2, batch.e_idx)
    batch_loss.backward()
    optimizer.step()
    return batch_loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(data.train_batches[k]).item() for k in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(data.train_batches[k]).item() for k in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
