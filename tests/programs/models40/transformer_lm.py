# PyTorch tutorial "Language Modeling with nn.Transformer and torchtext"
# (beginner/transformer_tutorial), written the way the tutorial has it:
# TransformerModel (nn.TransformerEncoderLayer(d_model, nhead, d_hid,
# dropout) stacked by nn.TransformerEncoder, the embedding scaled by
# math.sqrt(self.d_model), init_weights' .data.uniform_ / .data.zero_),
# PositionalEncoding with register_buffer('pe', pe) of shape
# [max_len, 1, d_model], generate_square_subsequent_mask via
# torch.triu(torch.ones(sz, sz) * float('-inf'), diagonal=1), batchify's
# view(bsz, seq_len).t().contiguous(), get_batch with bptt, the train loop
# with clip_grad_norm_(model.parameters(), 0.5), SGD lr=5.0 with
# StepLR(optimizer, 1.0, gamma=0.95) and its get_last_lr(), evaluate under
# torch.no_grad() weighting by seq_len, math.exp perplexities, and the best
# model kept with torch.save(model.state_dict(), ...) in a
# TemporaryDirectory and restored by load_state_dict(torch.load(...)).
# Changes for a CPU test: a small inline corpus split on whitespace after
# lower-casing (torchtext's basic_english tokenizer, WikiText2 and
# build_vocab_from_iterator replaced by a Counter-ordered vocabulary with
# '<unk>' first), emsize=d_hid=16, nhead=2, nlayers=2, bptt=8, batch sizes
# 4 / 2, 3 epochs logging every 2 batches, no timings printed, and one
# training step of the model in eval mode (no dropout) under torch.compile
# checked against the same step eagerly.
import math
import os
from collections import Counter
from tempfile import TemporaryDirectory
from typing import Tuple

import torch
from torch import nn, Tensor
from torch.nn import TransformerEncoder, TransformerEncoderLayer

torch.manual_seed(0)


class TransformerModel(nn.Module):

    def __init__(self, ntoken: int, d_model: int, nhead: int, d_hid: int,
                 nlayers: int, dropout: float = 0.5):
        super().__init__()
        self.model_type = 'Transformer'
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        encoder_layers = TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = TransformerEncoder(encoder_layers, nlayers)
        self.encoder = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.decoder = nn.Linear(d_model, ntoken)

        self.init_weights()

    def init_weights(self) -> None:
        initrange = 0.1
        self.encoder.weight.data.uniform_(-initrange, initrange)
        self.decoder.bias.data.zero_()
        self.decoder.weight.data.uniform_(-initrange, initrange)

    def forward(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """
        Arguments:
            src: Tensor, shape ``[seq_len, batch_size]``
            src_mask: Tensor, shape ``[seq_len, seq_len]``

        Returns:
            output Tensor of shape ``[seq_len, batch_size, ntoken]``
        """
        src = self.encoder(src) * math.sqrt(self.d_model)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, src_mask)
        output = self.decoder(output)
        return output


def generate_square_subsequent_mask(sz: int) -> Tensor:
    """Generates an upper-triangular matrix of ``-inf``, with zeros on ``diag``."""
    return torch.triu(torch.ones(sz, sz) * float('-inf'), diagonal=1)


class PositionalEncoding(nn.Module):

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)

        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer('pe', pe)

    def forward(self, x: Tensor) -> Tensor:
        """
        Arguments:
            x: Tensor, shape ``[seq_len, batch_size, embedding_dim]``
        """
        x = x + self.pe[:x.size(0)]
        return self.dropout(x)


# ---- Load and batch data ----
CORPUS = {
    'train': """the quick brown fox jumps over the lazy dog .
a language model assigns a probability to the next word given the words before it .
the transformer encoder attends to every earlier position through a causal mask .
positional encodings add sines and cosines of different frequencies to the embeddings .
the model is trained with stochastic gradient descent and a step learning rate schedule .
gradients are clipped to a norm of one half before every step of the optimizer .
the dog sleeps while the fox runs over the hill and the model reads the words .""".splitlines(),
    'valid': """the fox reads the words before the dog .
a model attends to the next word through the mask .""".splitlines(),
    'test': """the lazy dog jumps over the quick brown fox .
the encoder is trained with a causal mask and the optimizer .""".splitlines(),
}


def tokenizer(line):
    return line.lower().split()


counter = Counter(tok for line in CORPUS['train'] for tok in tokenizer(line))
itos = ['<unk>'] + [tok for tok, _ in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))]
stoi = {tok: i for i, tok in enumerate(itos)}


def vocab(tokens):
    return [stoi.get(tok, stoi['<unk>']) for tok in tokens]


def data_process(raw_text_iter) -> Tensor:
    """Converts raw text into a flat Tensor."""
    data = [torch.tensor(vocab(tokenizer(item)), dtype=torch.long) for item in raw_text_iter]
    return torch.cat(tuple(filter(lambda t: t.numel() > 0, data)))


# ``train_iter`` was "consumed" by the process of building the vocab,
# so we have to create it again
train_data = data_process(CORPUS['train'])
val_data = data_process(CORPUS['valid'])
test_data = data_process(CORPUS['test'])

device = torch.device('cpu')


def batchify(data: Tensor, bsz: int) -> Tensor:
    """Divides the data into ``bsz`` separate sequences, removing extra elements
    that wouldn't cleanly fit.

    Arguments:
        data: Tensor, shape ``[N]``
        bsz: int, batch size

    Returns:
        Tensor of shape ``[N // bsz, bsz]``
    """
    seq_len = data.size(0) // bsz
    data = data[:seq_len * bsz]
    data = data.view(bsz, seq_len).t().contiguous()
    return data.to(device)


batch_size = 4
eval_batch_size = 2
train_data = batchify(train_data, batch_size)  # shape ``[seq_len, batch_size]``
val_data = batchify(val_data, eval_batch_size)
test_data = batchify(test_data, eval_batch_size)
print('vocab', len(itos), 'train', tuple(train_data.shape), 'val', tuple(val_data.shape),
      'test', tuple(test_data.shape))
print(train_data[:3])

bptt = 8


def get_batch(source: Tensor, i: int) -> Tuple[Tensor, Tensor]:
    """
    Arguments:
        source: Tensor, shape ``[full_seq_len, batch_size]``
        i: int

    Returns:
        tuple (data, target), where data has shape ``[seq_len, batch_size]`` and
        target has shape ``[seq_len * batch_size]``
    """
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].reshape(-1)
    return data, target


# ---- Initiate an instance ----
ntokens = len(itos)  # size of vocabulary
emsize = 16  # embedding dimension
d_hid = 16  # dimension of the feedforward network model in ``nn.TransformerEncoder``
nlayers = 2  # number of ``nn.TransformerEncoderLayer`` in ``nn.TransformerEncoder``
nhead = 2  # number of heads in ``nn.MultiheadAttention``
dropout = 0.2  # dropout probability
model = TransformerModel(ntokens, emsize, nhead, d_hid, nlayers, dropout).to(device)
print('parameters', sum(p.numel() for p in model.parameters()))
print('pe', model.pos_encoder.pe.shape, list(model.state_dict().keys())[:3])

# ---- Run the model ----
criterion = nn.CrossEntropyLoss()
lr = 5.0  # learning rate
optimizer = torch.optim.SGD(model.parameters(), lr=lr)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.95)


def train(model: nn.Module) -> None:
    model.train()  # turn on train mode
    total_loss = 0.
    log_interval = 2
    src_mask = generate_square_subsequent_mask(bptt).to(device)

    num_batches = len(train_data) // bptt
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i)
        seq_len = data.size(0)
        if seq_len != bptt:  # only on last batch
            src_mask = src_mask[:seq_len, :seq_len]
        output = model(data, src_mask)
        loss = criterion(output.view(-1, ntokens), targets)

        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()

        total_loss += loss.item()
        if batch % log_interval == 0 and batch > 0:
            lr = scheduler.get_last_lr()[0]
            cur_loss = total_loss / log_interval
            ppl = math.exp(cur_loss)
            print(f'| epoch {epoch:3d} | {batch:5d}/{num_batches:5d} batches | '
                  f'lr {lr:02.2f} | '
                  f'loss {cur_loss:5.2f} | ppl {ppl:8.2f}')
            total_loss = 0


def evaluate(model: nn.Module, eval_data: Tensor) -> float:
    model.eval()  # turn on evaluation mode
    total_loss = 0.
    src_mask = generate_square_subsequent_mask(bptt).to(device)
    with torch.no_grad():
        for i in range(0, eval_data.size(0) - 1, bptt):
            data, targets = get_batch(eval_data, i)
            seq_len = data.size(0)
            if seq_len != bptt:
                src_mask = src_mask[:seq_len, :seq_len]
            output = model(data, src_mask)
            output_flat = output.view(-1, ntokens)
            total_loss += seq_len * criterion(output_flat, targets).item()
    return total_loss / (len(eval_data) - 1)


best_val_loss = float('inf')
epochs = 3

with TemporaryDirectory() as tempdir:
    best_model_params_path = os.path.join(tempdir, "best_model_params.pt")

    for epoch in range(1, epochs + 1):
        train(model)
        val_loss = evaluate(model, val_data)
        val_ppl = math.exp(val_loss)
        print('-' * 89)
        print(f'| end of epoch {epoch:3d} | '
              f'valid loss {val_loss:5.2f} | valid ppl {val_ppl:8.2f}')
        print('-' * 89)

        if val_loss < best_val_loss:
            best_val_loss = val_loss
            torch.save(model.state_dict(), best_model_params_path)

        scheduler.step()
    model.load_state_dict(torch.load(best_model_params_path))  # load best model states

# ---- Evaluate the best model on the test dataset ----
test_loss = evaluate(model, test_data)
test_ppl = math.exp(test_loss)
print('=' * 89)
print(f'| End of training | test loss {test_loss:5.2f} | '
      f'test ppl {test_ppl:8.2f}')
print('=' * 89)
print('best val loss', best_val_loss, 'lr now', scheduler.get_last_lr())

# compiled: one training step of the model in eval mode (no dropout),
# checked against the same step eagerly
model.eval()
data, targets = get_batch(train_data, 0)
src_mask = generate_square_subsequent_mask(bptt).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.5)


def train_step(data, targets, src_mask):
    output = model(data, src_mask)
    loss = criterion(output.view(-1, ntokens), targets)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
    return loss


state = {k: v.clone() for k, v in model.state_dict().items()}
loss_c = torch.compile(train_step)(data, targets, src_mask)
after_c = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
loss_e = train_step(data, targets, src_mask)
print('compiled == eager', torch.allclose(loss_c, loss_e, atol=1e-5),
      all(torch.allclose(after_c[k], v, atol=1e-5) for k, v in model.state_dict().items()))
print('loss', loss_e.item())
