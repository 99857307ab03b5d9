# A DreamerV2 world-model / imagination step the way RajGhugare19/dreamerv2
# (a PyTorch port of danijar/dreamerv2) writes it: RSSMDiscState as a
# namedtuple (logit, stoch, deter), the RSSM with a GRUCell deterministic
# state, discrete latents (category_size x class_size) sampled from
# OneHotCategorical with the straight-through trick (stoch += dist.probs -
# dist.probs.detach()), get_dist as td.Independent(
# td.OneHotCategoricalStraightThrough(logits=...), 1), rssm_observe /
# rollout_observation / rollout_imagination stacking states with
# torch.stack per field, seq_to_batch reshapes, KL balancing through
# kl_divergence of detached posteriors / priors with free nats by
# new_full + torch.max, the observation decoder's td.Independent(
# td.Normal(mean, 1), 1) log_prob, the discount model's
# td.Independent(td.Bernoulli(logits=...), 1), the actor's
# straight-through one-hot actions and entropy, and lambda returns
# computed backwards in a Python loop then torch.flip. Changes for a CPU
# test: tiny sizes (4 x 4 latents), vector observations from numpy, weights
# from numpy, a few steps; sampled values are [rng], checked through
# invariants; then one world-model training step under torch.compile
# against the same step eagerly (both seeded alike).
import copy
from collections import namedtuple

import numpy as np
import torch
import torch.distributions as td
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import kl_divergence

RSSMDiscState = namedtuple('RSSMDiscState', ['logit', 'stoch', 'deter'])


def seq_to_batch(sequence_data, batch_size, seq_len):
    """
    converts a sequence of length L and batch_size B to a single batch of size L*B
    """
    shp = tuple(sequence_data.shape)
    batch_data = torch.reshape(sequence_data, [shp[0]*shp[1], *shp[2:]])
    return batch_data


def batch_to_seq(batch_data, batch_size, seq_len):
    shp = tuple(batch_data.shape)
    seq_data = torch.reshape(batch_data, [seq_len, batch_size, *shp[1:]])
    return seq_data


class RSSMUtils(object):
    '''utility functions for dealing with rssm states'''
    def __init__(self, rssm_type, info):
        self.rssm_type = rssm_type
        if rssm_type == 'discrete':
            self.deter_size = info['deter_size']
            self.class_size = info['class_size']
            self.category_size = info['category_size']
            self.stoch_size = self.class_size*self.category_size

    def rssm_seq_to_batch(self, rssm_state, batch_size, seq_len):
        return RSSMDiscState(
            seq_to_batch(rssm_state.logit[:seq_len], batch_size, seq_len),
            seq_to_batch(rssm_state.stoch[:seq_len], batch_size, seq_len),
            seq_to_batch(rssm_state.deter[:seq_len], batch_size, seq_len)
        )

    def rssm_batch_to_seq(self, rssm_state, batch_size, seq_len):
        return RSSMDiscState(
            batch_to_seq(rssm_state.logit, batch_size, seq_len),
            batch_to_seq(rssm_state.stoch, batch_size, seq_len),
            batch_to_seq(rssm_state.deter, batch_size, seq_len)
        )

    def get_dist(self, rssm_state):
        shape = rssm_state.logit.shape
        logit = torch.reshape(rssm_state.logit, shape = (*shape[:-1], self.category_size, self.class_size))
        return td.Independent(td.OneHotCategoricalStraightThrough(logits=logit), 1)

    def get_stoch_state(self, stats):
        logit = stats['logit']
        shape = logit.shape
        logit = torch.reshape(logit, shape = (*shape[:-1], self.category_size, self.class_size))
        dist = torch.distributions.OneHotCategorical(logits=logit)
        stoch = dist.sample()
        stoch += dist.probs - dist.probs.detach()
        return torch.flatten(stoch, start_dim=-2, end_dim=-1)

    def rssm_stack_states(self, rssm_states, dim):
        return RSSMDiscState(
            torch.stack([state.logit for state in rssm_states], dim=dim),
            torch.stack([state.stoch for state in rssm_states], dim=dim),
            torch.stack([state.deter for state in rssm_states], dim=dim),
        )

    def get_model_state(self, rssm_state):
        return torch.cat((rssm_state.deter, rssm_state.stoch), dim=-1)

    def rssm_detach(self, rssm_state):
        return RSSMDiscState(
            rssm_state.logit.detach(),
            rssm_state.stoch.detach(),
            rssm_state.deter.detach(),
        )

    def _init_rssm_state(self, batch_size, **kwargs):
        return RSSMDiscState(
            torch.zeros(batch_size, self.stoch_size, **kwargs).to(self.device),
            torch.zeros(batch_size, self.stoch_size, **kwargs).to(self.device),
            torch.zeros(batch_size, self.deter_size, **kwargs).to(self.device),
        )


class RSSM(nn.Module, RSSMUtils):
    def __init__(self, action_size, rssm_node_size, embedding_size, device, rssm_type, info, act_fn=nn.ELU):
        nn.Module.__init__(self)
        RSSMUtils.__init__(self, rssm_type=rssm_type, info=info)
        self.device = device
        self.action_size = action_size
        self.node_size = rssm_node_size
        self.embedding_size = embedding_size
        self.act_fn = act_fn
        self.rnn = nn.GRUCell(self.deter_size, self.deter_size)
        self.fc_embed_state_action = self._build_embed_state_action()
        self.fc_prior = self._build_temporal_prior()
        self.fc_posterior = self._build_temporal_posterior()

    def _build_embed_state_action(self):
        """
        model is supposed to take in previous stochastic state and previous action
        and embed it to deter size for rnn input
        """
        fc_embed_state_action = [nn.Linear(self.stoch_size + self.action_size, self.deter_size)]
        fc_embed_state_action += [self.act_fn()]
        return nn.Sequential(*fc_embed_state_action)

    def _build_temporal_prior(self):
        """
        model is supposed to take in latest deterministic state
        and output prior over stochastic state
        """
        temporal_prior = [nn.Linear(self.deter_size, self.node_size)]
        temporal_prior += [self.act_fn()]
        temporal_prior += [nn.Linear(self.node_size, self.stoch_size)]
        return nn.Sequential(*temporal_prior)

    def _build_temporal_posterior(self):
        """
        model is supposed to take in latest embedded observation and deterministic state
        and output posterior over stochastic states
        """
        temporal_posterior = [nn.Linear(self.deter_size + self.embedding_size, self.node_size)]
        temporal_posterior += [self.act_fn()]
        temporal_posterior += [nn.Linear(self.node_size, self.stoch_size)]
        return nn.Sequential(*temporal_posterior)

    def rssm_imagine(self, prev_action, prev_rssm_state, nonterms=True):
        state_action_embed = self.fc_embed_state_action(torch.cat([prev_rssm_state.stoch*nonterms, prev_action],dim=-1))
        deter_state = self.rnn(state_action_embed, prev_rssm_state.deter*nonterms)
        prior_logit = self.fc_prior(deter_state)
        stats = {'logit':prior_logit}
        prior_stoch_state = self.get_stoch_state(stats)
        prior_rssm_state = RSSMDiscState(prior_logit, prior_stoch_state, deter_state)
        return prior_rssm_state

    def rollout_imagination(self, horizon:int, actor:nn.Module, prev_rssm_state):
        rssm_state = prev_rssm_state
        next_rssm_states = []
        action_entropy = []
        imag_log_probs = []
        for t in range(horizon):
            action, action_dist = actor((self.get_model_state(rssm_state)).detach())
            rssm_state = self.rssm_imagine(action, rssm_state)
            next_rssm_states.append(rssm_state)
            action_entropy.append(action_dist.entropy())
            imag_log_probs.append(action_dist.log_prob(torch.round(action.detach())))

        next_rssm_states = self.rssm_stack_states(next_rssm_states, dim=0)
        action_entropy = torch.stack(action_entropy, dim=0)
        imag_log_probs = torch.stack(imag_log_probs, dim=0)
        return next_rssm_states, imag_log_probs, action_entropy

    def rssm_observe(self, obs_embed, prev_action, prev_nonterm, prev_rssm_state):
        prior_rssm_state = self.rssm_imagine(prev_action, prev_rssm_state, prev_nonterm)
        deter_state = prior_rssm_state.deter
        x = torch.cat([deter_state, obs_embed], dim=-1)
        posterior_logit = self.fc_posterior(x)
        stats = {'logit':posterior_logit}
        posterior_stoch_state = self.get_stoch_state(stats)
        posterior_rssm_state = RSSMDiscState(posterior_logit, posterior_stoch_state, deter_state)
        return prior_rssm_state, posterior_rssm_state

    def rollout_observation(self, seq_len:int, obs_embed: torch.Tensor, action: torch.Tensor, nonterms: torch.Tensor, prev_rssm_state):
        priors = []
        posteriors = []
        for t in range(seq_len):
            prev_action = action[t]*nonterms[t]
            prior_rssm_state, posterior_rssm_state = self.rssm_observe(obs_embed[t], prev_action, nonterms[t], prev_rssm_state)
            priors.append(prior_rssm_state)
            posteriors.append(posterior_rssm_state)
            prev_rssm_state = posterior_rssm_state
        prior = self.rssm_stack_states(priors, dim=0)
        post = self.rssm_stack_states(posteriors, dim=0)
        return prior, post


class DiscreteActionModel(nn.Module):
    def __init__(self, action_size, deter_size, stoch_size, embedding_size, actor_info, expl_info):
        super().__init__()
        self.action_size = action_size
        self.deter_size = deter_size
        self.stoch_size = stoch_size
        self.embedding_size = embedding_size
        self.layers = actor_info['layers']
        self.node_size = actor_info['node_size']
        self.act_fn = actor_info['activation']
        self.dist = actor_info['dist']
        self.train_noise = expl_info['train_noise']
        self.eval_noise = expl_info['eval_noise']
        self.expl_min = expl_info['expl_min']
        self.expl_decay = expl_info['expl_decay']
        self.expl_type = expl_info['expl_type']
        self.model = self._build_model()

    def _build_model(self):
        model = [nn.Linear(self.deter_size + self.stoch_size, self.node_size)]
        model += [self.act_fn()]
        for i in range(1, self.layers):
            model += [nn.Linear(self.node_size, self.node_size)]
            model += [self.act_fn()]

        if self.dist == 'one_hot':
            model += [nn.Linear(self.node_size, self.action_size)]
        else:
            raise NotImplementedError
        return nn.Sequential(*model)

    def forward(self, model_state):
        action_dist = self.get_action_dist(model_state)
        action = action_dist.sample()
        action = action + action_dist.probs - action_dist.probs.detach()
        return action, action_dist

    def get_action_dist(self, modelstate):
        logits = self.model(modelstate)
        if self.dist == 'one_hot':
            return torch.distributions.OneHotCategorical(logits=logits)
        else:
            raise NotImplementedError


class DenseModel(nn.Module):
    def __init__(self, output_shape, input_size, info):
        super().__init__()
        self._output_shape = output_shape
        self._input_size = input_size
        self._layers = info['layers']
        self._node_size = info['node_size']
        self.activation = info['activation']
        self.dist = info['dist']
        self.model = self.build_model()

    def build_model(self):
        model = [nn.Linear(self._input_size, self._node_size)]
        model += [self.activation()]
        for i in range(self._layers-1):
            model += [nn.Linear(self._node_size, self._node_size)]
            model += [self.activation()]
        model += [nn.Linear(self._node_size, int(np.prod(self._output_shape)))]
        return nn.Sequential(*model)

    def forward(self, input):
        dist_inputs = self.model(input)
        if self.dist == 'normal':
            return td.independent.Independent(td.Normal(dist_inputs, 1), len(self._output_shape))
        if self.dist == 'binary':
            return td.independent.Independent(td.Bernoulli(logits=dist_inputs), len(self._output_shape))
        if self.dist == None:
            return dist_inputs

        raise NotImplementedError(self.dist)


def compute_return(
                reward: torch.Tensor,
                value: torch.Tensor,
                discount: torch.Tensor,
                bootstrap: torch.Tensor,
                lambda_: float
            ):
    """
    Compute the discounted reward for a batch of data.
    reward, value, and discount are all shape [horizon - 1, batch, 1] (last element is cut off)
    Bootstrap is [batch, 1]
    """
    next_values = torch.cat([value[1:], bootstrap[None]], 0)
    target = reward + discount * next_values * (1 - lambda_)
    timesteps = list(range(reward.shape[0] - 1, -1, -1))
    outputs = []
    accumulated_reward = bootstrap
    for t in timesteps:
        inp = target[t]
        discount_factor = discount[t]
        accumulated_reward = inp + discount_factor * lambda_ * accumulated_reward
        outputs.append(accumulated_reward)
    returns = torch.flip(torch.stack(outputs), [0])
    return returns


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


r = np.random.default_rng(0)
device = torch.device('cpu')
obs_size, action_size, embedding_size = 6, 3, 8
rssm_info = {'deter_size': 12, 'stoch_size': 16, 'class_size': 4, 'category_size': 4, 'min_std': 0.1}
kl_info = {'use_kl_balance': True, 'kl_balance_scale': 0.8, 'use_free_nats': True, 'free_nats': 0.0}
dense = {'layers': 2, 'node_size': 16, 'activation': nn.ELU}
rssm = RSSM(action_size, 16, embedding_size, device, 'discrete', rssm_info)
encoder = nn.Sequential(nn.Linear(obs_size, embedding_size), nn.ELU())
modelstate_size = rssm.deter_size + rssm.stoch_size
obs_decoder = DenseModel((obs_size,), modelstate_size, {**dense, 'dist': 'normal'})
reward_decoder = DenseModel((1,), modelstate_size, {**dense, 'dist': 'normal'})
discount_model = DenseModel((1,), modelstate_size, {**dense, 'dist': 'binary'})
value_model = DenseModel((1,), modelstate_size, {**dense, 'dist': 'normal'})
actor = DiscreteActionModel(action_size, rssm.deter_size, rssm.stoch_size, embedding_size,
                            {'layers': 2, 'node_size': 16, 'activation': nn.ELU, 'dist': 'one_hot'},
                            {'train_noise': 0.4, 'eval_noise': 0.0, 'expl_min': 0.05, 'expl_decay': 7000.0,
                             'expl_type': 'epsilon_greedy'})
world_list = [encoder, rssm, reward_decoder, obs_decoder, discount_model]
with torch.no_grad():
    for m in world_list + [value_model, actor]:
        for p in m.parameters():
            p.copy_(torch.from_numpy(r.normal(0, 0.3, tuple(p.shape)).astype(np.float32)))


def get_parameters(modules):
    model_parameters = []
    for module in modules:
        model_parameters += list(module.parameters())
    return model_parameters


print("rssm", rssm.stoch_size, type(rssm.rnn).__name__, len(get_parameters(world_list)),
      sum(p.numel() for p in get_parameters(world_list)), isinstance(rssm, RSSMUtils))

# distributions on fixed logits: KL balancing, Independent, straight-through
la = torch.from_numpy(r.normal(size=(2, 5, 16)).astype(np.float32)).requires_grad_(True)
lb = torch.from_numpy(r.normal(size=(2, 5, 16)).astype(np.float32)).requires_grad_(True)
prior = RSSMDiscState(la, torch.zeros(2, 5, 16), torch.zeros(2, 5, 12))
posterior = RSSMDiscState(lb, torch.zeros(2, 5, 16), torch.zeros(2, 5, 12))


def kl_loss(prior, posterior):
    prior_dist = rssm.get_dist(prior)
    post_dist = rssm.get_dist(posterior)
    alpha = kl_info['kl_balance_scale']
    kl_lhs = torch.mean(kl_divergence(rssm.get_dist(rssm.rssm_detach(posterior)), prior_dist))
    kl_rhs = torch.mean(kl_divergence(post_dist, rssm.get_dist(rssm.rssm_detach(prior))))
    if kl_info['use_free_nats']:
        free_nats = kl_info['free_nats']
        kl_lhs = torch.max(kl_lhs, kl_lhs.new_full(kl_lhs.size(), free_nats))
        kl_rhs = torch.max(kl_rhs, kl_rhs.new_full(kl_rhs.size(), free_nats))
    kl_loss = alpha*kl_lhs + (1-alpha)*kl_rhs
    return prior_dist, post_dist, kl_loss


prior_dist, post_dist, kl = kl_loss(prior, posterior)
kl.backward()
full = kl_divergence(post_dist, prior_dist)
print("dist", type(prior_dist).__name__, type(prior_dist.base_dist).__name__, prior_dist.batch_shape,
      prior_dist.event_shape, prior_dist.reinterpreted_batch_ndims)
print("kl", f"{kl.item():.5f}", tuple(full.shape), fmt(full, 3), "grads", fmt(la.grad, 3), fmt(lb.grad, 3))
# balancing: the prior learns from alpha * KL(sg(post) || prior) only, the posterior from the rest
lhs = torch.mean(kl_divergence(rssm.get_dist(rssm.rssm_detach(posterior)), rssm.get_dist(prior)))
print("balanced grads", torch.allclose(la.grad, 0.8 * torch.autograd.grad(lhs, la)[0], atol=1e-6),
      f"{la.grad.abs().sum().item():.5f}", f"{lb.grad.abs().sum().item():.5f}")
onehot = F.one_hot(torch.from_numpy(r.integers(0, 4, (2, 5, 4))), 4).float()
print("log_prob", fmt(prior_dist.log_prob(onehot), 4), fmt(prior_dist.entropy(), 3),
      fmt(post_dist.mean.reshape(-1), 4), fmt(prior_dist.base_dist.mode.reshape(-1), 8))

# straight-through: the gradient of the value is the gradient of the probabilities
la.grad = None
torch.manual_seed(0)
w8 = torch.arange(16.0).view(4, 4)
st = td.OneHotCategoricalStraightThrough(logits=la.view(2, 5, 4, 4)).rsample()
(st * w8).sum().backward()
probs = F.softmax(la.detach().view(2, 5, 4, 4), -1).requires_grad_(True)
(probs * w8).sum().backward()
pg = probs.grad
want = torch.autograd.functional.vjp(lambda l: F.softmax(l.view(2, 5, 4, 4), -1), la.detach(), w8.expand(2, 5, 4, 4))[1]
print("straight-through", "[rng]", fmt(st, 8), bool(((st == 0) | (st == 1)).all()),
      torch.equal(st.sum(-1), torch.ones(2, 5, 4)), torch.allclose(la.grad, want, atol=1e-5))
stats = {'logit': la.detach()[0].requires_grad_(True)}
stoch = rssm.get_stoch_state(stats)
(stoch * torch.arange(16.0)).sum().backward()
print("get_stoch_state", tuple(stoch.shape), "[rng]", fmt(stoch, 8), torch.allclose(stats['logit'].grad, want[0], atol=1e-5),
      stoch.grad_fn is not None)

# observation through the world model (sampled latents: [rng] values, checked by invariants)
seq_len, batch_size = 4, 3
obs = torch.from_numpy(r.normal(size=(seq_len, batch_size, obs_size)).astype(np.float32))
actions = F.one_hot(torch.from_numpy(r.integers(0, action_size, (seq_len, batch_size))), action_size).float()
rewards = torch.from_numpy(r.normal(size=(seq_len, batch_size, 1)).astype(np.float32))
nonterms = torch.from_numpy((r.random((seq_len, batch_size, 1)) > 0.2).astype(np.float32))
model_optim = torch.optim.Adam(get_parameters(world_list), 2e-4)


def representation_loss(obs, actions, rewards, nonterms):
    embed = encoder(obs)
    prev_rssm_state = rssm._init_rssm_state(batch_size)
    prior, posterior = rssm.rollout_observation(seq_len, embed, actions, nonterms, prev_rssm_state)
    post_modelstate = rssm.get_model_state(posterior)
    obs_dist = obs_decoder(post_modelstate[:-1])
    reward_dist = reward_decoder(post_modelstate[:-1])
    pcont_dist = discount_model(post_modelstate[:-1])

    obs_loss = -torch.mean(obs_dist.log_prob(obs[:-1]))
    reward_loss = -torch.mean(reward_dist.log_prob(rewards[1:]))
    pcont_loss = -torch.mean(pcont_dist.log_prob(nonterms[1:]))
    prior_dist, post_dist, div = kl_loss(prior, posterior)
    model_loss = kl_info['kl_balance_scale'] * div + reward_loss + obs_loss + 1.0 * pcont_loss
    return model_loss, div, obs_loss, reward_loss, pcont_loss, prior_dist, post_dist, posterior


torch.manual_seed(1)
model_loss, div, obs_loss, reward_loss, pcont_loss, prior_dist, post_dist, posterior = \
    representation_loss(obs, actions, rewards, nonterms)
print("posterior", tuple(posterior.stoch.shape), tuple(posterior.deter.shape), type(posterior).__name__,
      posterior._fields, "one-hot", torch.allclose(posterior.stoch.detach().view(seq_len, batch_size, 4, 4).sum(-1),
                                                    torch.ones(seq_len, batch_size, 4)))
print("losses [rng]", f"{model_loss.item():.4f} {div.item():.4f} {obs_loss.item():.4f} {reward_loss.item():.4f}"
      f" {pcont_loss.item():.4f}", bool(torch.isfinite(model_loss)))
model_optim.zero_grad()
model_loss.backward()
torch.nn.utils.clip_grad_norm_(get_parameters(world_list), 100.0)
model_optim.step()
print("updated", all(p.grad is not None for p in get_parameters(world_list)), "rnn grad [rng]",
      fmt(rssm.rnn.weight_hh.grad, 2))

# imagination from the posterior, lambda returns, actor loss
with torch.no_grad():
    batched_posterior = rssm.rssm_detach(rssm.rssm_seq_to_batch(posterior, batch_size, seq_len - 1))
horizon = 3
torch.manual_seed(2)
imag_rssm_states, imag_log_prob, policy_entropy = rssm.rollout_imagination(horizon, actor, batched_posterior)
imag_modelstates = rssm.get_model_state(imag_rssm_states)
imag_reward = reward_decoder(imag_modelstates).mean
imag_value = value_model(imag_modelstates).mean
discount_arr = 0.99 * torch.round(discount_model(imag_modelstates).base_dist.probs)
lambda_returns = compute_return(imag_reward[:-1], imag_value[:-1], discount_arr[:-1], bootstrap=imag_value[-1], lambda_=0.95)
print("imagined", tuple(imag_modelstates.shape), tuple(imag_log_prob.shape), tuple(policy_entropy.shape),
      tuple(lambda_returns.shape), bool((policy_entropy > 0).all()), bool((imag_log_prob <= 0).all()))

# lambda returns on fixed numbers, against the recursion written out
rew = torch.from_numpy(r.normal(size=(5, 2, 1)).astype(np.float32))
val = torch.from_numpy(r.normal(size=(5, 2, 1)).astype(np.float32))
disc = torch.full((5, 2, 1), 0.99)
boot = torch.from_numpy(r.normal(size=(2, 1)).astype(np.float32))
ret = compute_return(rew, val, disc, boot, 0.95)
nxt = torch.cat([val[1:], boot[None]], 0)
acc, manual = boot, []
for t in reversed(range(5)):
    acc = rew[t] + disc[t] * ((1 - 0.95) * nxt[t] + 0.95 * acc)
    manual.insert(0, acc)
print("lambda returns", fmt(ret, 10), torch.allclose(ret, torch.stack(manual), atol=1e-5))
discount_arr = torch.cat([torch.ones_like(disc[:1]), disc[1:]])
discount = torch.cumprod(discount_arr[:-1], 0)
print("discount", fmt(discount, 8), fmt(torch.round(torch.tensor([0.2, 0.5, 0.51, 1.5, 2.5])), 5))


# one world-model training step under torch.compile against the same step eagerly
def train_step(obs, actions, rewards, nonterms):
    model_loss, div, *_ = representation_loss(obs, actions, rewards, nonterms)
    model_optim.zero_grad()
    model_loss.backward()
    torch.nn.utils.clip_grad_norm_(get_parameters(world_list), 100.0)
    model_optim.step()
    return model_loss


params = get_parameters(world_list)
state = [p.detach().clone() for p in params]
opt_state = copy.deepcopy(model_optim.state_dict())
torch.manual_seed(3)
eager = [train_step(obs, actions, rewards, nonterms).item() for _ in range(2)]
after = [p.detach().clone() for p in params]
with torch.no_grad():
    for p, s in zip(params, state):
        p.copy_(s)
model_optim.load_state_dict(opt_state)
cstep = torch.compile(train_step)
torch.manual_seed(3)
compiled = [cstep(obs, actions, rewards, nonterms).item() for _ in range(2)]
print("compiled losses", "[rng]", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(p, a, rtol=1e-4, atol=1e-5) for p, a in zip(params, after)))
