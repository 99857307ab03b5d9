# ELECTRA the way lucidrains/electra-pytorch writes it: electra_pytorch.py
# (the Results namedtuple, log / gumbel_noise / gumbel_sample,
# prob_mask_like's torch.zeros_like(t).float().uniform_(0, 1) < prob,
# mask_with_tokens' functools.reduce(lambda acc, el: acc | (t == el), ...),
# get_mask_subset_with_prob's mask.sum(dim=-1, keepdim=True), cumsum-based
# mask_excess, rand.masked_fill(~mask, -1e9).topk(max_masked).indices,
# (sampled_indices + 1).masked_fill_(...), new_mask.scatter_(-1, ..., 1) and
# new_mask[:, 1:].bool(), HiddenLayerExtractor's forward hook found by
# module name, Electra.forward with torch.nonzero(mask, as_tuple=True),
# masked_fill(masking_mask * replace_prob, mask_token_id), the random-token
# branch with `random_token_prob &= ~random_no_mask` and torch.where,
# F.cross_entropy(logits.transpose(1, 2), gen_labels, ignore_index=...),
# logits[mask_indices], disc_input[mask_indices] = sampled.detach(),
# F.binary_cross_entropy_with_logits on the non-padded positions, the
# no_grad accuracy metrics) and its README (a generator and a
# discriminator TransformerWrapper-like LM sharing token and positional
# embeddings, the discriminator's hidden layer read through discr_dim /
# discr_layer, AdamW). Changes for a CPU test: a tiny one-layer LM (vocab
# 20, dim 16, sequences of 10), token data and weights from numpy; the
# draws (uniform_, torch.rand, gumbel noise, randint) differ between
# libraries, so the compared runs take replace_prob=1.0 and mask_prob=1.0
# (every position masked, the draws' order then irrelevant) and a
# temperature of 1e-4 (gumbel_sample is argmax), and torch is seeded with
# manual_seed(0) for the random lines; a few steps; then the generator's MLM step under
# torch.compile against the same step eagerly (Electra.forward's nonzero
# indexing breaks torch.compile's graph too).
import copy
import math
from functools import reduce
from collections import namedtuple

import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
from torch import nn
import torch.nn.functional as F

# constants

Results = namedtuple('Results', [
    'loss',
    'mlm_loss',
    'disc_loss',
    'gen_acc',
    'disc_acc',
    'disc_labels',
    'disc_predictions'
])

# helpers

def log(t, eps=1e-9):
    return torch.log(t + eps)

def gumbel_noise(t):
    noise = torch.zeros_like(t).uniform_(0, 1)
    return -log(-log(noise))

def gumbel_sample(t, temperature = 1.):
    return ((t / temperature) + gumbel_noise(t)).argmax(dim=-1)

def prob_mask_like(t, prob):
    return torch.zeros_like(t).float().uniform_(0, 1) < prob

def mask_with_tokens(t, token_ids):
    init_no_mask = torch.full_like(t, False, dtype=torch.bool)
    mask = reduce(lambda acc, el: acc | (t == el), token_ids, init_no_mask)
    return mask

def get_mask_subset_with_prob(mask, prob):
    batch, seq_len, device = *mask.shape, mask.device
    max_masked = math.ceil(prob * seq_len)

    num_tokens = mask.sum(dim=-1, keepdim=True)
    mask_excess = (mask.cumsum(dim=-1) > (num_tokens * prob).ceil())
    mask_excess = mask_excess[:, :max_masked]

    rand = torch.rand((batch, seq_len), device=device).masked_fill(~mask, -1e9)
    _, sampled_indices = rand.topk(max_masked, dim=-1)
    sampled_indices = (sampled_indices + 1).masked_fill_(mask_excess, 0)

    new_mask = torch.zeros((batch, seq_len + 1), device=device)
    new_mask.scatter_(-1, sampled_indices, 1)
    return new_mask[:, 1:].bool()

# hidden layer extractor class, for magically adding adapter to language model to be pretrained

class HiddenLayerExtractor(nn.Module):
    def __init__(self, net, layer = -2):
        super().__init__()
        self.net = net
        self.layer = layer

        self.hidden = None
        self.hook_registered = False

    def _find_layer(self):
        if type(self.layer) == str:
            modules = dict([*self.net.named_modules()])
            return modules.get(self.layer, None)
        elif type(self.layer) == int:
            children = [*self.net.children()]
            return children[self.layer]
        return None

    def _hook(self, _, __, output):
        self.hidden = output

    def _register_hook(self):
        layer = self._find_layer()
        assert layer is not None, f'hidden layer ({self.layer}) not found'
        handle = layer.register_forward_hook(self._hook)
        self.hook_registered = True

    def forward(self, x):
        if self.layer == -1:
            return self.net(x)

        if not self.hook_registered:
            self._register_hook()

        _ = self.net(x)
        hidden = self.hidden
        self.hidden = None
        assert hidden is not None, f'hidden layer {self.layer} never emitted an output'
        return hidden

# main electra class

class Electra(nn.Module):
    def __init__(
        self,
        generator,
        discriminator,
        *,
        num_tokens = None,
        discr_dim = -1,
        discr_layer = -1,
        mask_prob = 0.15,
        replace_prob = 0.85,
        random_token_prob = 0.,
        mask_token_id = 2,
        pad_token_id = 0,
        mask_ignore_token_ids = [],
        disc_weight = 50.,
        gen_weight = 1.,
        temperature = 1.):
        super().__init__()

        self.generator = generator
        self.discriminator = discriminator

        if discr_dim > 0:
            self.discriminator = nn.Sequential(
                HiddenLayerExtractor(discriminator, layer = discr_layer),
                nn.Linear(discr_dim, 1)
            )

        # mlm related probabilities
        self.mask_prob = mask_prob
        self.replace_prob = replace_prob

        self.num_tokens = num_tokens
        self.random_token_prob = random_token_prob

        # token ids
        self.pad_token_id = pad_token_id
        self.mask_token_id = mask_token_id
        self.mask_ignore_token_ids = set([*mask_ignore_token_ids, pad_token_id])

        # sampling temperature
        self.temperature = temperature

        # loss weights
        self.disc_weight = disc_weight
        self.gen_weight = gen_weight


    def forward(self, input, **kwargs):
        b, t = input.shape

        replace_prob = prob_mask_like(input, self.replace_prob)

        # do not mask [pad] tokens, or any other tokens in the tokens designated to be excluded ([cls], [sep])
        # also do not include these special tokens in the tokens chosen at random
        no_mask = mask_with_tokens(input, self.mask_ignore_token_ids)
        mask = get_mask_subset_with_prob(~no_mask, self.mask_prob)

        # get mask indices
        mask_indices = torch.nonzero(mask, as_tuple=True)

        # mask input with mask tokens with probability of `replace_prob` (keep tokens the same with probability 1 - replace_prob)
        masked_input = input.clone().detach()

        # set inverse of mask to padding tokens for labels
        gen_labels = input.masked_fill(~mask, self.pad_token_id)

        # clone the mask, for potential modification if random tokens are involved
        # not to be mistakened for the mask above, which is for all tokens, whether not replaced nor replaced with random tokens
        masking_mask = mask.clone()

        # if random token probability > 0 for mlm
        if self.random_token_prob > 0:
            assert self.num_tokens is not None, 'Number of tokens (num_tokens) must be passed to Electra for randomizing tokens during masked language modeling'

            random_token_prob = prob_mask_like(input, self.random_token_prob)
            random_tokens = torch.randint(0, self.num_tokens, input.shape, device=input.device)
            random_no_mask = mask_with_tokens(random_tokens, self.mask_ignore_token_ids)
            random_token_prob &= ~random_no_mask
            masked_input = torch.where(random_token_prob, random_tokens, masked_input)

            # remove random token prob mask from masking mask
            masking_mask = masking_mask & ~random_token_prob

        # [mask] input
        masked_input = masked_input.masked_fill(masking_mask * replace_prob, self.mask_token_id)

        # get generator output and get mlm loss
        logits = self.generator(masked_input, **kwargs)

        mlm_loss = F.cross_entropy(
            logits.transpose(1, 2),
            gen_labels,
            ignore_index = self.pad_token_id
        )

        # use mask from before to select logits that need sampling
        sample_logits = logits[mask_indices]

        # sample
        sampled = gumbel_sample(sample_logits, temperature = self.temperature)

        # scatter the sampled values back to the input
        disc_input = input.clone()
        disc_input[mask_indices] = sampled.detach()

        # generate discriminator labels, with replaced as True and original as False
        disc_labels = (input != disc_input).float().detach()

        # get discriminator predictions of replaced / original
        non_padded_indices = torch.nonzero(input != self.pad_token_id, as_tuple=True)

        # get discriminator output and binary cross entropy loss
        disc_logits = self.discriminator(disc_input, **kwargs)
        disc_logits = disc_logits.reshape_as(disc_labels)

        disc_loss = F.binary_cross_entropy_with_logits(
            disc_logits[non_padded_indices],
            disc_labels[non_padded_indices]
        )

        # gather metrics
        with torch.no_grad():
            gen_predictions = torch.argmax(logits, dim=-1)
            disc_predictions = torch.round((torch.sign(disc_logits) + 1.0) * 0.5)
            gen_acc = (gen_labels[mask] == gen_predictions[mask]).float().mean()
            disc_acc = 0.5 * (disc_labels[mask] == disc_predictions[mask]).float().mean() + 0.5 * (disc_labels[~mask] == disc_predictions[~mask]).float().mean()

        # return weighted sum of losses
        return Results(self.gen_weight * mlm_loss + self.disc_weight * disc_loss, mlm_loss, disc_loss, gen_acc, disc_acc, disc_labels, disc_predictions)


# ---------------------------------------------------------------- README: a TransformerWrapper-like LM
class TransformerLM(nn.Module):
    def __init__(self, num_tokens, dim, depth, heads, max_seq_len, logits_dim=None):
        super().__init__()
        self.token_emb = nn.Embedding(num_tokens, dim)
        self.pos_emb = nn.Embedding(max_seq_len, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=dim * 2, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.to_logits = nn.Linear(dim, logits_dim or num_tokens)

    def forward(self, x):
        pos = torch.arange(x.shape[1], device=x.device)
        h = self.token_emb(x) + self.pos_emb(pos)[None]
        h = self.norm(self.encoder(h))
        return self.to_logits(h)


# ---------------------------------------------------------------- the test
def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


rng = np.random.default_rng(0)
PAD, CLS, MASK, SEP = 0, 1, 2, 3
num_tokens, seq_len = 20, 10


def batch(b):
    lengths = rng.integers(5, seq_len + 1, b)
    x = np.zeros((b, seq_len), dtype=np.int64)
    for i, n in enumerate(lengths):
        x[i, 0], x[i, n - 1] = CLS, SEP
        x[i, 1:n - 1] = rng.integers(4, num_tokens, n - 2)
    return torch.from_numpy(x)


data = batch(4)
print("data", data.tolist()[0])
no_mask = mask_with_tokens(data, {PAD, CLS, SEP})
print("mask_with_tokens", no_mask.sum(dim=-1).tolist(), no_mask.dtype)
sub = get_mask_subset_with_prob(~no_mask, 0.3)
print("subset counts", sub.sum(dim=-1).tolist(), sub.dtype, "within mask", bool((sub & no_mask).sum() == 0))
everything = get_mask_subset_with_prob(~no_mask, 1.0)
print("prob 1.0 masks every position", everything.all().item())
pm = prob_mask_like(data, 0.5)
print("prob_mask_like", pm.dtype, tuple(pm.shape), prob_mask_like(data, 1.0).all().item(), prob_mask_like(data, 0.0).any().item(),
      "fraction", f"{pm.float().mean().item():.2f}")
t = torch.from_numpy(rng.normal(0, 1, (6, num_tokens)).astype(np.float32))
print("gumbel_sample at low temperature is argmax", torch.equal(gumbel_sample(t, temperature=1e-4), t.argmax(dim=-1)),
      "at 1.0", gumbel_sample(t).tolist())
noise = gumbel_noise(t)
print("gumbel noise finite", bool(torch.isfinite(noise).all()), tuple(noise.shape))

torch.manual_seed(0)
generator = TransformerLM(num_tokens=num_tokens, dim=16, depth=1, heads=2, max_seq_len=seq_len)
discriminator = TransformerLM(num_tokens=num_tokens, dim=16, depth=1, heads=2, max_seq_len=seq_len)
# (tie the token and positional embeddings of the generator and discriminator)
generator.token_emb = discriminator.token_emb
generator.pos_emb = discriminator.pos_emb
with torch.no_grad():
    for n, p in list(generator.named_parameters()) + list(discriminator.named_parameters()):
        p.copy_(torch.from_numpy(rng.normal(1.0 if n.endswith('norm.weight') or 'norm1.weight' in n or 'norm2.weight' in n else 0.0,
                                            0.3, tuple(p.shape)).astype(np.float32)))
trainer = Electra(
    generator,
    discriminator,
    discr_dim=16,
    discr_layer='norm',
    mask_token_id=MASK,
    pad_token_id=PAD,
    mask_prob=1.0,
    replace_prob=1.0,
    mask_ignore_token_ids=[CLS, SEP],
    temperature=1e-4,
)
with torch.no_grad():     # (the discriminator's nn.Linear(discr_dim, 1) head, made by Electra)
    for p in trainer.discriminator[1].parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, tuple(p.shape)).astype(np.float32)))
print("parameters", sum(p.numel() for p in trainer.parameters()), "shared",
      trainer.generator.token_emb.weight is trainer.discriminator[0].net.token_emb.weight,
      type(trainer.discriminator).__name__, trainer.mask_ignore_token_ids == {0, 1, 3})

results = trainer(data)
print("Results", results._fields)
print("losses", f"{results.loss.item():.5f}", f"{results.mlm_loss.item():.5f}", f"{results.disc_loss.item():.5f}",
      "acc", f"{results.gen_acc.item():.4f}", f"{results.disc_acc.item():.4f}")
print("disc labels", results.disc_labels[0].tolist(), "predictions", results.disc_predictions[0].tolist())
results.loss.backward()
print("grads: shared embedding", fmt(trainer.generator.token_emb.weight.grad[4], 4),
      "disc head", fmt(trainer.discriminator[1].weight.grad, 4),
      "generator out", fmt(trainer.generator.to_logits.bias.grad, 4),
      "disc to_logits unused", trainer.discriminator[0].net.to_logits.weight.grad)

# the random-token branch (random draws)
rand_trainer = Electra(generator, discriminator, num_tokens=num_tokens, discr_dim=16, discr_layer='norm',
                       random_token_prob=0.3, mask_ignore_token_ids=[CLS, SEP])
rand_trainer.discriminator = trainer.discriminator
r = rand_trainer(data)
print("random tokens", f"{r.loss.item():.3f}", tuple(r.disc_labels.shape), r.disc_predictions.dtype)

optimizer = torch.optim.AdamW(trainer.parameters(), lr=3e-3)
trainer.zero_grad()
for step in range(3):
    x = batch(4)
    results = trainer(x)
    optimizer.zero_grad()
    results.loss.backward()
    optimizer.step()
    print(f"step {step}: loss {results.loss.item():.5f} mlm {results.mlm_loss.item():.5f} "
          f"disc {results.disc_loss.item():.5f} gen_acc {results.gen_acc.item():.4f} disc_acc {results.disc_acc.item():.4f}")
print("after", fmt(generator.to_logits.weight, 4), fmt(trainer.discriminator[1].weight, 4))


# the generator's MLM step under torch.compile against the same step eagerly
gen_opt = torch.optim.AdamW(generator.parameters(), lr=1e-3)
masked = data.masked_fill(~no_mask, MASK)
gen_labels = data.masked_fill(no_mask, PAD)


def train_step(masked_input, labels):
    gen_opt.zero_grad()
    logits = generator(masked_input)
    loss = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=PAD)
    loss.backward()
    gen_opt.step()
    return loss


state, opt_state = copy.deepcopy(generator.state_dict()), copy.deepcopy(gen_opt.state_dict())
eager = [train_step(masked, gen_labels).item() for _ in range(2)]
after = {k: v.clone() for k, v in generator.state_dict().items()}
generator.load_state_dict(state)
gen_opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(masked, gen_labels).item() for _ in range(2)]

# (the key third of in_proj_bias has an exactly zero gradient, softmax
# being shift invariant: AdamW's normalized step follows rounding noise
# there, in either library, so it is left out of the comparison)
def compared(k, v):
    return torch.cat([v[:16], v[32:]]) if k.endswith('in_proj_bias') else v


print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(compared(k, generator.state_dict()[k]), compared(k, after[k]), rtol=1e-4, atol=1e-5)
          for k in after))
