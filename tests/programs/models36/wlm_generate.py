# pytorch/examples word_language_model as the repo writes it, from training
# to generate.py: data.py's Dictionary / Corpus (add_word, tokenize with
# '<eos>' appended, torch.tensor(idss).type(torch.int64) rows torch.cat'ed),
# main.py's batchify (narrow / view(bsz, -1).t().contiguous()), get_batch,
# repackage_hidden, model.py's RNNModel (Embedding, nn.Dropout, nn.LSTM with
# dropout, Linear decoder, init_weights with uniform_ / zeros_, log_softmax
# output, init_hidden from weight.new_zeros), NLLLoss, clip_grad_norm_, the
# manual p.data.add_(p.grad, alpha=-lr) update, evaluate under torch.no_grad
# and the lr /= 4.0 anneal; then generate.py: torch.manual_seed(args.seed),
# input = torch.randint(ntokens, (1, 1), dtype=torch.long),
# word_weights = output.squeeze().div(args.temperature).exp(),
# word_idx = torch.multinomial(word_weights, 1)[0], input.fill_(word_idx),
# and the idx2word lookup with a newline every 20 words. Changes for a CPU
# test: the corpus is a few built-in sentences written to a temp folder,
# emsize = nhid = 16, bptt 8, 2 epochs, the model kept in memory rather than
# torch.save'd / torch.load'ed, generation written to stdout; then one
# training step under torch.compile (in eval mode: a compiled step's dropout
# draws differ from eager ones) against the same step eagerly.
import argparse
import copy
import math
import os
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

TEXT = """the cat sat on the mat and the dog sat on the log
a bird sang in the tree while the cat watched the bird
the dog ran to the tree and the bird flew away
on the mat the cat slept and the dog slept on the log
the bird came back to the tree and sang again
"""


class Dictionary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus(object):
    def __init__(self, path):
        self.dictionary = Dictionary()
        self.train = self.tokenize(os.path.join(path, 'train.txt'))
        self.valid = self.tokenize(os.path.join(path, 'valid.txt'))
        self.test = self.tokenize(os.path.join(path, 'test.txt'))

    def tokenize(self, path):
        """Tokenizes a text file."""
        assert os.path.exists(path)
        # Add words to the dictionary
        with open(path, 'r', encoding="utf8") as f:
            for line in f:
                words = line.split() + ['<eos>']
                for word in words:
                    self.dictionary.add_word(word)

        # Tokenize file content
        with open(path, 'r', encoding="utf8") as f:
            idss = []
            for line in f:
                words = line.split() + ['<eos>']
                ids = []
                for word in words:
                    ids.append(self.dictionary.word2idx[word])
                idss.append(torch.tensor(ids).type(torch.int64))
            ids = torch.cat(idss)

        return ids


class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ['LSTM', 'GRU']:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            try:
                nonlinearity = {'RNN_TANH': 'tanh', 'RNN_RELU': 'relu'}[rnn_type]
            except KeyError as e:
                raise ValueError("""An invalid option for `--model` was supplied,
                                 options are ['LSTM', 'GRU', 'RNN_TANH' or 'RNN_RELU']""") from e
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)

        if tie_weights:
            if nhid != ninp:
                raise ValueError('When using the tied flag, nhid must be equal to emsize')
            self.decoder.weight = self.encoder.weight

        self.init_weights()

        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == 'LSTM':
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        else:
            return weight.new_zeros(self.nlayers, bsz, self.nhid)


parser = argparse.ArgumentParser(description='PyTorch Wikitext-2 RNN/LSTM/GRU/Transformer Language Model')
parser.add_argument('--model', type=str, default='LSTM')
parser.add_argument('--emsize', type=int, default=16)
parser.add_argument('--nhid', type=int, default=16)
parser.add_argument('--nlayers', type=int, default=2)
parser.add_argument('--lr', type=float, default=20)
parser.add_argument('--clip', type=float, default=0.25)
parser.add_argument('--epochs', type=int, default=2)
parser.add_argument('--batch_size', type=int, default=4, metavar='N')
parser.add_argument('--bptt', type=int, default=8)
parser.add_argument('--dropout', type=float, default=0.2)
parser.add_argument('--tied', action='store_true')
parser.add_argument('--seed', type=int, default=1111)
parser.add_argument('--log-interval', type=int, default=2, metavar='N')
parser.add_argument('--words', type=int, default=40)
parser.add_argument('--temperature', type=float, default=1.0)
args = parser.parse_args([])

# Set the random seed manually for reproducibility.
torch.manual_seed(args.seed)
device = torch.device("cpu")

data_dir = tempfile.mkdtemp()
lines = TEXT.splitlines(keepends=True)
for name, part in [('train.txt', lines * 3), ('valid.txt', lines[:2]), ('test.txt', lines[2:4])]:
    with open(os.path.join(data_dir, name), 'w', encoding='utf8') as f:
        f.writelines(part)
corpus = Corpus(data_dir)


def batchify(data, bsz):
    # Work out how cleanly we can divide the dataset into bsz parts.
    nbatch = data.size(0) // bsz
    # Trim off any extra elements that wouldn't cleanly fit (remainders).
    data = data.narrow(0, 0, nbatch * bsz)
    # Evenly divide the data across the bsz batches.
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


eval_batch_size = 2
train_data = batchify(corpus.train, args.batch_size)
val_data = batchify(corpus.valid, eval_batch_size)
test_data = batchify(corpus.test, eval_batch_size)
print('vocab', len(corpus.dictionary), 'train', tuple(train_data.shape), 'valid', tuple(val_data.shape))

ntokens = len(corpus.dictionary)
model = RNNModel(args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied).to(device)
criterion = nn.NLLLoss()


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    data = source[i:i+seq_len]
    target = source[i+1:i+1+seq_len].view(-1)
    return data, target


def evaluate(data_source):
    # Turn on evaluation mode which disables dropout.
    model.eval()
    total_loss = 0.
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train():
    # Turn on training mode which enables dropout.
    model.train()
    total_loss = 0.
    ntokens = len(corpus.dictionary)
    hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i)
        # Starting each batch, we detach the hidden state from how it was previously produced.
        # If we didn't, the model would try backpropagating all the way to start of the dataset.
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()

        # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)

        total_loss += loss.item()

        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss / args.log_interval
            print('| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | loss {:5.2f} | ppl {:8.2f}'.format(
                epoch, batch, len(train_data) // args.bptt, lr, cur_loss, math.exp(cur_loss)))
            total_loss = 0


lr = args.lr
best_val_loss = None
for epoch in range(1, args.epochs+1):
    epoch_start_time = time.time()
    train()
    val_loss = evaluate(val_data)
    print('-' * 89)
    print('| end of epoch {:3d} | valid loss {:5.2f} | valid ppl {:8.2f}'.format(epoch, val_loss, math.exp(val_loss)))
    print('-' * 89)
    if not best_val_loss or val_loss < best_val_loss:
        best_val_loss = val_loss
        best_model = copy.deepcopy(model)
    else:
        # Anneal the learning rate if no improvement has been seen in the validation dataset.
        lr /= 4.0
model = best_model
test_loss = evaluate(test_data)
print('| End of training | test loss {:5.2f} | test ppl {:8.2f}'.format(test_loss, math.exp(test_loss)))

# generate.py
torch.manual_seed(args.seed)
model.eval()
is_transformer_model = hasattr(model, 'model_type') and model.model_type == 'Transformer'
if not is_transformer_model:
    hidden = model.init_hidden(1)
input = torch.randint(ntokens, (1, 1), dtype=torch.long).to(device)

words = []
with torch.no_grad():  # no tracking history
    for i in range(args.words):
        output, hidden = model(input, hidden)
        word_weights = output.squeeze().div(args.temperature).exp().cpu()
        word_idx = torch.multinomial(word_weights, 1)[0]
        input.fill_(word_idx)

        word = corpus.dictionary.idx2word[word_idx]

        words.append(word + ('\n' if i % 20 == 19 else ' '))
        if i % 10 == 0:
            print('| Generated {}/{} words'.format(i, args.words))
print(''.join(words))

# one training step under torch.compile against the same step eagerly
model.eval()
data, targets = get_batch(train_data, 0)
hidden0 = model.init_hidden(args.batch_size)


def train_step(data, targets, hidden):
    model.zero_grad()
    output, hidden = model(data, hidden)
    loss = criterion(output, targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    return loss


state = copy.deepcopy(model.state_dict())
eager = [train_step(data, targets, hidden0).item() for _ in range(3)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
cstep = torch.compile(train_step)
compiled = [cstep(data, targets, hidden0).item() for _ in range(3)]
print("compiled losses", ["{:.4f}".format(v) for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
