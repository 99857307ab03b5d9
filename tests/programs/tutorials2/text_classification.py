# PyTorch tutorial "Text classification with the torchtext library"
# (nn.EmbeddingBag with offsets + Linear, a DataLoader with collate_fn,
# SGD lr=5, StepLR, clip_grad_norm_), on a synthetic AG_NEWS-like corpus
# (no torchtext: a whitespace tokenizer and a dict vocab); then the other
# EmbeddingBag modes, per_sample_weights, padding_idx, include_last_offset.
# Weights and data come from numpy so tracec and torch run the same numbers.
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader
from torch.utils.data.dataset import random_split

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

rng = np.random.default_rng(0)
topics = [["game", "team", "win", "score"], ["market", "stock", "price", "bank"],
          ["chip", "software", "phone", "web"], ["war", "election", "leader", "nation"]]
filler = ["the", "a", "of", "in", "on", "new", "says", "after", "over", "report"]


def make_split(n):
    out = []
    for _ in range(n):
        label = int(rng.integers(1, 5))
        k = int(rng.integers(3, 9))
        words = [topics[label - 1][int(i)] if rng.random() < 0.5 else filler[int(j)]
                 for i, j in zip(rng.integers(0, 4, k), rng.integers(0, 10, k))]
        out.append((label, " ".join(words)))
    return out


train_iter, test_iter = make_split(64), make_split(16)

tokenizer = str.split  # get_tokenizer("basic_english")
vocab = {"<unk>": 0}
for _, text in train_iter:
    for tok in tokenizer(text):
        vocab.setdefault(tok, len(vocab))

text_pipeline = lambda x: [vocab.get(t, 0) for t in tokenizer(x)]
label_pipeline = lambda x: int(x) - 1
print(text_pipeline("the stock market says hello"))


def collate_batch(batch):
    label_list, text_list, offsets = [], [], [0]
    for _label, _text in batch:
        label_list.append(label_pipeline(_label))
        processed_text = torch.tensor(text_pipeline(_text), dtype=torch.int64)
        text_list.append(processed_text)
        offsets.append(processed_text.size(0))
    label_list = torch.tensor(label_list, dtype=torch.int64)
    offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
    text_list = torch.cat(text_list)
    return label_list.to(device), text_list.to(device), offsets.to(device)


class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super(TextClassificationModel, self).__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
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


num_class = len(set([label for (label, text) in train_iter]))
vocab_size = len(vocab)
emsize = 8
model = TextClassificationModel(vocab_size, emsize, num_class).to(device)
g = np.random.default_rng(1)
with torch.no_grad():   # the tutorial's uniform_(-0.5, 0.5), from numpy
    model.embedding.weight.copy_(torch.from_numpy(g.uniform(-0.5, 0.5, (vocab_size, emsize)).astype(np.float32)))
    model.fc.weight.copy_(torch.from_numpy(g.uniform(-0.5, 0.5, (num_class, emsize)).astype(np.float32)))


def train(dataloader):
    model.train()
    total_acc, total_count = 0, 0
    log_interval = 2
    start_time = time.time()

    for idx, (label, text, offsets) in enumerate(dataloader):
        optimizer.zero_grad()
        predicted_label = model(text, offsets)
        loss = criterion(predicted_label, label)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        total_acc += (predicted_label.argmax(1) == label).sum().item()
        total_count += label.size(0)
        if idx % log_interval == 0 and idx > 0:
            elapsed = time.time() - start_time
            print(
                "| epoch {:3d} | {:5d}/{:5d} batches "
                "| accuracy {:8.3f} | loss {:8.5f}".format(
                    epoch, idx, len(dataloader), total_acc / total_count, loss.item()
                )
            )
            total_acc, total_count = 0, 0
            start_time = time.time()


def evaluate(dataloader):
    model.eval()
    total_acc, total_count = 0, 0

    with torch.no_grad():
        for idx, (label, text, offsets) in enumerate(dataloader):
            predicted_label = model(text, offsets)
            loss = criterion(predicted_label, label)
            total_acc += (predicted_label.argmax(1) == label).sum().item()
            total_count += label.size(0)
    return total_acc / total_count


# Hyperparameters
EPOCHS = 3  # epoch
LR = 5  # learning rate
BATCH_SIZE = 8  # batch size for training

criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=LR)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
total_accu = None
train_dataset = train_iter   # to_map_style_dataset(train_iter)
test_dataset = test_iter
num_train = int(len(train_dataset) * 0.95)
split_train_, split_valid_ = random_split(
    train_dataset, [num_train, len(train_dataset) - num_train]
)
print('split', len(split_train_), len(split_valid_))
# the tutorial shuffles; the numbers are compared with torch's, so in order here
train_dataloader = DataLoader(
    train_dataset, batch_size=BATCH_SIZE, shuffle=False, collate_fn=collate_batch
)
valid_dataloader = DataLoader(
    test_dataset, batch_size=BATCH_SIZE, shuffle=False, collate_fn=collate_batch
)
test_dataloader = DataLoader(
    test_dataset, batch_size=BATCH_SIZE, shuffle=False, collate_fn=collate_batch
)

for epoch in range(1, EPOCHS + 1):
    epoch_start_time = time.time()
    train(train_dataloader)
    accu_val = evaluate(valid_dataloader)
    if total_accu is not None and total_accu > accu_val:
        scheduler.step()
    else:
        total_accu = accu_val
    print("-" * 59)
    print(
        "| end of epoch {:3d} | "
        "valid accuracy {:8.3f} ".format(
            epoch, accu_val
        )
    )
    print("-" * 59)
    print('lr', scheduler.get_last_lr())

print("Checking the results of test dataset.")
accu_test = evaluate(test_dataloader)
print("test accuracy {:8.3f}".format(accu_test))

ag_news_label = {1: "World", 2: "Sports", 3: "Business", 4: "Sci/Tec"}


def predict(text, text_pipeline):
    with torch.no_grad():
        text = torch.tensor(text_pipeline(text))
        output = model(text, torch.tensor([0]))
        return output.argmax(1).item() + 1


ex_text_str = "the game team win after a score"
model = model.to("cpu")
print("This is a %s news" % ag_news_label[predict(ex_text_str, text_pipeline)])

# the other EmbeddingBag forms, forward and backward
W = torch.from_numpy(rng.standard_normal((10, 3)).astype(np.float32))
inp = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 7])
offs = torch.tensor([0, 4, 4, 7])
psw = torch.from_numpy(rng.uniform(0.5, 1.5, 10).astype(np.float32))
for mode in ("sum", "mean", "max"):
    for padding_idx in (None, 2):
        for last in (False, True):
            bag = nn.EmbeddingBag(10, 3, mode=mode, padding_idx=padding_idx,
                                  include_last_offset=last)
            with torch.no_grad():
                bag.weight.copy_(W)
            o = torch.cat([offs, torch.tensor([10])]) if last else offs
            y = bag(inp, o)
            y.pow(2).sum().backward()
            print(mode, padding_idx, last, tuple(y.shape), '%.5f' % y.sum().item(),
                  '%.5f' % bag.weight.grad.abs().sum().item())
    bag2 = nn.EmbeddingBag.from_pretrained(W, mode=mode, freeze=False, max_norm=None)
    y2 = bag2(inp.view(2, 5))
    print('2d', mode, tuple(y2.shape), '%.5f' % y2.sum().item())
bag = nn.EmbeddingBag.from_pretrained(W.clone(), freeze=False, max_norm=1.0, mode="mean")
y = bag(inp, offs)
print('max_norm', '%.5f' % y.sum().item(), '%.5f' % bag.weight.norm(dim=1).max().item())
bag = nn.EmbeddingBag(10, 3, mode="sum")
with torch.no_grad():
    bag.weight.copy_(W)
y = bag(inp, offs, per_sample_weights=psw.requires_grad_())
y.sum().backward()
print('psw', '%.5f' % y.sum().item(), '%.5f' % psw.grad.sum().item(),
      '%.5f' % bag.weight.grad.abs().sum().item())
y = torch.nn.functional.embedding_bag(inp, W, offs, mode="sum", per_sample_weights=psw.detach())
print('F.embedding_bag psw', '%.5f' % y.sum().item())
for bad in [lambda: nn.EmbeddingBag(10, 3, mode="mean")(inp, offs, per_sample_weights=psw),
            lambda: nn.EmbeddingBag(10, 3)(inp.view(2, 5), offs),
            lambda: nn.EmbeddingBag(10, 3)(inp),
            lambda: nn.EmbeddingBag(10, 3, mode="avg")]:
    try:
        bad()
        print('no error')
    except (ValueError, RuntimeError, NotImplementedError) as e:
        print(type(e).__name__, str(e).split('\n')[0])
print(nn.EmbeddingBag(10, 3, mode="max", padding_idx=0))
