# Shawn1993/cnn-text-classification-pytorch (model.py's CNN_Text: Embedding,
# Conv2d over the embedded sentence with (K, D) kernels, F.max_pool1d over
# time, dropout, one Linear; train.py's train / eval / predict / save with
# its in-place feature.t_() / target.sub_(1), size_average=False and the
# accuracy tensors; main.py's argparse options and parameter print), on a
# synthetic torchtext-like dataset (batches of (seq_len, batch) token ids
# and 1-based labels).  Weights and data come from numpy and the compared
# runs use -dropout 0 so tracec and torch compute the same numbers; a
# dropout run follows torch.manual_seed(0).  Then the training step under torch.compile
# against the same step run eagerly.
import argparse
import copy
import os
import sys

import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
import torch.autograd as autograd
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


# ---- model.py ----

class CNN_Text(nn.Module):

    def __init__(self, args):
        super(CNN_Text, self).__init__()
        self.args = args

        V = args.embed_num
        D = args.embed_dim
        C = args.class_num
        Ci = 1
        Co = args.kernel_num
        Ks = args.kernel_sizes

        self.embed = nn.Embedding(V, D)
        self.convs = nn.ModuleList([nn.Conv2d(Ci, Co, (K, D)) for K in Ks])
        '''
        self.conv13 = nn.Conv2d(Ci, Co, (3, D))
        self.conv14 = nn.Conv2d(Ci, Co, (4, D))
        self.conv15 = nn.Conv2d(Ci, Co, (5, D))
        '''
        self.dropout = nn.Dropout(args.dropout)
        self.fc1 = nn.Linear(len(Ks) * Co, C)

        if self.args.static:
            self.embed.weight.requires_grad = False

    def conv_and_pool(self, x, conv):
        x = F.relu(conv(x)).squeeze(3)  # (N, Co, W)
        x = F.max_pool1d(x, x.size(2)).squeeze(2)
        return x

    def forward(self, x):
        x = self.embed(x)  # (N, W, D)

        if self.args.static:
            x = Variable(x)

        x = x.unsqueeze(1)  # (N, Ci, W, D)

        x = [F.relu(conv(x)).squeeze(3) for conv in self.convs]  # [(N, Co, W), ...]*len(Ks)

        x = [F.max_pool1d(i, i.size(2)).squeeze(2) for i in x]  # [(N, Co), ...]*len(Ks)

        x = torch.cat(x, 1)

        '''
        x1 = self.conv_and_pool(x,self.conv13) #(N,Co)
        x2 = self.conv_and_pool(x,self.conv14) #(N,Co)
        x3 = self.conv_and_pool(x,self.conv15) #(N,Co)
        x = torch.cat((x1, x2, x3), 1) # (N,len(Ks)*Co)
        '''
        x = self.dropout(x)  # (N, len(Ks)*Co)
        logit = self.fc1(x)  # (N, C)
        return logit


# ---- train.py ----

def train(train_iter, dev_iter, model, args):
    if args.cuda:
        model.cuda()

    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    steps = 0
    best_acc = 0
    last_step = 0
    for epoch in range(1, args.epochs+1):
        for batch in train_iter:
            feature, target = batch.text, batch.label
            feature.t_(), target.sub_(1)  # batch first, index align
            if args.cuda:
                feature, target = feature.cuda(), target.cuda()

            optimizer.zero_grad()
            logit = model(feature)

            #print('logit vector', logit.size())
            #print('target vector', target.size())
            loss = F.cross_entropy(logit, target)
            loss.backward()
            optimizer.step()

            steps += 1
            if steps % args.log_interval == 0:
                corrects = (torch.max(logit, 1)[1].view(target.size()).data == target.data).sum()
                accuracy = 100.0 * corrects/batch.batch_size
                sys.stdout.write(
                    '\rBatch[{}] - loss: {:.6f}  acc: {:.4f}%({}/{})'.format(steps,
                                                                             loss.item(),
                                                                             accuracy.item(),
                                                                             corrects.item(),
                                                                             batch.batch_size))
            if steps % args.test_interval == 0:
                dev_acc = eval(dev_iter, model, args)
                if dev_acc > best_acc:
                    best_acc = dev_acc
                    last_step = steps
                    if args.save_best:
                        save(model, args.save_dir, 'best', steps)
                else:
                    if steps - last_step >= args.early_stop:
                        print('early stop by {} steps.'.format(args.early_stop))
            elif steps % args.save_interval == 0:
                save(model, args.save_dir, 'snapshot', steps)
    return optimizer


def eval(data_iter, model, args):
    model.eval()
    corrects, avg_loss = 0, 0
    for batch in data_iter:
        feature, target = batch.text, batch.label
        feature.t_(), target.sub_(1)  # batch first, index align
        if args.cuda:
            feature, target = feature.cuda(), target.cuda()

        logit = model(feature)
        loss = F.cross_entropy(logit, target, size_average=False)

        avg_loss += loss.item()
        corrects += (torch.max(logit, 1)
                     [1].view(target.size()).data == target.data).sum()

    size = len(data_iter.dataset)
    avg_loss /= size
    accuracy = 100.0 * corrects/size
    print('\nEvaluation - loss: {:.6f}  acc: {:.4f}%({}/{}) \n'.format(avg_loss,
                                                                       accuracy,
                                                                       corrects,
                                                                       size))
    model.train()
    return accuracy


def predict(text, model, text_field, label_feild, cuda_flag):
    assert isinstance(text, str)
    model.eval()
    # text = text_field.tokenize(text)
    text = text_field.preprocess(text)
    text = [[text_field.vocab.stoi[x] for x in text]]
    x = torch.tensor(text)
    x = autograd.Variable(x)
    if cuda_flag:
        x = x.cuda()
    print(x)
    output = model(x)
    _, predicted = torch.max(output, 1)
    return label_feild.vocab.itos[predicted.item()+1]


def save(model, save_dir, save_prefix, steps):
    if not os.path.isdir(save_dir):
        os.makedirs(save_dir)
    save_prefix = os.path.join(save_dir, save_prefix)
    save_path = '{}_{}.pt'.format(save_prefix, steps)
    torch.save(model.state_dict(), save_path)


# ---- a torchtext-like dataset made up from numpy ----

class Vocab:
    def __init__(self, itos):
        self.itos = itos
        self.stoi = {s: i for i, s in enumerate(itos)}

    def __len__(self):
        return len(self.itos)


class Field:
    def __init__(self, vocab):
        self.vocab = vocab

    def preprocess(self, text):
        return text.lower().split()


class Batch:
    def __init__(self, text, label):
        self.text, self.label, self.batch_size = text, label, label.size(0)


class Iterator:
    """Yields fresh (seq_len, batch) / 1-based label tensors each epoch, like
    torchtext's BucketIterator (train.py transposes and shifts them in place)."""
    def __init__(self, texts, labels, batch_size):
        self.dataset, self.texts, self.labels, self.batch_size = labels, texts, labels, batch_size

    def __iter__(self):
        for i in range(0, len(self.labels), self.batch_size):
            yield Batch(torch.from_numpy(self.texts[i:i + self.batch_size].T.copy()),
                        torch.from_numpy(self.labels[i:i + self.batch_size] + 1))

    def __len__(self):
        return (len(self.labels) + self.batch_size - 1) // self.batch_size


rng = np.random.default_rng(0)
words = ["<unk>", "<pad>"] + ["w%d" % i for i in range(30)]
text_field = Field(Vocab(words))
label_field = Field(Vocab(["<unk>", "negative", "positive"]))


def make_data(n, seq_len):
    labels = rng.integers(0, 2, n)
    texts = rng.integers(2, len(words), (n, seq_len))
    texts[labels == 1, rng.integers(0, seq_len - 2)] = 5  # "w3" marks a positive sentence
    return texts, labels


train_texts, train_labels = make_data(24, 9)
dev_texts, dev_labels = make_data(10, 9)
train_iter = Iterator(train_texts, train_labels, 8)
dev_iter = Iterator(dev_texts, dev_labels, 5)

# ---- main.py ----

parser = argparse.ArgumentParser(description='CNN text classificer')
# learning
parser.add_argument('-lr', type=float, default=0.001, help='initial learning rate [default: 0.001]')
parser.add_argument('-epochs', type=int, default=256, help='number of epochs for train [default: 256]')
parser.add_argument('-batch-size', type=int, default=64, help='batch size for training [default: 64]')
parser.add_argument('-log-interval',  type=int, default=1,   help='how many steps to wait before logging training status [default: 1]')
parser.add_argument('-test-interval', type=int, default=100, help='how many steps to wait before testing [default: 100]')
parser.add_argument('-save-interval', type=int, default=500, help='how many steps to wait before saving [default:500]')
parser.add_argument('-save-dir', type=str, default='snapshot', help='where to save the snapshot')
parser.add_argument('-early-stop', type=int, default=1000, help='iteration numbers to stop without performance increasing')
parser.add_argument('-save-best', type=bool, default=True, help='whether to save when get best performance')
# data
parser.add_argument('-shuffle', action='store_true', default=False, help='shuffle the data every epoch')
# model
parser.add_argument('-dropout', type=float, default=0.5, help='the probability for dropout [default: 0.5]')
parser.add_argument('-max-norm', type=float, default=3.0, help='l2 constraint of parameters [default: 3.0]')
parser.add_argument('-embed-dim', type=int, default=128, help='number of embedding dimension [default: 128]')
parser.add_argument('-kernel-num', type=int, default=100, help='number of each kind of kernel')
parser.add_argument('-kernel-sizes', type=str, default='3,4,5', help='comma-separated kernel size to use for convolution')
parser.add_argument('-static', action='store_true', default=False, help='fix the embedding')
# device
parser.add_argument('-device', type=int, default=-1, help='device to use for iterate data, -1 mean cpu [default: -1]')
parser.add_argument('-no-cuda', action='store_true', default=False, help='disable the gpu')
# option
parser.add_argument('-snapshot', type=str, default=None, help='filename of model snapshot [default: None]')
parser.add_argument('-predict', type=str, default=None, help='predict the sentence given')
parser.add_argument('-test', action='store_true', default=False, help='train or test')
args = parser.parse_args(['-epochs', '3', '-batch-size', '8', '-test-interval', '3', '-save-interval', '4',
                          '-dropout', '0', '-embed-dim', '16', '-kernel-num', '6', '-lr', '0.01'])

# update args and print
args.embed_num = len(text_field.vocab)
args.class_num = len(label_field.vocab) - 1
args.cuda = (not args.no_cuda) and torch.cuda.is_available(); del args.no_cuda
args.kernel_sizes = [int(k) for k in args.kernel_sizes.split(',')]
args.save_dir = os.path.join(args.save_dir, 'run')

print("\nParameters:")
for attr, value in sorted(args.__dict__.items()):
    print("\t{}={}".format(attr.upper(), value))


def numpy_init(model, seed):
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = 1.0 if name.startswith("embed") else (0.1 if p.dim() == 1 else p[0].numel() ** -0.5)
            p.copy_(torch.from_numpy((std * g.standard_normal(p.shape)).astype(np.float32)))
    return model


# model
cnn = numpy_init(CNN_Text(args), 1)
print(cnn)

# one batch through the model: shapes, pooled features, gradients
x = torch.from_numpy(train_texts[:4])
emb = cnn.embed(x).unsqueeze(1)
convs = [F.relu(conv(emb)).squeeze(3) for conv in cnn.convs]
print("conv outputs", [tuple(c.shape) for c in convs])
pooled = [F.max_pool1d(i, i.size(2)).squeeze(2) for i in convs]
print("pooled", [f"{v:.5f}" for v in torch.cat(pooled, 1)[0].tolist()])
print("conv_and_pool", torch.equal(cnn.conv_and_pool(emb, cnn.convs[1]), pooled[1]))
logit = cnn(x)
loss = F.cross_entropy(logit, torch.from_numpy(train_labels[:4]))
loss.backward()
print(f"loss {loss.item():.6f}")
for name, p in cnn.named_parameters():
    print(f"grad {name} {tuple(p.shape)} {p.grad.norm().item():.5e}")
cnn.zero_grad()

optimizer = train(train_iter, dev_iter, cnn, args)
print()
print("saved", sorted(os.listdir(args.save_dir)))
state = torch.load(os.path.join(args.save_dir, 'snapshot_4.pt'))
print("snapshot", list(state)[:3], tuple(state['fc1.weight'].shape))
print("predict:", predict("w3 w7 W9 w11 w3 w0 w2", cnn, text_field, label_field, args.cuda))
cnn.train()

# the embedding fixed (-static)
static_args = copy.copy(args)
static_args.static = True
static = numpy_init(CNN_Text(static_args), 2)
out = static(x)
out.sum().backward()
print("static", static.embed.weight.requires_grad, static.embed.weight.grad is None,
      f"{static.convs[0].weight.grad.norm().item():.5e}")

# the training step under torch.compile against the same step run eagerly
feature = torch.from_numpy(train_texts[:8])
target = torch.from_numpy(train_labels[:8])


def train_step(feature, target):
    optimizer.zero_grad()
    logit = cnn(feature)
    loss = F.cross_entropy(logit, target)
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(cnn.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(feature, target).item() for _ in range(3)]
after = copy.deepcopy(cnn.state_dict())
cnn.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(feature, target).item() for _ in range(3)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(cnn.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))

# with the default dropout (0.5): the draws differ between tracec and torch
args.dropout = 0.5
drop = numpy_init(CNN_Text(args), 3)
print("dropout loss", f"{F.cross_entropy(drop(feature), target).item():.4f}")
