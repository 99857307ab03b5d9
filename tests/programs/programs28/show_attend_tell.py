# "Show, Attend and Tell" captioning (sgrvinod/a-PyTorch-Tutorial-to-Image-
# Captioning, models.py, train.py and utils.py), as written: Encoder
# (nn.AdaptiveAvgPool2d((enc_image_size, enc_image_size)), permute(0, 2, 3,
# 1), fine_tune freezing by p.requires_grad = False over children), the
# Attention module (full_att(relu(att1 + att2.unsqueeze(1))).squeeze(2),
# softmax, (encoder_out * alpha.unsqueeze(2)).sum(dim=1)),
# DecoderWithAttention (init_hidden_state from encoder_out.mean(dim=1), the
# batch sorted by caption_lengths.squeeze(1).sort(dim=0, descending=True),
# decode_lengths = (caption_lengths - 1).tolist(), the time loop over
# batch_size_t = sum([l > t for l in decode_lengths]) with an LSTMCell on
# h[:batch_size_t], the sigmoid f_beta gate, predictions[:batch_size_t, t,
# :] = preds and alphas written in place, dropout); train(): targets =
# caps_sorted[:, 1:], pack_padded_sequence(..., batch_first=True).data,
# CrossEntropyLoss plus the doubly stochastic attention regularisation
# alpha_c * ((1. - alphas.sum(dim=1)) ** 2).mean(), clip_gradient
# (param.grad.data.clamp_), accuracy by topk and ind.eq(targets.view(-1,
# 1).expand_as(ind)), AverageMeter. The encoder: a small conv stack in
# place of the pretrained resnet101. Written for this test: 8x8 images, a
# 12-word vocabulary, captions of 4-7 tokens, 3 steps; one compiled
# training step against eager (decoder dropout 0 there: compiled draws are
# not eager's).
import copy

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence


class Encoder(nn.Module):
    def __init__(self, encoded_image_size=4):
        super(Encoder, self).__init__()
        self.enc_image_size = encoded_image_size
        resnet = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                               nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        modules = list(resnet.children())
        self.resnet = nn.Sequential(*modules)
        self.adaptive_pool = nn.AdaptiveAvgPool2d((encoded_image_size, encoded_image_size))
        self.fine_tune()

    def forward(self, images):
        out = self.resnet(images)  # (batch_size, 2048, image_size/32, image_size/32)
        out = self.adaptive_pool(out)  # (batch_size, 2048, encoded_image_size, encoded_image_size)
        out = out.permute(0, 2, 3, 1)  # (batch_size, encoded_image_size, encoded_image_size, 2048)
        return out

    def fine_tune(self, fine_tune=True):
        for p in self.resnet.parameters():
            p.requires_grad = False
        # If fine-tuning, only fine-tune convolutional blocks 2 through 4
        for c in list(self.resnet.children())[3:]:
            for p in c.parameters():
                p.requires_grad = fine_tune


class Attention(nn.Module):
    def __init__(self, encoder_dim, decoder_dim, attention_dim):
        super(Attention, self).__init__()
        self.encoder_att = nn.Linear(encoder_dim, attention_dim)  # linear layer to transform encoded image
        self.decoder_att = nn.Linear(decoder_dim, attention_dim)  # linear layer to transform decoder's output
        self.full_att = nn.Linear(attention_dim, 1)  # linear layer to calculate values to be softmax-ed
        self.relu = nn.ReLU()
        self.softmax = nn.Softmax(dim=1)  # softmax layer to calculate weights

    def forward(self, encoder_out, decoder_hidden):
        att1 = self.encoder_att(encoder_out)  # (batch_size, num_pixels, attention_dim)
        att2 = self.decoder_att(decoder_hidden)  # (batch_size, attention_dim)
        att = self.full_att(self.relu(att1 + att2.unsqueeze(1))).squeeze(2)  # (batch_size, num_pixels)
        alpha = self.softmax(att)  # (batch_size, num_pixels)
        attention_weighted_encoding = (encoder_out * alpha.unsqueeze(2)).sum(dim=1)  # (batch_size, encoder_dim)
        return attention_weighted_encoding, alpha


class DecoderWithAttention(nn.Module):
    def __init__(self, attention_dim, embed_dim, decoder_dim, vocab_size, encoder_dim=2048, dropout=0.5):
        super(DecoderWithAttention, self).__init__()
        self.encoder_dim = encoder_dim
        self.attention_dim = attention_dim
        self.embed_dim = embed_dim
        self.decoder_dim = decoder_dim
        self.vocab_size = vocab_size
        self.dropout = dropout

        self.attention = Attention(encoder_dim, decoder_dim, attention_dim)  # attention network

        self.embedding = nn.Embedding(vocab_size, embed_dim)  # embedding layer
        self.dropout = nn.Dropout(p=self.dropout)
        self.decode_step = nn.LSTMCell(embed_dim + encoder_dim, decoder_dim, bias=True)  # decoding LSTMCell
        self.init_h = nn.Linear(encoder_dim, decoder_dim)  # linear layer to find initial hidden state of LSTMCell
        self.init_c = nn.Linear(encoder_dim, decoder_dim)  # linear layer to find initial cell state of LSTMCell
        self.f_beta = nn.Linear(decoder_dim, encoder_dim)  # linear layer to create a sigmoid-activated gate
        self.sigmoid = nn.Sigmoid()
        self.fc = nn.Linear(decoder_dim, vocab_size)  # linear layer to find scores over vocabulary
        self.init_weights()  # initialize some layers with the uniform distribution

    def init_weights(self):
        self.embedding.weight.data.uniform_(-0.1, 0.1)
        self.fc.bias.data.fill_(0)
        self.fc.weight.data.uniform_(-0.1, 0.1)

    def init_hidden_state(self, encoder_out):
        mean_encoder_out = encoder_out.mean(dim=1)
        h = self.init_h(mean_encoder_out)  # (batch_size, decoder_dim)
        c = self.init_c(mean_encoder_out)
        return h, c

    def forward(self, encoder_out, encoded_captions, caption_lengths):
        batch_size = encoder_out.size(0)
        encoder_dim = encoder_out.size(-1)
        vocab_size = self.vocab_size

        # Flatten image
        encoder_out = encoder_out.view(batch_size, -1, encoder_dim)  # (batch_size, num_pixels, encoder_dim)
        num_pixels = encoder_out.size(1)

        # Sort input data by decreasing lengths; why? apparent below
        caption_lengths, sort_ind = caption_lengths.squeeze(1).sort(dim=0, descending=True)
        encoder_out = encoder_out[sort_ind]
        encoded_captions = encoded_captions[sort_ind]

        # Embedding
        embeddings = self.embedding(encoded_captions)  # (batch_size, max_caption_length, embed_dim)

        # Initialize LSTM state
        h, c = self.init_hidden_state(encoder_out)  # (batch_size, decoder_dim)

        # We won't decode at the <end> position, since we've finished generating as soon as we generate <end>
        # So, decoding lengths are actual lengths - 1
        decode_lengths = (caption_lengths - 1).tolist()

        # Create tensors to hold word predicion scores and alphas
        predictions = torch.zeros(batch_size, max(decode_lengths), vocab_size)
        alphas = torch.zeros(batch_size, max(decode_lengths), num_pixels)

        # At each time-step, decode by
        # attention-weighing the encoder's output based on the decoder's previous hidden state output
        # then generate a new word in the decoder with the previous word and the attention weighted encoding
        for t in range(max(decode_lengths)):
            batch_size_t = sum([l > t for l in decode_lengths])
            attention_weighted_encoding, alpha = self.attention(encoder_out[:batch_size_t],
                                                                h[:batch_size_t])
            gate = self.sigmoid(self.f_beta(h[:batch_size_t]))  # gating scalar, (batch_size_t, encoder_dim)
            attention_weighted_encoding = gate * attention_weighted_encoding
            h, c = self.decode_step(
                torch.cat([embeddings[:batch_size_t, t, :], attention_weighted_encoding], dim=1),
                (h[:batch_size_t], c[:batch_size_t]))  # (batch_size_t, decoder_dim)
            preds = self.fc(self.dropout(h))  # (batch_size_t, vocab_size)
            predictions[:batch_size_t, t, :] = preds
            alphas[:batch_size_t, t, :] = alpha

        return predictions, encoded_captions, decode_lengths, alphas, sort_ind


def clip_gradient(optimizer, grad_clip):
    for group in optimizer.param_groups:
        for param in group['params']:
            if param.grad is not None:
                param.grad.data.clamp_(-grad_clip, grad_clip)


class AverageMeter(object):
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def accuracy(scores, targets, k):
    batch_size = targets.size(0)
    _, ind = scores.topk(k, 1, True, True)
    correct = ind.eq(targets.view(-1, 1).expand_as(ind))
    correct_total = correct.view(-1).float().sum()  # 0D tensor
    return correct_total.item() * (100.0 / batch_size)


emb_dim, attention_dim, decoder_dim, vocab = 8, 8, 12, 12
grad_clip, alpha_c = 5., 1.
torch.manual_seed(0)
encoder = Encoder(encoded_image_size=4)
decoder = DecoderWithAttention(attention_dim=attention_dim, embed_dim=emb_dim, decoder_dim=decoder_dim,
                               vocab_size=vocab, encoder_dim=16, dropout=0.5)
decoder_optimizer = torch.optim.Adam(params=filter(lambda p: p.requires_grad, decoder.parameters()), lr=4e-3)
encoder_optimizer = torch.optim.Adam(params=filter(lambda p: p.requires_grad, encoder.parameters()), lr=1e-3)
criterion = nn.CrossEntropyLoss()
print("trainable encoder", sum(p.numel() for p in encoder.parameters() if p.requires_grad),
      "frozen", sum(p.numel() for p in encoder.parameters() if not p.requires_grad))

imgs = torch.randn(5, 3, 8, 8)
caplens = torch.tensor([[5], [7], [4], [6], [7]])
caps = torch.randint(3, vocab, (5, 7))
caps[:, 0] = 1                                  # <start>
for i, l in enumerate(caplens.squeeze(1).tolist()):
    caps[i, l - 1] = 2                          # <end>
    caps[i, l:] = 0                             # <pad>


def train_step(imgs, caps, caplens):
    imgs = encoder(imgs)
    scores, caps_sorted, decode_lengths, alphas, sort_ind = decoder(imgs, caps, caplens)

    # Since we decoded starting with <start>, the targets are all words after <start>, up to <end>
    targets = caps_sorted[:, 1:]

    # Remove timesteps that we didn't decode at, or are pads
    # pack_padded_sequence is an easy trick to do this
    scores = pack_padded_sequence(scores, decode_lengths, batch_first=True).data
    targets = pack_padded_sequence(targets, decode_lengths, batch_first=True).data

    # Calculate loss
    loss = criterion(scores, targets)

    # Add doubly stochastic attention regularization
    loss += alpha_c * ((1. - alphas.sum(dim=1)) ** 2).mean()

    # Back prop.
    decoder_optimizer.zero_grad()
    encoder_optimizer.zero_grad()
    loss.backward()

    # Clip gradients
    clip_gradient(decoder_optimizer, grad_clip)
    clip_gradient(encoder_optimizer, grad_clip)

    # Update weights
    decoder_optimizer.step()
    encoder_optimizer.step()
    return loss, scores, targets, sum(decode_lengths)


losses, top5accs = AverageMeter(), AverageMeter()
encoder.train()
decoder.train()
for i in range(3):
    loss, scores, targets, n = train_step(imgs, caps, caplens)
    top5 = accuracy(scores, targets, 5)
    losses.update(loss.item(), n)
    top5accs.update(top5, n)
    print('Epoch: [0][{0}/3]\tLoss {loss.val:.4f} ({loss.avg:.4f})\tTop-5 Accuracy {top5.val:.3f} ({top5.avg:.3f})'
          .format(i, loss=losses, top5=top5accs))

decoder.dropout.p = 0.0
state = [copy.deepcopy(m.state_dict()) for m in (encoder, decoder, encoder_optimizer, decoder_optimizer)]
loss_c, scores_c, _, _ = torch.compile(train_step)(imgs, caps, caplens)
after_c = [copy.deepcopy(m.state_dict()) for m in (encoder, decoder)]
for m, s in zip((encoder, decoder, encoder_optimizer, decoder_optimizer), state):
    m.load_state_dict(s)
loss_e, scores_e, _, _ = train_step(imgs, caps, caplens)
print("compiled loss {:.5f}".format(loss_c.item()))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6), torch.allclose(scores_c, scores_e, atol=1e-5),
      all(torch.allclose(a[k], v, atol=1e-5) for a, m in zip(after_c, (encoder, decoder))
          for k, v in m.state_dict().items() if v.is_floating_point()))
