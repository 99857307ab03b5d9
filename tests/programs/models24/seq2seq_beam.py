# A GRU encoder / Bahdanau-attention decoder with beam search decoding,
# the way bentrevett/pytorch-seq2seq's "4 - Packed Padded Sequences,
# Masking, Inference and BLEU" writes the model (Encoder with
# nn.utils.rnn.pack_padded_sequence(..., src_len.to('cpu'),
# enforce_sorted=False) and pad_packed_sequence, the bidirectional hidden
# torch.tanh(self.fc(torch.cat((hidden[-2,:,:], hidden[-1,:,:]), dim=1))),
# Attention with hidden.unsqueeze(1).repeat(1, src_len, 1), energy through
# torch.tanh(self.attn(torch.cat(...))), masked_fill(mask == 0, -1e10) and
# F.softmax, Decoder with torch.bmm weighted context, Seq2Seq.forward with
# teacher forcing by random.random() < teacher_forcing_ratio and
# output.argmax(1), create_mask, init_weights with nn.init.normal_ /
# constant_ over named_parameters, count_parameters, train() with
# output[1:].view(-1, output_dim), CrossEntropyLoss(ignore_index=PAD) and
# clip_grad_norm_, evaluate() under torch.no_grad with teacher_forcing 0,
# epoch_time, math.exp perplexity) and budzianowski/PyTorch-Beam-Search-
# Decoding's beam_decode (BeamSearchNode with eval(), a PriorityQueue of
# (-score, id, node), torch.topk on log_softmax, backtracking through
# prevNode, utterances sorted by score) plus a batched beam search over
# beam * vocab with topk and integer division. Changes for a CPU test: a
# tiny synthetic "reverse the sequence" task from numpy instead of Multi30k,
# small sizes, weights from numpy, teacher forcing draws from a seeded
# random; then one training step under torch.compile against the same step
# eagerly (teacher forcing fixed so both take the same branches).
import copy
import math
import operator
import random
import time
from queue import PriorityQueue

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

SEED = 1234
random.seed(SEED)
np.random.seed(SEED)
torch.manual_seed(SEED)
torch.backends.cudnn.deterministic = True

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

PAD_IDX, SOS_token, EOS_token = 1, 2, 3
VOCAB = 12
MAX_LENGTH = 8


def fmt(x, n=4):
    return [f"{v:.4f}" for v in x.reshape(-1)[:n].tolist()]


class Encoder(nn.Module):
    def __init__(self, input_dim, emb_dim, enc_hid_dim, dec_hid_dim, dropout):
        super().__init__()

        self.embedding = nn.Embedding(input_dim, emb_dim)

        self.rnn = nn.GRU(emb_dim, enc_hid_dim, bidirectional = True)

        self.fc = nn.Linear(enc_hid_dim * 2, dec_hid_dim)

        self.dropout = nn.Dropout(dropout)

    def forward(self, src, src_len):

        #src = [src len, batch size]
        #src_len = [batch size]

        embedded = self.dropout(self.embedding(src))

        #embedded = [src len, batch size, emb dim]

        #need to explicitly put lengths on cpu!
        packed_embedded = nn.utils.rnn.pack_padded_sequence(embedded, src_len.to('cpu'), enforce_sorted=False)

        packed_outputs, hidden = self.rnn(packed_embedded)

        #packed_outputs is a packed sequence containing all hidden states
        #hidden is now from the final non-padded element in the batch

        outputs, _ = nn.utils.rnn.pad_packed_sequence(packed_outputs)

        #outputs is now a non-packed sequence, all hidden states obtained
        #  when the input is a pad token are all zeros

        #outputs = [src len, batch size, hid dim * num directions]
        #hidden = [n layers * num directions, batch size, hid dim]

        hidden = torch.tanh(self.fc(torch.cat((hidden[-2,:,:], hidden[-1,:,:]), dim = 1)))

        #outputs = [src len, batch size, enc hid dim * 2]
        #hidden = [batch size, dec hid dim]

        return outputs, hidden


class Attention(nn.Module):
    def __init__(self, enc_hid_dim, dec_hid_dim):
        super().__init__()

        self.attn = nn.Linear((enc_hid_dim * 2) + dec_hid_dim, dec_hid_dim)
        self.v = nn.Linear(dec_hid_dim, 1, bias = False)

    def forward(self, hidden, encoder_outputs, mask):

        #hidden = [batch size, dec hid dim]
        #encoder_outputs = [src len, batch size, enc hid dim * 2]

        batch_size = encoder_outputs.shape[1]
        src_len = encoder_outputs.shape[0]

        #repeat decoder hidden state src_len times
        hidden = hidden.unsqueeze(1).repeat(1, src_len, 1)

        encoder_outputs = encoder_outputs.permute(1, 0, 2)

        energy = torch.tanh(self.attn(torch.cat((hidden, encoder_outputs), dim = 2)))

        attention = self.v(energy).squeeze(2)

        attention = attention.masked_fill(mask == 0, -1e10)

        return F.softmax(attention, dim = 1)


class Decoder(nn.Module):
    def __init__(self, output_dim, emb_dim, enc_hid_dim, dec_hid_dim, dropout, attention):
        super().__init__()

        self.output_dim = output_dim
        self.attention = attention

        self.embedding = nn.Embedding(output_dim, emb_dim)

        self.rnn = nn.GRU((enc_hid_dim * 2) + emb_dim, dec_hid_dim)

        self.fc_out = nn.Linear((enc_hid_dim * 2) + dec_hid_dim + emb_dim, output_dim)

        self.dropout = nn.Dropout(dropout)

    def forward(self, input, hidden, encoder_outputs, mask):

        input = input.unsqueeze(0)

        embedded = self.dropout(self.embedding(input))

        a = self.attention(hidden, encoder_outputs, mask)

        a = a.unsqueeze(1)

        encoder_outputs = encoder_outputs.permute(1, 0, 2)

        weighted = torch.bmm(a, encoder_outputs)

        weighted = weighted.permute(1, 0, 2)

        rnn_input = torch.cat((embedded, weighted), dim = 2)

        output, hidden = self.rnn(rnn_input, hidden.unsqueeze(0))

        assert (output == hidden).all()

        embedded = embedded.squeeze(0)
        output = output.squeeze(0)
        weighted = weighted.squeeze(0)

        prediction = self.fc_out(torch.cat((output, weighted, embedded), dim = 1))

        return prediction, hidden.squeeze(0), a.squeeze(1)


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder, src_pad_idx, device):
        super().__init__()

        self.encoder = encoder
        self.decoder = decoder
        self.src_pad_idx = src_pad_idx
        self.device = device

    def create_mask(self, src):
        mask = (src != self.src_pad_idx).permute(1, 0)
        return mask

    def forward(self, src, src_len, trg, teacher_forcing_ratio = 0.5):

        batch_size = src.shape[1]
        trg_len = trg.shape[0]
        trg_vocab_size = self.decoder.output_dim

        #tensor to store decoder outputs
        outputs = torch.zeros(trg_len, batch_size, trg_vocab_size).to(self.device)

        encoder_outputs, hidden = self.encoder(src, src_len)

        #first input to the decoder is the <sos> tokens
        input = trg[0,:]

        mask = self.create_mask(src)

        for t in range(1, trg_len):

            output, hidden, _ = self.decoder(input, hidden, encoder_outputs, mask)

            outputs[t] = output

            teacher_force = random.random() < teacher_forcing_ratio

            top1 = output.argmax(1)

            input = trg[t] if teacher_force else top1

        return outputs


def init_weights(m):
    for name, param in m.named_parameters():
        if 'weight' in name:
            nn.init.normal_(param.data, mean=0, std=0.01)
        else:
            nn.init.constant_(param.data, 0)


def load_numpy(module, r, std=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if 'weight' in name:
                p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))
            else:
                nn.init.constant_(p, 0.01)


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def epoch_time(start_time, end_time):
    elapsed_time = end_time - start_time
    elapsed_mins = int(elapsed_time / 60)
    elapsed_secs = int(elapsed_time - (elapsed_mins * 60))
    return elapsed_mins, elapsed_secs


# ---- data: reverse a random token sequence; batches of varying lengths, padded
rd = np.random.default_rng(0)


def make_batch(bs):
    lens = rd.integers(3, 7, bs)
    src = np.full((int(lens.max()), bs), PAD_IDX, dtype=np.int64)
    trg = np.full((int(lens.max()) + 2, bs), PAD_IDX, dtype=np.int64)
    for b, n in enumerate(lens):
        seq = rd.integers(4, VOCAB, n)
        src[:n, b] = seq
        trg[0, b] = SOS_token
        trg[1:n + 1, b] = seq[::-1]
        trg[n + 1, b] = EOS_token
    return torch.from_numpy(src), torch.from_numpy(lens), torch.from_numpy(trg)


INPUT_DIM = OUTPUT_DIM = VOCAB
ENC_EMB_DIM = DEC_EMB_DIM = 8
ENC_HID_DIM = DEC_HID_DIM = 16
ENC_DROPOUT = DEC_DROPOUT = 0.0
CLIP = 1

attn = Attention(ENC_HID_DIM, DEC_HID_DIM)
enc = Encoder(INPUT_DIM, ENC_EMB_DIM, ENC_HID_DIM, DEC_HID_DIM, ENC_DROPOUT)
dec = Decoder(OUTPUT_DIM, DEC_EMB_DIM, ENC_HID_DIM, DEC_HID_DIM, DEC_DROPOUT, attn)

model = Seq2Seq(enc, dec, PAD_IDX, device).to(device)
model.apply(init_weights)
print("init", f"{model.encoder.rnn.weight_hh_l0_reverse.std().item():.3f} [rng]",
      model.decoder.fc_out.bias.abs().sum().item())
load_numpy(model, np.random.default_rng(1))
print(f'The model has {count_parameters(model):,} trainable parameters')

optimizer = optim.Adam(model.parameters(), lr=5e-3)
criterion = nn.CrossEntropyLoss(ignore_index = PAD_IDX)

src, src_len, trg = make_batch(5)
with torch.no_grad():
    enc_out, hid = model.encoder(src, src_len)
print("encoder", tuple(enc_out.shape), tuple(hid.shape), src_len.tolist(), fmt(enc_out[:, 0, 0], 7))
print("padded zeros", [bool((enc_out[int(n):, b] == 0).all()) for b, n in enumerate(src_len)])


def train(model, batches, optimizer, criterion, clip):

    model.train()

    epoch_loss = 0

    for i, batch in enumerate(batches):

        src, src_len, trg = batch

        optimizer.zero_grad()

        output = model(src, src_len, trg)

        #trg = [trg len, batch size]
        #output = [trg len, batch size, output dim]

        output_dim = output.shape[-1]

        output = output[1:].view(-1, output_dim)
        trg = trg[1:].view(-1)

        loss = criterion(output, trg)

        loss.backward()

        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)

        optimizer.step()

        epoch_loss += loss.item()

    return epoch_loss / len(batches)


def evaluate(model, batches, criterion):

    model.eval()

    epoch_loss = 0

    with torch.no_grad():

        for i, batch in enumerate(batches):

            src, src_len, trg = batch

            output = model(src, src_len, trg, 0) #turn off teacher forcing

            output_dim = output.shape[-1]

            output = output[1:].view(-1, output_dim)
            trg = trg[1:].view(-1)

            loss = criterion(output, trg)

            epoch_loss += loss.item()

    return epoch_loss / len(batches)


train_batches = [make_batch(6) for _ in range(4)]
valid_batches = [make_batch(6) for _ in range(2)]
best_valid_loss = float('inf')
N_EPOCHS = 3
for epoch in range(N_EPOCHS):

    start_time = time.time()

    train_loss = train(model, train_batches, optimizer, criterion, CLIP)
    valid_loss = evaluate(model, valid_batches, criterion)

    end_time = time.time()

    epoch_mins, epoch_secs = epoch_time(start_time, end_time)

    if valid_loss < best_valid_loss:
        best_valid_loss = valid_loss
        best_state = copy.deepcopy(model.state_dict())

    print(f'Epoch: {epoch+1:02} | Time: {epoch_mins}m {epoch_secs}s [rng]')
    print(f'\tTrain Loss: {train_loss:.3f} | Train PPL: {math.exp(train_loss):7.3f}')
    print(f'\t Val. Loss: {valid_loss:.3f} |  Val. PPL: {math.exp(valid_loss):7.3f}')
model.load_state_dict(best_state)


# ---- budzianowski/PyTorch-Beam-Search-Decoding: a PriorityQueue of nodes
class BeamSearchNode(object):
    def __init__(self, hiddenstate, previousNode, wordId, logProb, length):
        '''
        :param hiddenstate:
        :param previousNode:
        :param wordId:
        :param logProb:
        :param length:
        '''
        self.h = hiddenstate
        self.prevNode = previousNode
        self.wordid = wordId
        self.logp = logProb
        self.leng = length

    def eval(self, alpha=1.0):
        reward = 0
        # Add here a function for shaping a reward

        return self.logp / float(self.leng - 1 + 1e-6) + alpha * reward


def beam_decode(target_tensor, decoder_hiddens, encoder_outputs=None, masks=None):
    '''
    :param target_tensor: target indexes tensor of shape [B, T] where B is the batch size and T is the maximum length of the output sentence
    :param decoder_hidden: input tensor of shape [1, B, H] for start of the decoding
    :param encoder_outputs: if you are using attention mechanism you can pass encoder outputs, [T, B, H] where T is the maximum length of input sentence
    :return: decoded_batch
    '''

    beam_width = 3
    topk = 2  # how many sentence do you want to generate
    decoded_batch = []

    # decoding goes sentence by sentence
    for idx in range(target_tensor.size(0)):
        decoder_hidden = decoder_hiddens[idx, :].unsqueeze(0)
        encoder_output = encoder_outputs[:, idx:idx + 1, :]
        mask = masks[idx:idx + 1]

        # Start with the start of the sentence token
        decoder_input = torch.LongTensor([SOS_token]).to(device)

        # Number of sentence to generate
        endnodes = []
        number_required = min((topk + 1), topk - len(endnodes))

        # starting node -  hidden vector, previous node, word id, logp, length
        node = BeamSearchNode(decoder_hidden, None, decoder_input, 0, 1)
        nodes = PriorityQueue()

        # start the queue
        nodes.put((-node.eval(), id(node), node))
        qsize = 1

        # start beam search
        while True:
            # give up when decoding takes too long
            if qsize > 60: break

            # fetch the best node
            score, _, n = nodes.get()
            decoder_input = n.wordid
            decoder_hidden = n.h

            if (n.wordid.item() == EOS_token or n.leng > MAX_LENGTH) and n.prevNode != None:
                endnodes.append((score, id(n), n))
                # if we reached maximum # of sentences required
                if len(endnodes) >= number_required:
                    break
                else:
                    continue

            # decode for one step using decoder
            decoder_output, decoder_hidden, _ = model.decoder(decoder_input, decoder_hidden, encoder_output, mask)
            decoder_output = F.log_softmax(decoder_output, dim=1)

            # PUT HERE REAL BEAM SEARCH OF TOP
            log_prob, indexes = torch.topk(decoder_output, beam_width)
            nextnodes = []

            for new_k in range(beam_width):
                decoded_t = indexes[0][new_k].view(-1)
                log_p = log_prob[0][new_k].item()

                node = BeamSearchNode(decoder_hidden, n, decoded_t, n.logp + log_p, n.leng + 1)
                score = -node.eval()
                nextnodes.append((score, id(node), node))

            # put them into queue
            for i in range(len(nextnodes)):
                score, nid, nn_ = nextnodes[i]
                nodes.put((score, nid, nn_))
                # increase qsize
            qsize += len(nextnodes) - 1

        # choose nbest paths, back trace them
        if len(endnodes) == 0:
            endnodes = [nodes.get() for _ in range(topk)]

        utterances = []
        scores = []
        for score, _, n in sorted(endnodes, key=operator.itemgetter(0)):
            utterance = []
            utterance.append(n.wordid.item())
            # back trace
            while n.prevNode != None:
                n = n.prevNode
                utterance.append(n.wordid.item())

            utterance = utterance[::-1]
            utterances.append(utterance)
            scores.append(round(-score, 4))

        decoded_batch.append((utterances, scores))

    return decoded_batch


model.eval()
src, src_len, trg = make_batch(3)
with torch.no_grad():
    encoder_outputs, hidden = model.encoder(src, src_len)
    mask = model.create_mask(src)
    decoded = beam_decode(trg.t(), hidden, encoder_outputs, mask)
print("targets", [t[t != PAD_IDX].tolist() for t in trg.t()])
for utterances, scores in decoded:
    print("beam_decode", utterances, scores)


# ---- a batched beam search over beam * vocab with topk
def batched_beam_search(model, src, src_len, beam_size=3, max_len=MAX_LENGTH):
    with torch.no_grad():
        encoder_outputs, hidden = model.encoder(src, src_len)
        mask = model.create_mask(src)
    # one example: expand to the beam
    encoder_outputs = encoder_outputs.expand(-1, beam_size, -1).contiguous()
    mask = mask.repeat(beam_size, 1)
    hidden = hidden.repeat(beam_size, 1)
    tokens = torch.full((beam_size, 1), SOS_token, dtype=torch.long)
    scores = torch.zeros(beam_size)
    scores[1:] = float('-inf')
    finished = []
    for step in range(max_len):
        with torch.no_grad():
            out, hidden, _ = model.decoder(tokens[:, -1], hidden, encoder_outputs, mask)
        logp = out.log_softmax(dim=-1)
        cand = (scores.unsqueeze(1) + logp).view(-1)
        top_scores, top_idx = cand.topk(beam_size)
        beam_idx = torch.div(top_idx, VOCAB, rounding_mode='floor')
        tok_idx = top_idx % VOCAB
        tokens = torch.cat([tokens[beam_idx], tok_idx.unsqueeze(1)], dim=1)
        hidden = hidden.index_select(0, beam_idx)
        scores = top_scores.clone()
        ended = tok_idx == EOS_token
        for b in ended.nonzero(as_tuple=True)[0].tolist():
            finished.append((scores[b].item() / tokens.size(1), tokens[b].tolist()))
        scores = scores.masked_fill(ended, float('-inf'))
        if len(finished) >= beam_size or torch.isinf(scores).all():
            break
    if not finished:
        finished = [(scores[b].item() / tokens.size(1), tokens[b].tolist()) for b in range(beam_size)]
    return sorted(finished, key=lambda x: -x[0])


for b in range(2):
    n = int(src_len[b])
    best = batched_beam_search(model, src[:n, b:b + 1], src_len[b:b + 1])
    print("batched beam", [(f"{s:.4f}", t) for s, t in best[:2]])


# one training step under torch.compile against the same step eagerly
# (teacher forcing always on, so the compiled and eager steps agree)
def train_step(src, src_len, trg):
    optimizer.zero_grad()
    output = model(src, src_len, trg, teacher_forcing_ratio=1.0)
    output_dim = output.shape[-1]
    loss = criterion(output[1:].view(-1, output_dim), trg[1:].view(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
    optimizer.step()
    return loss


model.train()
src, src_len, trg = train_batches[0]
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(src, src_len, trg).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(src, src_len, trg).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
