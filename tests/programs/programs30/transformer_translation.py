# The PyTorch tutorial "Language Translation with nn.Transformer and
# torchtext" (beginner/translation_transformer.py) as published, minus
# torchtext's Multi30k and spaCy tokenizers: PositionalEncoding (sin / cos
# buffer, registered with register_buffer, dropout), TokenEmbedding
# (embedding * sqrt(emb_size)), Seq2SeqTransformer around nn.Transformer
# (batch_first=False) with its encode / decode methods,
# generate_square_subsequent_mask (torch.triu(...).transpose(0, 1),
# masked_fill with float('-inf') / 0.0), create_mask (src mask of zeros,
# padding masks from == PAD_IDX .transpose(0, 1)), xavier_uniform_ on the
# matrices, CrossEntropyLoss(ignore_index=PAD_IDX), Adam(betas=(0.9, 0.98),
# eps=1e-9), train_epoch / evaluate, and greedy_decode's loop
# (torch.max(prob, dim=1), torch.cat of the next word, stop at EOS).
# Written for this test: a synthetic "translation" (reverse the source and
# shift every token by one), vocabularies of 12, emb 32, 2 + 2 layers,
# dropout 0.0 (0.1 in the tutorial), 6 epochs of 4 padded batches; one
# compiled training step against eager.
import copy
import math

import torch
import torch.nn as nn
from torch import Tensor
from torch.nn import Transformer

torch.manual_seed(0)
DEVICE = torch.device("cpu")
UNK_IDX, PAD_IDX, BOS_IDX, EOS_IDX = 0, 1, 2, 3
SRC_VOCAB_SIZE = TGT_VOCAB_SIZE = 12


class PositionalEncoding(nn.Module):
    def __init__(self, emb_size: int, dropout: float, maxlen: int = 5000):
        super(PositionalEncoding, self).__init__()
        den = torch.exp(- torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        pos_embedding = pos_embedding.unsqueeze(-2)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer('pos_embedding', pos_embedding)

    def forward(self, token_embedding: Tensor):
        return self.dropout(token_embedding + self.pos_embedding[:token_embedding.size(0), :])


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, emb_size):
        super(TokenEmbedding, self).__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens: Tensor):
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, num_encoder_layers: int, num_decoder_layers: int, emb_size: int,
                 nhead: int, src_vocab_size: int, tgt_vocab_size: int,
                 dim_feedforward: int = 512, dropout: float = 0.1):
        super(Seq2SeqTransformer, self).__init__()
        self.transformer = Transformer(d_model=emb_size, nhead=nhead,
                                       num_encoder_layers=num_encoder_layers,
                                       num_decoder_layers=num_decoder_layers,
                                       dim_feedforward=dim_feedforward, dropout=dropout)
        self.generator = nn.Linear(emb_size, tgt_vocab_size)
        self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
        self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

    def forward(self, src: Tensor, trg: Tensor, src_mask: Tensor, tgt_mask: Tensor,
                src_padding_mask: Tensor, tgt_padding_mask: Tensor,
                memory_key_padding_mask: Tensor):
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
        outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None,
                                src_padding_mask, tgt_padding_mask, memory_key_padding_mask)
        return self.generator(outs)

    def encode(self, src: Tensor, src_mask: Tensor):
        return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask)

    def decode(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor):
        return self.transformer.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)), memory, tgt_mask)


def generate_square_subsequent_mask(sz):
    mask = (torch.triu(torch.ones((sz, sz), device=DEVICE)) == 1).transpose(0, 1)
    mask = mask.float().masked_fill(mask == 0, float('-inf')).masked_fill(mask == 1, float(0.0))
    return mask


def create_mask(src, tgt):
    src_seq_len = src.shape[0]
    tgt_seq_len = tgt.shape[0]
    tgt_mask = generate_square_subsequent_mask(tgt_seq_len)
    src_mask = torch.zeros((src_seq_len, src_seq_len), device=DEVICE).type(torch.bool)
    src_padding_mask = (src == PAD_IDX).transpose(0, 1)
    tgt_padding_mask = (tgt == PAD_IDX).transpose(0, 1)
    return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask


# synthetic parallel corpus: target = reversed source, each token + 1
g = torch.Generator().manual_seed(1)


def make_batch(bs=6):
    srcs, tgts = [], []
    for _ in range(bs):
        n = int(torch.randint(3, 7, (1,), generator=g))
        s = torch.randint(4, 11, (n,), generator=g)
        t = (s.flip(0) + 1)
        srcs.append(torch.cat([torch.tensor([BOS_IDX]), s, torch.tensor([EOS_IDX])]))
        tgts.append(torch.cat([torch.tensor([BOS_IDX]), t, torch.tensor([EOS_IDX])]))
    src_batch = nn.utils.rnn.pad_sequence(srcs, padding_value=PAD_IDX)
    tgt_batch = nn.utils.rnn.pad_sequence(tgts, padding_value=PAD_IDX)
    return src_batch, tgt_batch


train_data = [make_batch() for _ in range(4)]
val_data = [make_batch() for _ in range(2)]

transformer = Seq2SeqTransformer(2, 2, 32, 4, SRC_VOCAB_SIZE, TGT_VOCAB_SIZE, 64, dropout=0.0)
for p in transformer.parameters():
    if p.dim() > 1:
        nn.init.xavier_uniform_(p)
transformer = transformer.to(DEVICE)
loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD_IDX)
optimizer = torch.optim.Adam(transformer.parameters(), lr=0.001, betas=(0.9, 0.98), eps=1e-9)


def train_step(model, src, tgt):
    tgt_input = tgt[:-1, :]
    src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
    logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask)
    optimizer.zero_grad()
    tgt_out = tgt[1:, :]
    loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
    loss.backward()
    optimizer.step()
    return loss


def train_epoch(model, optimizer):
    model.train()
    losses = 0
    for src, tgt in train_data:
        losses += train_step(model, src, tgt).item()
    return losses / len(train_data)


def evaluate(model):
    model.eval()
    losses = 0
    for src, tgt in val_data:
        tgt_input = tgt[:-1, :]
        src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
        logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask)
        tgt_out = tgt[1:, :]
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        losses += loss.item()
    return losses / len(val_data)


for epoch in range(1, 7):
    train_loss = train_epoch(transformer, optimizer)
    val_loss = evaluate(transformer)
    print(f"Epoch: {epoch}, Train loss: {train_loss:.4f}, Val loss: {val_loss:.4f}")


def greedy_decode(model, src, src_mask, max_len, start_symbol):
    src = src.to(DEVICE)
    src_mask = src_mask.to(DEVICE)
    memory = model.encode(src, src_mask)
    ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long).to(DEVICE)
    for i in range(max_len - 1):
        memory = memory.to(DEVICE)
        tgt_mask = (generate_square_subsequent_mask(ys.size(0)).type(torch.bool)).to(DEVICE)
        out = model.decode(ys, memory, tgt_mask)
        out = out.transpose(0, 1)
        prob = model.generator(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        next_word = next_word.item()
        ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
        if next_word == EOS_IDX:
            break
    return ys


def translate(model, tokens):
    model.eval()
    src = torch.tensor([BOS_IDX] + tokens + [EOS_IDX]).view(-1, 1)
    num_tokens = src.shape[0]
    src_mask = (torch.zeros(num_tokens, num_tokens)).type(torch.bool)
    tgt_tokens = greedy_decode(model, src, src_mask, max_len=num_tokens + 5, start_symbol=BOS_IDX).flatten()
    return tgt_tokens.tolist()


print("translate [4, 5, 6, 7]:", translate(transformer, [4, 5, 6, 7]))
print("translate [9, 8, 10]:", translate(transformer, [9, 8, 10]))
print("mask(3):", generate_square_subsequent_mask(3).tolist())

transformer.train()
src, tgt = make_batch()
state, opt_state = copy.deepcopy(transformer.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(transformer, src, tgt)
after_c = copy.deepcopy(transformer.state_dict())
transformer.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(transformer, src, tgt)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-5),
      all(torch.allclose(after_c[k], v, atol=1e-5) for k, v in transformer.state_dict().items()))
