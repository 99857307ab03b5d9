# Andras7/word2vec-pytorch (word2vec/model.py's SkipGramModel: two
# nn.Embedding(sparse=True) tables, init.uniform_ / init.constant_, torch.mul,
# torch.bmm, clamp, F.logsigmoid; data_reader.py's DataReader (negative
# sampling table, subsampling discards) and Word2vecDataset with its collate;
# trainer.py's Word2VecTrainer: optim.SparseAdam with CosineAnnealingLR, a
# tqdm loop, save_embedding) on a synthetic corpus written to input.txt.
# The negative table is 1e4 long instead of 1e8; numpy's global generator
# (seeded) draws the subsampling, windows and negatives, and the u embeddings
# are set from numpy after the published init, so tracec and torch compute
# the same numbers.  Then the sparse training step under torch.compile
# against the same step run eagerly.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn import init
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

np.random.seed(12345)

# ---- model.py ----

"""
    u_embedding: Embedding for center word.
    v_embedding: Embedding for neighbor words.
"""


class SkipGramModel(nn.Module):

    def __init__(self, emb_size, emb_dimension):
        super(SkipGramModel, self).__init__()
        self.emb_size = emb_size
        self.emb_dimension = emb_dimension
        self.u_embeddings = nn.Embedding(emb_size, emb_dimension, sparse=True)
        self.v_embeddings = nn.Embedding(emb_size, emb_dimension, sparse=True)

        initrange = 1.0 / self.emb_dimension
        init.uniform_(self.u_embeddings.weight.data, -initrange, initrange)
        init.constant_(self.v_embeddings.weight.data, 0)

    def forward(self, pos_u, pos_v, neg_v):
        emb_u = self.u_embeddings(pos_u)
        emb_v = self.v_embeddings(pos_v)
        emb_neg_v = self.v_embeddings(neg_v)

        score = torch.sum(torch.mul(emb_u, emb_v), dim=1)
        score = torch.clamp(score, max=10, min=-10)
        score = -F.logsigmoid(score)

        neg_score = torch.bmm(emb_neg_v, emb_u.unsqueeze(2)).squeeze()
        neg_score = torch.clamp(neg_score, max=10, min=-10)
        neg_score = -torch.sum(F.logsigmoid(-neg_score), dim=1)

        return torch.mean(score + neg_score)

    def save_embedding(self, id2word, file_name):
        embedding = self.u_embeddings.weight.cpu().data.numpy()
        with open(file_name, 'w') as f:
            f.write('%d %d\n' % (len(id2word), self.emb_dimension))
            for wid, w in id2word.items():
                e = ' '.join(map(lambda x: str(x), embedding[wid]))
                f.write('%s %s\n' % (w, e))


# ---- data_reader.py ----

class DataReader:
    NEGATIVE_TABLE_SIZE = 1e4   # 1e8 as published

    def __init__(self, inputFileName, min_count):

        self.negatives = []
        self.discards = []
        self.negpos = 0

        self.word2id = dict()
        self.id2word = dict()
        self.sentences_count = 0
        self.token_count = 0
        self.word_frequency = dict()

        self.inputFileName = inputFileName
        self.read_words(min_count)
        self.initTableNegatives()
        self.initTableDiscards()

    def read_words(self, min_count):
        word_frequency = dict()
        for line in open(self.inputFileName, encoding="utf8"):
            line = line.split()
            if len(line) > 1:
                self.sentences_count += 1
                for word in line:
                    if len(word) > 0:
                        self.token_count += 1
                        word_frequency[word] = word_frequency.get(word, 0) + 1

                        if self.token_count % 1000000 == 0:
                            print("Read " + str(int(self.token_count / 1000000)) + "M words.")

        wid = 0
        for w, c in word_frequency.items():
            if c < min_count:
                continue
            self.word2id[w] = wid
            self.id2word[wid] = w
            self.word_frequency[wid] = c
            wid += 1
        print("Total embeddings: " + str(len(self.word2id)))

    def initTableDiscards(self):
        t = 0.0001
        f = np.array(list(self.word_frequency.values())) / self.token_count
        self.discards = np.sqrt(t / f) + (t / f)

    def initTableNegatives(self):
        pow_frequency = np.array(list(self.word_frequency.values())) ** 0.5
        words_pow = sum(pow_frequency)
        ratio = pow_frequency / words_pow
        count = np.round(ratio * DataReader.NEGATIVE_TABLE_SIZE)
        for wid, c in enumerate(count):
            self.negatives += [wid] * int(c)
        self.negatives = np.array(self.negatives)
        np.random.shuffle(self.negatives)

    def getNegatives(self, target, size):  # TODO check equality with target
        response = self.negatives[self.negpos:self.negpos + size]
        self.negpos = (self.negpos + size) % len(self.negatives)
        if len(response) != size:
            return np.concatenate((response, self.negatives[0:self.negpos]))
        return response


# -----------------------------------------------------------------------------------------------------------------

class Word2vecDataset(Dataset):
    def __init__(self, data, window_size):
        self.data = data
        self.window_size = window_size
        self.input_file = open(data.inputFileName, encoding="utf8")

    def __len__(self):
        return self.data.sentences_count

    def __getitem__(self, idx):
        while True:
            line = self.input_file.readline()
            if not line:
                self.input_file.seek(0, 0)
                line = self.input_file.readline()

            if len(line) > 1:
                words = line.split()

                if len(words) > 1:
                    word_ids = [self.data.word2id[w] for w in words if
                                w in self.data.word2id and np.random.rand() < self.data.discards[self.data.word2id[w]]]

                    boundary = np.random.randint(1, self.window_size)
                    return [(u, v, self.data.getNegatives(v, 5)) for i, u in enumerate(word_ids) for j, v in
                            enumerate(word_ids[max(i - boundary, 0):i + boundary]) if u != v]

    @staticmethod
    def collate(batches):
        all_u = [u for batch in batches for u, _, _ in batch if len(batch) > 0]
        all_v = [v for batch in batches for _, v, _ in batch if len(batch) > 0]
        all_neg_v = [neg_v for batch in batches for _, _, neg_v in batch if len(batch) > 0]

        return torch.LongTensor(all_u), torch.LongTensor(all_v), torch.LongTensor(all_neg_v)


# ---- trainer.py ----

class Word2VecTrainer:
    def __init__(self, input_file, output_file, emb_dimension=100, batch_size=32, window_size=5, iterations=3,
                 initial_lr=0.001, min_count=12):

        self.data = DataReader(input_file, min_count)
        dataset = Word2vecDataset(self.data, window_size)
        self.dataloader = DataLoader(dataset, batch_size=batch_size,
                                     shuffle=False, num_workers=0, collate_fn=dataset.collate)

        self.output_file_name = output_file
        self.emb_size = len(self.data.word2id)
        self.emb_dimension = emb_dimension
        self.batch_size = batch_size
        self.iterations = iterations
        self.initial_lr = initial_lr
        self.skip_gram_model = SkipGramModel(self.emb_size, self.emb_dimension)

        self.use_cuda = torch.cuda.is_available()
        self.device = torch.device("cuda" if self.use_cuda else "cpu")
        if self.use_cuda:
            self.skip_gram_model.cuda()

    def train(self):

        for iteration in range(self.iterations):

            print("\n\n\nIteration: " + str(iteration + 1))
            optimizer = optim.SparseAdam(self.skip_gram_model.parameters(), lr=self.initial_lr)
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, len(self.dataloader))

            running_loss = 0.0
            for i, sample_batched in enumerate(tqdm(self.dataloader)):

                if len(sample_batched[0]) > 1:
                    pos_u = sample_batched[0].to(self.device)
                    pos_v = sample_batched[1].to(self.device)
                    neg_v = sample_batched[2].to(self.device)

                    scheduler.step()
                    optimizer.zero_grad()
                    loss = self.skip_gram_model.forward(pos_u, pos_v, neg_v)
                    loss.backward()
                    optimizer.step()

                    running_loss = running_loss * 0.9 + loss.item() * 0.1
                    if i > 0 and i % 2 == 0:   # % 500 as published
                        print(" Loss: " + str(running_loss))

            self.skip_gram_model.save_embedding(self.data.id2word, self.output_file_name)
        return optimizer


# a synthetic corpus: Zipf-distributed words in sentences of 8 to 30 words
g = np.random.default_rng(0)
vocab = ["word%d" % i for i in range(400)]
p = 1.0 / np.arange(1, 401)
with open("input.txt", "w", encoding="utf8") as f:
    for _ in range(60):
        f.write(" ".join(vocab[k] for k in g.choice(400, g.integers(8, 31), p=p / p.sum())) + "\n")

w2v = Word2VecTrainer(input_file="input.txt", output_file="out.vec", emb_dimension=16, batch_size=8,
                      iterations=2, initial_lr=0.01, min_count=2)
model = w2v.skip_gram_model
print(model)
u = model.u_embeddings.weight
print("init", bool((u.abs() <= 1.0 / 16).all()), bool((model.v_embeddings.weight == 0).all()))
with torch.no_grad():
    u.copy_(torch.from_numpy(g.uniform(-1.0 / 16, 1.0 / 16, tuple(u.shape)).astype(np.float32)))
    model.v_embeddings.weight.copy_(torch.from_numpy(0.1 * g.standard_normal(tuple(u.shape)).astype(np.float32)))
print("negatives", len(w2v.data.negatives), w2v.data.negatives[:10].tolist(),
      f"discards {w2v.data.discards.min():.5f} {w2v.data.discards.max():.5f}")

pos_u, pos_v, neg_v = next(iter(w2v.dataloader))
print("batch", tuple(pos_u.shape), tuple(neg_v.shape), pos_u.dtype, pos_u[:8].tolist(), neg_v[0].tolist())
loss = model(pos_u, pos_v, neg_v)
loss.backward()
print(f"loss {loss.item():.6f}")
grad = model.u_embeddings.weight.grad
print("grad", tuple(grad.shape), f"{grad.to_dense().norm().item():.6f}", f"{model.v_embeddings.weight.grad.to_dense().norm().item():.6f}")
model.zero_grad()

optimizer = w2v.train()
print("lr", [f"{lr:.6e}" for lr in [group["lr"] for group in optimizer.param_groups]])
with open("out.vec") as f:
    head = [next(f) for _ in range(3)]
print("out.vec", head[0].strip(), head[1].split()[0], [f"{float(v):.5f}" for v in head[1].split()[1:5]])

# the sparse training step under torch.compile against the same step run eagerly
optimizer = optim.SparseAdam(model.parameters(), lr=0.01)


def train_step(pos_u, pos_v, neg_v):
    optimizer.zero_grad()
    loss = model(pos_u, pos_v, neg_v)
    loss.backward()
    optimizer.step()
    return loss


loss = train_step(pos_u, pos_v, neg_v)   # SparseAdam's state exists from here on
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(pos_u, pos_v, neg_v).item() for _ in range(3)]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(pos_u, pos_v, neg_v).item() for _ in range(3)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
