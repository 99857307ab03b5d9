# atulkum/pointer_summarizer (See et al.'s pointer-generator network) the
# way its training_ptr_gen/model.py, train.py and train_util.py write it:
# init_lstm_wt over lstm._all_weights (weight_ uniform_, bias_ zero with the
# forget quarter bias.data[start:end].fill_(1.)), init_linear_wt /
# init_wt_normal through .data.normal_(std=...); the Encoder's embedding and
# bidirectional batch_first LSTM over pack_padded_sequence(embedded,
# seq_lens, batch_first=True) with numpy int32 lengths, pad_packed_sequence,
# .contiguous() and W_h on the view(-1, 2 * hidden_dim); ReduceState's
# h.transpose(0, 1).contiguous().view(...) + F.relu; the Attention with
# decode_proj expanded by unsqueeze(1).expand(b, t_k, n).contiguous(), the
# coverage feature W_c(coverage.view(-1, 1)), F.tanh, v, attn_dist_ =
# F.softmax(scores, dim=1)*enc_padding_mask renormalized, torch.bmm context,
# coverage + attn_dist; the Decoder's x_context over torch.cat((c_t_1,
# y_t_1_embd), 1), a one-step LSTM on x.unsqueeze(1), p_gen =
# F.sigmoid(p_gen_linear(torch.cat((c_t, s_t_hat, x), 1))), vocab_dist_ =
# p_gen * vocab_dist with extra_zeros concatenated and final_dist =
# vocab_dist_.scatter_add(1, enc_batch_extend_vocab, attn_dist_), the eval
# step-0 attention path; the embedding shared by decoder.embedding.weight =
# encoder.embedding.weight; train_util's get_input_from_batch /
# get_output_from_batch (Variable(torch.from_numpy(...)).long() / .float(),
# torch.zeros((batch_size, batch.max_art_oovs)) extra zeros, coverage
# zeros of enc_batch.size()); train_one_batch's teacher-forced loop with
# gold_probs = torch.gather(final_dist, 1, target.unsqueeze(1)).squeeze(),
# -torch.log(gold_probs + eps), the coverage loss torch.sum(torch.min(
# attn_dist, coverage), 1), the step mask, torch.stack(step_losses, 1)
# summed and divided by dec_lens_var, clip_grad_norm_ per module, Adagrad
# with initial_accumulator_value over the three modules' parameters;
# save_model / setup_train's torch.load(map_location=lambda storage,
# location: storage) and optimizer.load_state_dict; decode.py's Beam /
# BeamSearch (the article repeated beam_size times, the step-0 attention
# path in eval mode, states stacked from the beams, torch.topk of
# torch.log(final_dist), out-of-vocabulary ids read back as [UNK],
# hypotheses sorted by avg_log_prob, [STOP] after min_dec_steps); the
# training schedule without coverage, resumed with the Adagrad state, then
# with coverage from that checkpoint (load_state_dict(strict=False)).
# Changes for a CPU test: tiny vocabulary and sizes (vocab 30, emb 8,
# hidden 8, 3 articles of <= 7 tokens, 5 decoder steps), batches built in
# numpy directly (no Vocab / Batcher reading the CNN/DailyMail tf.Example
# files), weights from numpy after the original init, a few steps; then one
# training step under torch.compile against the same step eagerly.
import copy
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
from torch.nn.utils import clip_grad_norm_
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.optim import Adagrad


def fmt(x, n=4, p=4):
    return [f"{v:.{p}f}" for v in x.reshape(-1)[:n].tolist()]


class config:
    hidden_dim = 8
    emb_dim = 8
    batch_size = 3
    max_enc_steps = 7
    max_dec_steps = 5
    beam_size = 2
    min_dec_steps = 1
    vocab_size = 30
    lr = 0.15
    adagrad_init_acc = 0.1
    rand_unif_init_mag = 0.02
    trunc_norm_init_std = 1e-4
    max_grad_norm = 2.0
    pointer_gen = True
    is_coverage = True
    cov_loss_wt = 1.0
    eps = 1e-12
    max_iterations = 3
    use_gpu = False
    lr_coverage = 0.15


use_cuda = config.use_gpu and torch.cuda.is_available()


# ---- model.py
def init_lstm_wt(lstm):
    for names in lstm._all_weights:
        for name in names:
            if name.startswith('weight_'):
                wt = getattr(lstm, name)
                wt.data.uniform_(-config.rand_unif_init_mag, config.rand_unif_init_mag)
            elif name.startswith('bias_'):
                # set forget bias to 1
                bias = getattr(lstm, name)
                n = bias.size(0)
                start, end = n // 4, n // 2
                bias.data.fill_(0.)
                bias.data[start:end].fill_(1.)

def init_linear_wt(linear):
    linear.weight.data.normal_(std=config.trunc_norm_init_std)
    if linear.bias is not None:
        linear.bias.data.normal_(std=config.trunc_norm_init_std)

def init_wt_normal(wt):
    wt.data.normal_(std=config.trunc_norm_init_std)

def init_wt_unif(wt):
    wt.data.uniform_(-config.rand_unif_init_mag, config.rand_unif_init_mag)

class Encoder(nn.Module):
    def __init__(self):
        super(Encoder, self).__init__()
        self.embedding = nn.Embedding(config.vocab_size, config.emb_dim)
        init_wt_normal(self.embedding.weight)

        self.lstm = nn.LSTM(config.emb_dim, config.hidden_dim, num_layers=1, batch_first=True, bidirectional=True)
        init_lstm_wt(self.lstm)

        self.W_h = nn.Linear(config.hidden_dim * 2, config.hidden_dim * 2, bias=False)

    #seq_lens should be in descending order
    def forward(self, input, seq_lens):
        embedded = self.embedding(input)

        packed = pack_padded_sequence(embedded, seq_lens, batch_first=True)
        output, hidden = self.lstm(packed)

        encoder_outputs, _ = pad_packed_sequence(output, batch_first=True)  # h dim = B x t_k x n
        encoder_outputs = encoder_outputs.contiguous()

        encoder_feature = encoder_outputs.view(-1, 2*config.hidden_dim)  # B * t_k x 2*hidden_dim
        encoder_feature = self.W_h(encoder_feature)

        return encoder_outputs, encoder_feature, hidden

class ReduceState(nn.Module):
    def __init__(self):
        super(ReduceState, self).__init__()

        self.reduce_h = nn.Linear(config.hidden_dim * 2, config.hidden_dim)
        init_linear_wt(self.reduce_h)
        self.reduce_c = nn.Linear(config.hidden_dim * 2, config.hidden_dim)
        init_linear_wt(self.reduce_c)

    def forward(self, hidden):
        h, c = hidden # h, c dim = 2 x b x hidden_dim
        h_in = h.transpose(0, 1).contiguous().view(-1, config.hidden_dim * 2)
        hidden_reduced_h = F.relu(self.reduce_h(h_in))
        c_in = c.transpose(0, 1).contiguous().view(-1, config.hidden_dim * 2)
        hidden_reduced_c = F.relu(self.reduce_c(c_in))

        return (hidden_reduced_h.unsqueeze(0), hidden_reduced_c.unsqueeze(0)) # h, c dim = 1 x b x hidden_dim

class Attention(nn.Module):
    def __init__(self):
        super(Attention, self).__init__()
        # attention
        if config.is_coverage:
            self.W_c = nn.Linear(1, config.hidden_dim * 2, bias=False)
        self.decode_proj = nn.Linear(config.hidden_dim * 2, config.hidden_dim * 2)
        self.v = nn.Linear(config.hidden_dim * 2, 1, bias=False)

    def forward(self, s_t_hat, encoder_outputs, encoder_feature, enc_padding_mask, coverage):
        b, t_k, n = list(encoder_outputs.size())

        dec_fea = self.decode_proj(s_t_hat) # B x 2*hidden_dim
        dec_fea_expanded = dec_fea.unsqueeze(1).expand(b, t_k, n).contiguous() # B x t_k x 2*hidden_dim
        dec_fea_expanded = dec_fea_expanded.view(-1, n)  # B * t_k x 2*hidden_dim

        att_features = encoder_feature + dec_fea_expanded # B * t_k x 2*hidden_dim
        if config.is_coverage:
            coverage_input = coverage.view(-1, 1)  # B * t_k x 1
            coverage_feature = self.W_c(coverage_input)  # B * t_k x 2*hidden_dim
            att_features = att_features + coverage_feature

        e = F.tanh(att_features) # B * t_k x 2*hidden_dim
        scores = self.v(e)  # B * t_k x 1
        scores = scores.view(-1, t_k)  # B x t_k

        attn_dist_ = F.softmax(scores, dim=1)*enc_padding_mask # B x t_k
        normalization_factor = attn_dist_.sum(1, keepdim=True)
        attn_dist = attn_dist_ / normalization_factor

        attn_dist = attn_dist.unsqueeze(1)  # B x 1 x t_k
        c_t = torch.bmm(attn_dist, encoder_outputs)  # B x 1 x n
        c_t = c_t.view(-1, config.hidden_dim * 2)  # B x 2*hidden_dim

        attn_dist = attn_dist.view(-1, t_k)  # B x t_k

        if config.is_coverage:
            coverage = coverage.view(-1, t_k)
            coverage = coverage + attn_dist

        return c_t, attn_dist, coverage

class Decoder(nn.Module):
    def __init__(self):
        super(Decoder, self).__init__()
        self.attention_network = Attention()
        # decoder
        self.embedding = nn.Embedding(config.vocab_size, config.emb_dim)
        init_wt_normal(self.embedding.weight)

        self.x_context = nn.Linear(config.hidden_dim * 2 + config.emb_dim, config.emb_dim)

        self.lstm = nn.LSTM(config.emb_dim, config.hidden_dim, num_layers=1, batch_first=True, bidirectional=False)
        init_lstm_wt(self.lstm)

        if config.pointer_gen:
            self.p_gen_linear = nn.Linear(config.hidden_dim * 4 + config.emb_dim, 1)

        #p_vocab
        self.out1 = nn.Linear(config.hidden_dim * 3, config.hidden_dim)
        self.out2 = nn.Linear(config.hidden_dim, config.vocab_size)
        init_linear_wt(self.out2)

    def forward(self, y_t_1, s_t_1, encoder_outputs, encoder_feature, enc_padding_mask,
                c_t_1, extra_zeros, enc_batch_extend_vocab, coverage, step):

        if not self.training and step == 0:
            h_decoder, c_decoder = s_t_1
            s_t_hat = torch.cat((h_decoder.view(-1, config.hidden_dim),
                                 c_decoder.view(-1, config.hidden_dim)), 1)  # B x 2*hidden_dim
            c_t, _, coverage_next = self.attention_network(s_t_hat, encoder_outputs, encoder_feature,
                                                              enc_padding_mask, coverage)
            coverage = coverage_next

        y_t_1_embd = self.embedding(y_t_1)
        x = self.x_context(torch.cat((c_t_1, y_t_1_embd), 1))
        lstm_out, s_t = self.lstm(x.unsqueeze(1), s_t_1)

        h_decoder, c_decoder = s_t
        s_t_hat = torch.cat((h_decoder.view(-1, config.hidden_dim),
                             c_decoder.view(-1, config.hidden_dim)), 1)  # B x 2*hidden_dim
        c_t, attn_dist, coverage_next = self.attention_network(s_t_hat, encoder_outputs, encoder_feature,
                                                          enc_padding_mask, coverage)

        if self.training or step > 0:
            coverage = coverage_next

        p_gen = None
        if config.pointer_gen:
            p_gen_input = torch.cat((c_t, s_t_hat, x), 1)  # B x (2*2*hidden_dim + emb_dim)
            p_gen = self.p_gen_linear(p_gen_input)
            p_gen = F.sigmoid(p_gen)

        output = torch.cat((lstm_out.view(-1, config.hidden_dim), c_t), 1) # B x hidden_dim * 3
        output = self.out1(output) # B x hidden_dim

        #output = F.relu(output)

        output = self.out2(output) # B x vocab_size
        vocab_dist = F.softmax(output, dim=1)

        if config.pointer_gen:
            vocab_dist_ = p_gen * vocab_dist
            attn_dist_ = (1 - p_gen) * attn_dist

            if extra_zeros is not None:
                vocab_dist_ = torch.cat([vocab_dist_, extra_zeros], 1)

            final_dist = vocab_dist_.scatter_add(1, enc_batch_extend_vocab, attn_dist_)
        else:
            final_dist = vocab_dist

        return final_dist, s_t, c_t, attn_dist, p_gen, coverage

class Model(object):
    def __init__(self, model_file_path=None, is_eval=False):
        encoder = Encoder()
        decoder = Decoder()
        reduce_state = ReduceState()

        # shared the embedding between encoder and decoder
        decoder.embedding.weight = encoder.embedding.weight
        if is_eval:
            encoder = encoder.eval()
            decoder = decoder.eval()
            reduce_state = reduce_state.eval()

        self.encoder = encoder
        self.decoder = decoder
        self.reduce_state = reduce_state

        if model_file_path is not None:
            state = torch.load(model_file_path, map_location= lambda storage, location: storage)
            self.encoder.load_state_dict(state['encoder_state_dict'])
            self.decoder.load_state_dict(state['decoder_state_dict'], strict=False)
            self.reduce_state.load_state_dict(state['reduce_state_dict'])


# ---- train_util.py
def get_input_from_batch(batch, use_cuda):
    batch_size = len(batch.enc_lens)

    enc_batch = Variable(torch.from_numpy(batch.enc_batch).long())
    enc_padding_mask = Variable(torch.from_numpy(batch.enc_padding_mask)).float()
    enc_lens = batch.enc_lens
    extra_zeros = None
    enc_batch_extend_vocab = None

    if config.pointer_gen:
        enc_batch_extend_vocab = Variable(torch.from_numpy(batch.enc_batch_extend_vocab).long())
        # max_art_oovs is the max over all the article oov list in the batch
        if batch.max_art_oovs > 0:
            extra_zeros = Variable(torch.zeros((batch_size, batch.max_art_oovs)))

    c_t_1 = Variable(torch.zeros((batch_size, 2 * config.hidden_dim)))

    coverage = None
    if config.is_coverage:
        coverage = Variable(torch.zeros(enc_batch.size()))

    return enc_batch, enc_padding_mask, enc_lens, enc_batch_extend_vocab, extra_zeros, c_t_1, coverage

def get_output_from_batch(batch, use_cuda):
    dec_batch = Variable(torch.from_numpy(batch.dec_batch).long())
    dec_padding_mask = Variable(torch.from_numpy(batch.dec_padding_mask)).float()
    dec_lens = batch.dec_lens
    max_dec_len = np.max(dec_lens)
    dec_lens_var = Variable(torch.from_numpy(dec_lens)).float()

    target_batch = Variable(torch.from_numpy(batch.target_batch)).long()

    return dec_batch, dec_padding_mask, max_dec_len, dec_lens_var, target_batch


class Batch:
    """data/batcher.py's Batch, its numpy arrays built from random ids:
    ids >= vocab_size are the article's OOVs (extended vocabulary)."""

    def __init__(self, r, enc_lens, dec_lens, n_oovs):
        B, T, D = len(enc_lens), max(enc_lens), config.max_dec_steps
        self.enc_lens = np.array(enc_lens, dtype=np.int32)
        self.enc_batch = np.zeros((B, T), dtype=np.int32)
        self.enc_batch_extend_vocab = np.zeros((B, T), dtype=np.int32)
        self.enc_padding_mask = np.zeros((B, T), dtype=np.float32)
        self.max_art_oovs = max(n_oovs)
        self.dec_batch = np.zeros((B, D), dtype=np.int32)
        self.target_batch = np.zeros((B, D), dtype=np.int32)
        self.dec_padding_mask = np.zeros((B, D), dtype=np.float32)
        self.dec_lens = np.array(dec_lens, dtype=np.int32)
        for i, (n, d, k) in enumerate(zip(enc_lens, dec_lens, n_oovs)):
            ext = r.integers(4, config.vocab_size + k, size=n)
            self.enc_batch_extend_vocab[i, :n] = ext
            self.enc_batch[i, :n] = np.where(ext >= config.vocab_size, 0, ext)   # [UNK] = 0
            self.enc_padding_mask[i, :n] = 1
            tgt = np.concatenate([r.choice(ext, size=d - 1), [3]])                # copy + [STOP]
            self.target_batch[i, :d] = tgt
            self.dec_batch[i, 0] = 2                                              # [START]
            self.dec_batch[i, 1:d] = np.where(tgt[:-1] >= config.vocab_size, 0, tgt[:-1])
            self.dec_padding_mask[i, :d] = 1


# ---- train.py
class Train(object):
    def __init__(self):
        self.model_dir = tempfile.mkdtemp()

    def save_model(self, running_avg_loss, iter):
        state = {
            'iter': iter,
            'encoder_state_dict': self.model.encoder.state_dict(),
            'decoder_state_dict': self.model.decoder.state_dict(),
            'reduce_state_dict': self.model.reduce_state.state_dict(),
            'optimizer': self.optimizer.state_dict(),
            'current_loss': running_avg_loss
        }
        model_save_path = os.path.join(self.model_dir, 'model_%d_%d' % (iter, int(time.time())))
        torch.save(state, model_save_path)
        return model_save_path

    def setup_train(self, model_file_path=None):
        self.model = Model(model_file_path)
        if model_file_path is None:
            r = np.random.default_rng(1)
            with torch.no_grad():
                for m in (self.model.encoder, self.model.decoder, self.model.reduce_state):
                    for name, p in m.named_parameters():
                        p.copy_(torch.from_numpy(r.normal(0, 0.3, tuple(p.shape)).astype(np.float32)))

        params = list(self.model.encoder.parameters()) + list(self.model.decoder.parameters()) + \
                 list(self.model.reduce_state.parameters())
        initial_lr = config.lr_coverage if config.is_coverage else config.lr
        self.optimizer = Adagrad(params, lr=initial_lr, initial_accumulator_value=config.adagrad_init_acc)

        start_iter, start_loss = 0, 0

        if model_file_path is not None:
            state = torch.load(model_file_path, map_location= lambda storage, location: storage)
            start_iter = state['iter']
            start_loss = state['current_loss']

            if not config.is_coverage:
                self.optimizer.load_state_dict(state['optimizer'])

        return start_iter, start_loss

    def train_one_batch(self, batch):
        enc_batch, enc_padding_mask, enc_lens, enc_batch_extend_vocab, extra_zeros, c_t_1, coverage = \
            get_input_from_batch(batch, use_cuda)
        dec_batch, dec_padding_mask, max_dec_len, dec_lens_var, target_batch = \
            get_output_from_batch(batch, use_cuda)

        self.optimizer.zero_grad()

        encoder_outputs, encoder_feature, encoder_hidden = self.model.encoder(enc_batch, enc_lens)
        s_t_1 = self.model.reduce_state(encoder_hidden)

        step_losses = []
        for di in range(min(max_dec_len, config.max_dec_steps)):
            y_t_1 = dec_batch[:, di]  # Teacher forcing
            final_dist, s_t_1,  c_t_1, attn_dist, p_gen, next_coverage = self.model.decoder(y_t_1, s_t_1,
                                                        encoder_outputs, encoder_feature, enc_padding_mask, c_t_1,
                                                        extra_zeros, enc_batch_extend_vocab,
                                                                           coverage, di)
            target = target_batch[:, di]
            gold_probs = torch.gather(final_dist, 1, target.unsqueeze(1)).squeeze()
            step_loss = -torch.log(gold_probs + config.eps)
            if config.is_coverage:
                step_coverage_loss = torch.sum(torch.min(attn_dist, coverage), 1)
                step_loss = step_loss + config.cov_loss_wt * step_coverage_loss
                coverage = next_coverage

            step_mask = dec_padding_mask[:, di]
            step_loss = step_loss * step_mask
            step_losses.append(step_loss)

        sum_losses = torch.sum(torch.stack(step_losses, 1), 1)
        batch_avg_loss = sum_losses/dec_lens_var
        loss = torch.mean(batch_avg_loss)

        loss.backward()

        self.norm = clip_grad_norm_(self.model.encoder.parameters(), config.max_grad_norm)
        clip_grad_norm_(self.model.decoder.parameters(), config.max_grad_norm)
        clip_grad_norm_(self.model.reduce_state.parameters(), config.max_grad_norm)

        self.optimizer.step()

        return loss.item()


def calc_running_avg_loss(loss, running_avg_loss, decay=0.99):
    if running_avg_loss == 0:  # on the first iteration just take the loss
        running_avg_loss = loss
    else:
        running_avg_loss = running_avg_loss * decay + (1 - decay) * loss
    running_avg_loss = min(running_avg_loss, 12)  # clip
    return running_avg_loss


r = np.random.default_rng(0)
batches = [Batch(r, [7, 5, 4], [5, 3, 4], [2, 0, 1]), Batch(r, [6, 6, 3], [4, 5, 2], [1, 1, 0])]
torch.manual_seed(123)
trainer = Train()
iter, running_avg_loss = trainer.setup_train()
m = trainer.model
print("shared embedding", m.decoder.embedding.weight is m.encoder.embedding.weight,
      len(list(m.decoder.parameters())), sum(p.numel() for p in trainer.optimizer.param_groups[0]['params']))
fresh = Encoder()
b = fresh.lstm.bias_ih_l0_reverse
print("init", fresh.lstm._all_weights[1], b[:8].tolist(), b[8:16].tolist(),
      f"{fresh.lstm.weight_hh_l0.abs().max().item() <= 0.02}")
print("adagrad state", fmt(trainer.optimizer.state[m.encoder.W_h.weight]['sum'], 2))

enc_batch, enc_padding_mask, enc_lens, ext, extra_zeros, c_t_1, coverage = get_input_from_batch(batches[0], use_cuda)
print("inputs", enc_batch.dtype, enc_padding_mask.dtype, enc_lens.dtype, tuple(extra_zeros.shape), tuple(coverage.shape),
      ext[0].tolist())
eo, ef, eh = m.encoder(enc_batch, enc_lens)
print("encoder", tuple(eo.shape), tuple(ef.shape), tuple(eh[0].shape), fmt(eo[2, 3], 4), fmt(eo[2, 4], 2))

while iter < config.max_iterations:
    batch = batches[iter % len(batches)]
    loss = trainer.train_one_batch(batch)
    running_avg_loss = calc_running_avg_loss(loss, running_avg_loss)
    iter += 1
    print(f"iter {iter} loss {loss:.5f} avg {running_avg_loss:.5f} norm {trainer.norm.item():.5f}")
path = trainer.save_model(running_avg_loss, iter)
print("adagrad sum", fmt(trainer.optimizer.state[m.decoder.p_gen_linear.weight]['sum'], 3),
      fmt(m.decoder.p_gen_linear.weight, 3))

# setup_train from the checkpoint (coverage: the optimizer starts afresh)
trainer2 = Train()
it2, loss2 = trainer2.setup_train(path)
print("resumed", it2, f"{loss2:.5f}", torch.equal(trainer2.model.decoder.out2.weight, m.decoder.out2.weight),
      trainer2.model.decoder.embedding.weight is trainer2.model.encoder.embedding.weight,
      len(trainer2.optimizer.state))

# ---- data.py / decode.py: beam search over one article repeated beam_size times
START_DECODING, STOP_DECODING, UNKNOWN_TOKEN = '[START]', '[STOP]', '[UNK]'


class Vocab(object):
    def __init__(self, size):
        self._size = size
        self._word_to_id = {UNKNOWN_TOKEN: 0, START_DECODING: 2, STOP_DECODING: 3}

    def word2id(self, word):
        if word not in self._word_to_id:
            return self._word_to_id[UNKNOWN_TOKEN]
        return self._word_to_id[word]

    def size(self):
        return self._size


class Beam(object):
  def __init__(self, tokens, log_probs, state, context, coverage):
    self.tokens = tokens
    self.log_probs = log_probs
    self.state = state
    self.context = context
    self.coverage = coverage

  def extend(self, token, log_prob, state, context, coverage):
    return Beam(tokens = self.tokens + [token],
                      log_probs = self.log_probs + [log_prob],
                      state = state,
                      context = context,
                      coverage = coverage)

  @property
  def latest_token(self):
    return self.tokens[-1]

  @property
  def avg_log_prob(self):
    return sum(self.log_probs) / len(self.tokens)


class BeamSearch(object):
    def __init__(self, model_file_path):
        self.vocab = Vocab(config.vocab_size)
        self.model = Model(model_file_path, is_eval=True)

    def sort_beams(self, beams):
        return sorted(beams, key=lambda h: h.avg_log_prob, reverse=True)

    def beam_search(self, batch):
        #batch should have only one example
        enc_batch, enc_padding_mask, enc_lens, enc_batch_extend_vocab, extra_zeros, c_t_0, coverage_t_0 = \
            get_input_from_batch(batch, use_cuda)

        encoder_outputs, encoder_feature, encoder_hidden = self.model.encoder(enc_batch, enc_lens)
        s_t_0 = self.model.reduce_state(encoder_hidden)

        dec_h, dec_c = s_t_0 # 1 x 2*hidden_size
        dec_h = dec_h.squeeze()
        dec_c = dec_c.squeeze()

        #decoder batch preparation, it has beam_size example initially everything is repeated
        beams = [Beam(tokens=[self.vocab.word2id(START_DECODING)],
                      log_probs=[0.0],
                      state=(dec_h[0], dec_c[0]),
                      context = c_t_0[0],
                      coverage=(coverage_t_0[0] if config.is_coverage else None))
                 for _ in range(config.beam_size)]
        results = []
        steps = 0
        while steps < config.max_dec_steps and len(results) < config.beam_size:
            latest_tokens = [h.latest_token for h in beams]
            latest_tokens = [t if t < self.vocab.size() else self.vocab.word2id(UNKNOWN_TOKEN) \
                             for t in latest_tokens]
            y_t_1 = Variable(torch.LongTensor(latest_tokens))
            all_state_h =[]
            all_state_c = []

            all_context = []

            for h in beams:
                state_h, state_c = h.state
                all_state_h.append(state_h)
                all_state_c.append(state_c)

                all_context.append(h.context)

            s_t_1 = (torch.stack(all_state_h, 0).unsqueeze(0), torch.stack(all_state_c, 0).unsqueeze(0))
            c_t_1 = torch.stack(all_context, 0)

            coverage_t_1 = None
            if config.is_coverage:
                all_coverage = []
                for h in beams:
                    all_coverage.append(h.coverage)
                coverage_t_1 = torch.stack(all_coverage, 0)

            final_dist, s_t, c_t, attn_dist, p_gen, coverage_t = self.model.decoder(y_t_1, s_t_1,
                                                        encoder_outputs, encoder_feature, enc_padding_mask, c_t_1,
                                                        extra_zeros, enc_batch_extend_vocab, coverage_t_1, steps)
            log_probs = torch.log(final_dist)
            topk_log_probs, topk_ids = torch.topk(log_probs, config.beam_size * 2)

            dec_h, dec_c = s_t
            dec_h = dec_h.squeeze()
            dec_c = dec_c.squeeze()

            all_beams = []
            num_orig_beams = 1 if steps == 0 else len(beams)
            for i in range(num_orig_beams):
                h = beams[i]
                state_i = (dec_h[i], dec_c[i])
                context_i = c_t[i]
                coverage_i = (coverage_t[i] if config.is_coverage else None)

                for j in range(config.beam_size * 2):  # for each of the top 2*beam_size hyps:
                    new_beam = h.extend(token=topk_ids[i, j].item(),
                                   log_prob=topk_log_probs[i, j].item(),
                                   state=state_i,
                                   context=context_i,
                                   coverage=coverage_i)
                    all_beams.append(new_beam)

            beams = []
            for h in self.sort_beams(all_beams):
                if h.latest_token == self.vocab.word2id(STOP_DECODING):
                    if steps >= config.min_dec_steps:
                        results.append(h)
                else:
                    beams.append(h)
                if len(beams) == config.beam_size or len(results) == config.beam_size:
                    break

            steps += 1

        if len(results) == 0:
            results = beams

        beams_sorted = self.sort_beams(results)

        return beams_sorted[0]


class OneArticle(Batch):
    """The decode-mode batch: one article repeated beam_size times."""

    def __init__(self, batch, i):
        for k, v in vars(batch).items():
            setattr(self, k, np.repeat(v[i:i + 1], config.beam_size, axis=0) if isinstance(v, np.ndarray) else v)


decoder = BeamSearch(path)
with torch.no_grad():
    for i in range(2):
        best = decoder.beam_search(OneArticle(batches[1], i))
        print("beam", i, best.tokens, [f"{v:.4f}" for v in best.log_probs], f"{best.avg_log_prob:.4f}",
              tuple(best.state[0].shape), fmt(best.coverage, 3))
print("eval modules", decoder.model.encoder.training, decoder.model.decoder.training)

# the paper's schedule: train without coverage, resume (the Adagrad state
# loaded, its group holding the shared embedding twice), then switch
# coverage on from that checkpoint (decoder.load_state_dict(...,
# strict=False) without W_c, a fresh optimizer)
config.is_coverage = False
nc = Train()
nc.setup_train()
print("no coverage", hasattr(nc.model.decoder.attention_network, "W_c"),
      [f"{nc.train_one_batch(batches[k % 2]):.5f}" for k in range(2)])
nc_path = nc.save_model(3.0, 2)
nc2 = Train()
it_nc, loss_nc = nc2.setup_train(nc_path)
acc = nc2.optimizer.state[nc2.model.encoder.embedding.weight]['sum']
print("resumed without coverage", it_nc, loss_nc, len(nc2.optimizer.state),
      torch.equal(acc, nc.optimizer.state[nc.model.encoder.embedding.weight]['sum']),
      f"{acc.sum().item():.4f}", nc2.optimizer.state_dict()['param_groups'][0]['params'][:3],
      len(nc2.optimizer.state_dict()['param_groups'][0]['params']), f"{nc2.train_one_batch(batches[0]):.5f}")
config.is_coverage = True
cov = Train()
cov.setup_train(nc_path)
keys = cov.model.decoder.load_state_dict(torch.load(nc_path)['decoder_state_dict'], strict=False)
print("coverage from the checkpoint", keys.missing_keys, keys.unexpected_keys,
      torch.equal(cov.model.decoder.out2.weight, nc.model.decoder.out2.weight),
      cov.optimizer.state[cov.model.decoder.out2.weight]['sum'].max().item())
with torch.no_grad():
    cov.model.decoder.attention_network.W_c.weight.copy_(
        torch.from_numpy(np.random.default_rng(9).normal(0, 0.3, (16, 1)).astype(np.float32)))
print("with coverage", [f"{cov.train_one_batch(batches[k % 2]):.5f}" for k in range(2)])


# one training step under torch.compile against the same step eagerly
def train_step(enc_batch, enc_lens, ext, extra_zeros, c_t_1, coverage, dec_batch, dec_padding_mask,
               dec_lens_var, target_batch, enc_padding_mask):
    trainer.optimizer.zero_grad()
    encoder_outputs, encoder_feature, encoder_hidden = m.encoder(enc_batch, enc_lens)
    s_t_1 = m.reduce_state(encoder_hidden)
    step_losses = []
    for di in range(config.max_dec_steps):
        final_dist, s_t_1, c_t_1, attn_dist, p_gen, next_coverage = m.decoder(
            dec_batch[:, di], s_t_1, encoder_outputs, encoder_feature, enc_padding_mask, c_t_1,
            extra_zeros, ext, coverage, di)
        gold_probs = torch.gather(final_dist, 1, target_batch[:, di].unsqueeze(1)).squeeze()
        step_loss = -torch.log(gold_probs + config.eps)
        step_loss = step_loss + config.cov_loss_wt * torch.sum(torch.min(attn_dist, coverage), 1)
        coverage = next_coverage
        step_losses.append(step_loss * dec_padding_mask[:, di])
    loss = torch.mean(torch.sum(torch.stack(step_losses, 1), 1) / dec_lens_var)
    loss.backward()
    clip_grad_norm_(m.encoder.parameters(), config.max_grad_norm)
    clip_grad_norm_(m.decoder.parameters(), config.max_grad_norm)
    clip_grad_norm_(m.reduce_state.parameters(), config.max_grad_norm)
    trainer.optimizer.step()
    return loss


ins = get_input_from_batch(batches[0], use_cuda)
outs = get_output_from_batch(batches[0], use_cuda)
args = (ins[0], ins[2], ins[3], ins[4], ins[5], ins[6], outs[0], outs[1], outs[3], outs[4], ins[1])
mods = (m.encoder, m.decoder, m.reduce_state)
state = [copy.deepcopy(x.state_dict()) for x in mods]
opt_state = copy.deepcopy(trainer.optimizer.state_dict())
eager = [train_step(*args).item() for _ in range(2)]
after = [{k: v.clone() for k, v in x.state_dict().items()} for x in mods]
for x, s in zip(mods, state):
    x.load_state_dict(s)
trainer.optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(*args).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(x.state_dict()[k], a[k], rtol=1e-4, atol=1e-5) for x, a in zip(mods, after) for k in a))
