# fastText as PyTorch programs write it: the PyTorch tutorial's
# text_sentiment_ngrams_tutorial.py (TextSentiment: nn.EmbeddingBag(sparse=True) over
# the concatenated token ids with offsets from cumsum, init_weights, generate_batch,
# train_func / test with SGD lr=4.0 on sparse gradients and StepLR, predict), torchtext's
# ngrams_iterator and basic_english tokenizer, and facebookresearch/fastText's hashing
# of word n-grams into buckets (dictionary.cc's FNV-1a hash with int8 characters and
# addWordNgrams' h * 116049371 + hashes[j]), with EmbeddingBag's other forms (mode
# 'mean' / 'max' / 'sum' with per_sample_weights, include_last_offset, padding_idx, 2-D
# input, F.embedding_bag).  Changes for a CPU test: a synthetic AG_NEWS-like corpus,
# vocabulary built in Python, NGRAMS 2, EMBED_DIM 8, a 2000-bucket hash table, 3 epochs,
# no random_split (a fixed split) and no shuffling; weights come from numpy.  Then the
# training step under torch.compile against the same step run eagerly.
import copy
import re
import time
from collections import Counter

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

# ---- torchtext.data.utils ----
_patterns = [r"\'", r"\"", r"\.", r"<br \/>", r",", r"\(", r"\)", r"\!", r"\?", r"\;", r"\:", r"\s+"]
_replacements = [" '  ", "", " . ", " ", " , ", " ( ", " ) ", " ! ", " ? ", " ", " ", " "]
_patterns_dict = list((re.compile(p), r) for p, r in zip(_patterns, _replacements))


def _basic_english_normalize(line):
    line = line.lower()
    for pattern_re, replaced_str in _patterns_dict:
        line = pattern_re.sub(replaced_str, line)
    return line.split()


def get_tokenizer(tokenizer):
    assert tokenizer == "basic_english"
    return _basic_english_normalize


def ngrams_iterator(token_list, ngrams):
    def _get_ngrams(n):
        return zip(*[token_list[i:] for i in range(n)])

    for x in token_list:
        yield x
    for n in range(2, ngrams + 1):
        for x in _get_ngrams(n):
            yield ' '.join(x)


# ---- fastText's dictionary.cc hashing ----
def fasttext_hash(s):
    h = 2166136261
    for c in s.encode("utf-8"):
        c = c - 256 if c > 127 else c                  # uint32_t(int8_t(str[i]))
        h = (h ^ (c & 0xFFFFFFFF)) & 0xFFFFFFFF
        h = (h * 16777619) & 0xFFFFFFFF
    return h


def add_word_ngrams(line, hashes, n, nwords, bucket):
    for i in range(len(hashes)):
        h = hashes[i]
        for j in range(i + 1, min(len(hashes), i + n)):
            h = (h * 116049371 + hashes[j]) & 0xFFFFFFFFFFFFFFFF
            line.append(nwords + h % bucket)
    return line


# ---- synthetic AG_NEWS: (label, text) with 4 classes ----
topics = [["stocks", "market", "shares", "profit", "bank", "trade"],
          ["game", "team", "season", "coach", "win", "league"],
          ["software", "computer", "internet", "chip", "web", "phone"],
          ["president", "minister", "election", "war", "talks", "government"]]
filler = ["the", "a", "of", "to", "in", "on", "said", "new", "after", "for"]
g = np.random.default_rng(0)


def make_text(label):
    words = [topics[label][i] if g.random() < 0.5 else filler[i % 10]
             for i in g.integers(0, 6, g.integers(5, 12))]
    return " ".join(words).capitalize() + (". " if g.random() < 0.5 else "! ") + "(Reuters)"


train_raw = [(i % 4 + 1, make_text(i % 4)) for i in range(96)]
test_raw = [(i % 4 + 1, make_text(i % 4)) for i in range(32)]
NGRAMS = 2
tokenizer = get_tokenizer("basic_english")
print(tokenizer(train_raw[0][1]), list(ngrams_iterator(["a", "b", "c"], 2)))

counter = Counter()
for _, text in train_raw:
    counter.update(ngrams_iterator(tokenizer(text), NGRAMS))
itos = ["<unk>"] + sorted(counter)
vocab = {w: i for i, w in enumerate(itos)}


def encode(text):
    return torch.tensor([vocab.get(token, 0) for token in ngrams_iterator(tokenizer(text), NGRAMS)])


train_dataset = [(label - 1, encode(text)) for label, text in train_raw]
test_dataset = [(label - 1, encode(text)) for label, text in test_raw]
VOCAB_SIZE = len(vocab)
print("vocab", VOCAB_SIZE, "first", train_dataset[0][1][:6].tolist())


class TextSentiment(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=True)
        self.fc = nn.Linear(embed_dim, num_class)
        self.init_weights()

    def init_weights(self):
        initrange = 0.5
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.fc.weight.data.uniform_(-initrange, initrange)
        self.fc.bias.data.zero_()

    def forward(self, text, offsets):
        embedded = self.embedding(text, offsets)
        return self.fc(embedded)


EMBED_DIM = 8
NUN_CLASS = 4
model = TextSentiment(VOCAB_SIZE, EMBED_DIM, NUN_CLASS)
print("init", model.embedding.weight.abs().max().item() <= 0.5, model.fc.bias.abs().sum().item(),
      model.embedding.mode, model.embedding.sparse)
r = np.random.default_rng(1)
with torch.no_grad():
    model.embedding.weight.copy_(torch.from_numpy(r.uniform(-0.5, 0.5, (VOCAB_SIZE, EMBED_DIM)).astype(np.float32)))
    model.fc.weight.copy_(torch.from_numpy(r.uniform(-0.5, 0.5, (NUN_CLASS, EMBED_DIM)).astype(np.float32)))


def generate_batch(batch):
    label = torch.tensor([entry[0] for entry in batch])
    text = [entry[1] for entry in batch]
    offsets = [0] + [len(entry) for entry in text]
    # torch.Tensor.cumsum returns the cumulative sum
    # of elements in the dimension dim.
    # torch.Tensor([1.0, 2.0, 3.0]).cumsum(dim=0)

    offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
    text = torch.cat(text)
    return text, offsets, label


BATCH_SIZE = 16
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train_func(sub_train_):

    # Train the model
    train_loss = 0
    train_acc = 0
    data = DataLoader(sub_train_, batch_size=BATCH_SIZE, shuffle=False,
                      collate_fn=generate_batch)
    for i, (text, offsets, cls) in enumerate(data):
        optimizer.zero_grad()
        text, offsets, cls = text.to(device), offsets.to(device), cls.to(device)
        output = model(text, offsets)
        loss = criterion(output, cls)
        train_loss += loss.item()
        loss.backward()
        optimizer.step()
        train_acc += (output.argmax(1) == cls).sum().item()

    # Adjust the learning rate
    scheduler.step()

    return train_loss / len(sub_train_), train_acc / len(sub_train_)


def test(data_):
    loss = 0
    acc = 0
    data = DataLoader(data_, batch_size=BATCH_SIZE, collate_fn=generate_batch)
    for text, offsets, cls in data:
        text, offsets, cls = text.to(device), offsets.to(device), cls.to(device)
        with torch.no_grad():
            output = model(text, offsets)
            loss = criterion(output, cls)
            loss += loss.item()
            acc += (output.argmax(1) == cls).sum().item()

    return loss / len(data_), acc / len(data_)


N_EPOCHS = 3
min_valid_loss = float('inf')

criterion = torch.nn.CrossEntropyLoss().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=4.0)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.9)

train_len = int(len(train_dataset) * 0.95)
sub_train_, sub_valid_ = train_dataset[:train_len], train_dataset[train_len:]

for epoch in range(N_EPOCHS):

    start_time = time.time()
    train_loss, train_acc = train_func(sub_train_)
    valid_loss, valid_acc = test(sub_valid_)

    secs = int(time.time() - start_time)
    mins = secs / 60
    secs = secs % 60

    print('Epoch: %d' % (epoch + 1), " | [rng] time in %d minutes, %d seconds" % (mins, secs))
    print(f'\tLoss: {train_loss:.4f}(train)\t|\tAcc: {train_acc * 100:.1f}%(train)')
    print(f'\tLoss: {valid_loss:.4f}(valid)\t|\tAcc: {valid_acc * 100:.1f}%(valid)')

print('Checking the results of test dataset...')
test_loss, test_acc = test(test_dataset)
print(f'\tLoss: {test_loss:.4f}(test)\t|\tAcc: {test_acc * 100:.1f}%(test)')
# (tracec's sparse gradients are dense tensors of the same values: is_sparse is not printed)
print("embedding grad", f"{model.embedding.weight.grad.to_dense().abs().sum().item():.5f}",
      "lr", scheduler.get_last_lr())

ag_news_label = {1: "World", 2: "Sports", 3: "Business", 4: "Sci/Tec"}


def predict(text, model, vocab, ngrams):
    tokenizer = get_tokenizer("basic_english")
    with torch.no_grad():
        text = torch.tensor([vocab.get(token, 0)
                             for token in ngrams_iterator(tokenizer(text), ngrams)])
        output = model(text, torch.tensor([0]))
        return output.argmax(1).item() + 1


ex_text_str = "The team won the league after a great season, the coach said."
print("This is a %s news" % ag_news_label[predict(ex_text_str, model, vocab, 2)])

# fastText's hashed word n-grams: ids = word ids + bucketed bigram hashes
bucket = 2000
words = tokenizer(ex_text_str)
word_ids = [vocab.get(w, 0) for w in words]
hashes = [fasttext_hash(w) for w in words]
print("hash", fasttext_hash("team"), fasttext_hash("é"), hashes[:2])
line = add_word_ngrams(list(word_ids), hashes, 2, VOCAB_SIZE, bucket)
print("fastText ids", line[len(word_ids):len(word_ids) + 4])
ft = nn.EmbeddingBag(VOCAB_SIZE + bucket, EMBED_DIM, mode='mean')
with torch.no_grad():
    ft.weight.copy_(torch.from_numpy(r.standard_normal((VOCAB_SIZE + bucket, EMBED_DIM)).astype(np.float32)))
x = torch.tensor(line)
print("mean bag", [f"{v:.4f}" for v in ft(x, torch.tensor([0, len(word_ids)]))[1].tolist()[:4]])

# EmbeddingBag's other forms
inp = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
offsets = torch.tensor([0, 4, 4])                        # an empty bag in the middle
bag_sum = nn.EmbeddingBag(10, 3, mode='sum')
bag_max = nn.EmbeddingBag(10, 3, mode='max')
bag_pad = nn.EmbeddingBag(10, 3, mode='mean', padding_idx=2)
with torch.no_grad():
    w = torch.from_numpy(r.standard_normal((10, 3)).astype(np.float32))
    for b in (bag_sum, bag_max, bag_pad):
        b.weight.copy_(w)
psw = torch.from_numpy(r.random(8).astype(np.float32))
print("sum psw", [f"{v:.4f}" for v in bag_sum(inp, offsets, per_sample_weights=psw).flatten().tolist()])
print("max", [f"{v:.4f}" for v in bag_max(inp, offsets).flatten().tolist()])
print("padding_idx", [f"{v:.4f}" for v in bag_pad(inp, offsets).flatten().tolist()])
print("2-D input", [f"{v:.4f}" for v in bag_pad(inp.view(2, 4)).flatten().tolist()])
print("include_last_offset", [f"{v:.4f}" for v in F.embedding_bag(
    inp, w, torch.tensor([0, 3, 8]), mode='mean', include_last_offset=True).flatten().tolist()])
print("from_pretrained", nn.EmbeddingBag.from_pretrained(w, freeze=True).weight.requires_grad,
      nn.EmbeddingBag.from_pretrained(w, mode='max').mode)
ws = w.clone().requires_grad_()
F.embedding_bag(inp, ws, offsets, mode='max').sum().backward()
print("max grad", ws.grad.sum(1).tolist())

# the training step under torch.compile against the same step run eagerly
text, offsets, cls = generate_batch(sub_train_[:BATCH_SIZE])


def train_step(text, offsets, cls):
    optimizer.zero_grad()
    output = model(text, offsets)
    loss = criterion(output, cls)
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(text, offsets, cls).item() for _ in range(3)]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(text, offsets, cls).item() for _ in range(3)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
