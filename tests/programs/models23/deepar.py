# zhykoties/TimeSeries (DeepAR) the way its model/net.py, train.py and
# evaluate.py write it: an nn.Embedding of the series id concatenated to
# the lagged target and covariates, a 3-layer nn.LSTM (batch_first=False)
# whose forget-gate biases are set to 1 through self.lstm._all_weights and
# bias.data[start:end].fill_(1.), mu / softplus-sigma heads on
# hidden.permute(1, 2, 0).contiguous().view(...), torch.squeeze'd outputs;
# loss_fn's torch.distributions.normal.Normal(mu[zero_index],
# sigma[zero_index]).log_prob masked by labels != 0; train()'s time loop
# with missing values filled by the previous mu through boolean-mask
# assignment, train_batch[t].unsqueeze_(0).clone(), loss = torch.zeros(1)
# accumulated with +=; evaluate()'s conditioning range and Net.test in
# both modes (the mean path writing mu back into x, the ancestral sampling
# path with Normal.sample, torch.median(samples, dim=0)[0] and
# samples.std(dim=0)); the ND / RMSE / rho-risk metrics (topk over
# samples, boolean masks) and quantiles with torch.quantile / sort.
# Changes for a CPU test: tiny synthetic series from numpy, weights from
# numpy, dropout 0, a few steps; sampled values are [rng] lines; then one
# training step under torch.compile against the same step eagerly.
import copy
import math
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable


# ---- model/net.py ----

class Net(nn.Module):
    def __init__(self, params):
        '''
        We define a recurrent network that predicts the future values of a time-dependent variable based on
        past inputs and covariates.
        '''
        super(Net, self).__init__()
        self.params = params
        self.embedding = nn.Embedding(params.num_class, params.embedding_dim)

        self.lstm = nn.LSTM(input_size=1+params.cov_dim+params.embedding_dim,
                            hidden_size=params.lstm_hidden_dim,
                            num_layers=params.lstm_layers,
                            bias=True,
                            batch_first=False,
                            dropout=params.lstm_dropout)
        '''self.lstm = nn.LSTM(input_size=1 + params.cov_dim,
                            hidden_size=params.lstm_hidden_dim,
                            num_layers=params.lstm_layers,
                            bias=True,
                            batch_first=False,
                            dropout=params.lstm_dropout)'''
        # initialize LSTM forget gate bias to be 1 as recommanded by http://proceedings.mlr.press/v37/jozefowicz15.pdf
        for names in self.lstm._all_weights:
            for name in filter(lambda n: "bias" in n, names):
                bias = getattr(self.lstm, name)
                n = bias.size(0)
                start, end = n // 4, n // 2
                bias.data[start:end].fill_(1.)

        self.relu = nn.ReLU()
        self.distribution_mu = nn.Linear(params.lstm_hidden_dim * params.lstm_layers, 1)
        self.distribution_presigma = nn.Linear(params.lstm_hidden_dim * params.lstm_layers, 1)
        self.distribution_sigma = nn.Softplus()

    def forward(self, x, idx, hidden, cell):
        '''
        Predict mu and sigma of the distribution for z_t.
        Args:
            x: ([1, batch_size, 1+cov_dim]): z_{t-1} + x_t, note that z_0 = 0
            idx ([1, batch_size]): one integer denoting the time series id
            hidden ([lstm_layers, batch_size, lstm_hidden_dim]): LSTM h from time step t-1
            cell ([lstm_layers, batch_size, lstm_hidden_dim]): LSTM c from time step t-1
        Returns:
            mu ([batch_size]): estimated mean of z_t
            sigma ([batch_size]): estimated standard deviation of z_t
            hidden ([lstm_layers, batch_size, lstm_hidden_dim]): LSTM h from time step t
            cell ([lstm_layers, batch_size, lstm_hidden_dim]): LSTM c from time step t
        '''
        onehot_embed = self.embedding(idx) #TODO: is it possible to do this only once per window instead of per step?
        lstm_input = torch.cat((x, onehot_embed), dim=2)
        output, (hidden, cell) = self.lstm(lstm_input, (hidden, cell))
        # use h from all three layers to calculate mu and sigma
        hidden_permute = hidden.permute(1, 2, 0).contiguous().view(hidden.shape[1], -1)
        pre_sigma = self.distribution_presigma(hidden_permute)
        mu = self.distribution_mu(hidden_permute)
        sigma = self.distribution_sigma(pre_sigma)  # softplus to make sure standard deviation is positive
        return torch.squeeze(mu), torch.squeeze(sigma), hidden, cell

    def init_hidden(self, input_size):
        return torch.zeros(self.params.lstm_layers, input_size, self.params.lstm_hidden_dim, device=self.params.device)

    def init_cell(self, input_size):
        return torch.zeros(self.params.lstm_layers, input_size, self.params.lstm_hidden_dim, device=self.params.device)

    def test(self, x, v_batch, id_batch, hidden, cell, sampling=False):
        batch_size = x.shape[1]
        if sampling:
            samples = torch.zeros(self.params.sample_times, batch_size, self.params.predict_steps,
                                       device=self.params.device)
            for j in range(self.params.sample_times):
                decoder_hidden = hidden
                decoder_cell = cell
                for t in range(self.params.predict_steps):
                    mu_de, sigma_de, decoder_hidden, decoder_cell = self(x[self.params.predict_start + t].unsqueeze(0),
                                                                         id_batch, decoder_hidden, decoder_cell)
                    gaussian = torch.distributions.normal.Normal(mu_de, sigma_de)
                    pred = gaussian.sample()  # not scaled
                    samples[j, :, t] = pred * v_batch[:, 0] + v_batch[:, 1]
                    if t < (self.params.predict_steps - 1):
                        x[self.params.predict_start + t + 1, :, 0] = pred

            sample_mu = torch.median(samples, dim=0)[0]
            sample_sigma = samples.std(dim=0)
            return samples, sample_mu, sample_sigma

        else:
            decoder_hidden = hidden
            decoder_cell = cell
            sample_mu = torch.zeros(batch_size, self.params.predict_steps, device=self.params.device)
            sample_sigma = torch.zeros(batch_size, self.params.predict_steps, device=self.params.device)
            for t in range(self.params.predict_steps):
                mu_de, sigma_de, decoder_hidden, decoder_cell = self(x[self.params.predict_start + t].unsqueeze(0),
                                                                     id_batch, decoder_hidden, decoder_cell)
                sample_mu[:, t] = mu_de * v_batch[:, 0] + v_batch[:, 1]
                sample_sigma[:, t] = sigma_de * v_batch[:, 0]
                if t < (self.params.predict_steps - 1):
                    x[self.params.predict_start + t + 1, :, 0] = mu_de
            return sample_mu, sample_sigma


def loss_fn(mu: Variable, sigma: Variable, labels: Variable):
    '''
    Compute using gaussian the log-likehood which needs to be maximized. Ignore time steps where labels are missing.
    Args:
        mu: (Variable) dimension [batch_size] - estimated mean at time step t
        sigma: (Variable) dimension [batch_size] - estimated standard deviation at time step t
        labels: (Variable) dimension [batch_size] z_t
    Returns:
        loss: (Variable) average log-likelihood loss across the batch
    '''
    zero_index = (labels != 0)
    distribution = torch.distributions.normal.Normal(mu[zero_index], sigma[zero_index])
    likelihood = distribution.log_prob(labels[zero_index])
    return -torch.mean(likelihood)


# if relative is set to True, metrics are not normalized by the scale of labels
def accuracy_ND(mu: torch.Tensor, labels: torch.Tensor, relative = False):
    zero_index = (labels != 0)
    if relative:
        diff = torch.mean(torch.abs(mu[zero_index] - labels[zero_index])).item()
        return [diff, 1]
    else:
        diff = torch.sum(torch.abs(mu[zero_index] - labels[zero_index])).item()
        summation = torch.sum(torch.abs(labels[zero_index])).item()
        return [diff, summation]


def accuracy_RMSE(mu: torch.Tensor, labels: torch.Tensor, relative = False):
    zero_index = (labels != 0)
    diff = torch.sum(torch.mul((mu[zero_index] - labels[zero_index]), (mu[zero_index] - labels[zero_index]))).item()
    if relative:
        return [diff, torch.sum(zero_index).item(), torch.sum(zero_index).item()]
    else:
        summation = torch.sum(torch.abs(labels[zero_index])).item()
        return [diff, summation, torch.sum(zero_index).item()]


def accuracy_ROU(rou: float, samples: torch.Tensor, labels: torch.Tensor, relative = False):
    numerator = 0
    denominator = 0
    pred_samples = samples.shape[0]
    for t in range(labels.shape[1]):
        zero_index = (labels[:, t] != 0)
        if zero_index.numel() > 0:
            rou_th = math.ceil(pred_samples * (1 - rou))
            rou_pred = torch.topk(samples[:, zero_index, t], dim=0, k=rou_th)[0][-1, :]
            abs_diff = labels[:, t][zero_index] - rou_pred
            numerator += 2 * (torch.sum(rou * abs_diff[labels[:, t][zero_index] > rou_pred]) - torch.sum(
                (1 - rou) * abs_diff[labels[:, t][zero_index] <= rou_pred])).item()
            denominator += torch.sum(labels[:, t][zero_index]).item()
    if relative:
        return [numerator, torch.sum(labels != 0).item()]
    else:
        return [numerator, denominator]


# ---- train.py ----

def train(model, optimizer, loss_fn, train_loader, params):
    model.train()
    loss_epoch = np.zeros(len(train_loader))
    for i, (train_batch, idx, labels_batch) in enumerate(train_loader):
        optimizer.zero_grad()
        batch_size = train_batch.shape[0]

        train_batch = train_batch.permute(1, 0, 2).to(torch.float32).to(params.device)  # not scaled
        labels_batch = labels_batch.permute(1, 0).to(torch.float32).to(params.device)  # not scaled
        idx = idx.unsqueeze(0).to(params.device)

        loss = torch.zeros(1, device=params.device)
        hidden = model.init_hidden(batch_size)
        cell = model.init_cell(batch_size)

        for t in range(params.train_window):
            # if z_t is missing, replace it by output mu from the last time step
            zero_index = (train_batch[t, :, 0] == 0)
            if t > 0 and torch.sum(zero_index) > 0:
                train_batch[t, zero_index, 0] = mu[zero_index]
            mu, sigma, hidden, cell = model(train_batch[t].unsqueeze_(0).clone(), idx, hidden, cell)
            loss += loss_fn(mu, sigma, labels_batch[t])

        loss.backward()
        optimizer.step()
        loss = loss.item() / params.train_window  # loss per timestep
        loss_epoch[i] = loss
    return loss_epoch


# ---- evaluate.py (conditioning range, then Net.test) ----

def evaluate(model, test_loader, params, sample):
    model.eval()
    with torch.no_grad():
        summary = {'ND': [0., 0.], 'RMSE': [0., 0., 0.], 'rou50': [0., 0.], 'rou90': [0., 0.]}
        for i, (test_batch, id_batch, v, labels) in enumerate(test_loader):
            test_batch = test_batch.permute(1, 0, 2).to(torch.float32).to(params.device)
            id_batch = id_batch.unsqueeze(0).to(params.device)
            v_batch = v.to(torch.float32).to(params.device)
            labels = labels.to(torch.float32).to(params.device)
            batch_size = test_batch.shape[1]
            input_mu = torch.zeros(batch_size, params.test_predict_start, device=params.device) # scaled
            input_sigma = torch.zeros(batch_size, params.test_predict_start, device=params.device) # scaled
            hidden = model.init_hidden(batch_size)
            cell = model.init_cell(batch_size)

            for t in range(params.test_predict_start):
                # if z_t is missing, replace it by output mu from the last time step
                zero_index = (test_batch[t,:,0] == 0)
                if t > 0 and torch.sum(zero_index) > 0:
                    test_batch[t,zero_index,0] = mu[zero_index]

                mu, sigma, hidden, cell = model(test_batch[t].unsqueeze(0), id_batch, hidden, cell)
                input_mu[:,t] = v_batch[:, 0] * mu + v_batch[:, 1]
                input_sigma[:,t] = v_batch[:, 0] * sigma

            if sample:
                samples, sample_mu, sample_sigma = model.test(test_batch, v_batch, id_batch, hidden, cell, sampling=True)
                return samples, sample_mu, sample_sigma, input_mu
            sample_mu, sample_sigma = model.test(test_batch, v_batch, id_batch, hidden, cell)
            target = labels[:, params.test_predict_start:]
            for k, v_ in (('ND', accuracy_ND(sample_mu, target)), ('RMSE', accuracy_RMSE(sample_mu, target))):
                summary[k] = [a + b for a, b in zip(summary[k], v_)]
            return summary, sample_mu, sample_sigma, input_mu


# ---- the test ----

def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


r = np.random.default_rng(0)
torch.manual_seed(0)
params = SimpleNamespace(num_class=3, embedding_dim=4, cov_dim=2, lstm_hidden_dim=8, lstm_layers=3,
                         lstm_dropout=0.0, device=torch.device('cpu'), train_window=8,
                         test_predict_start=6, predict_start=6, predict_steps=2, sample_times=20,
                         learning_rate=0.01)
model = Net(params)
print("forget biases", [getattr(model.lstm, n).data[8:16].sum().item() for names in model.lstm._all_weights
                        for n in names if "bias" in n], model.lstm._all_weights[0])
with torch.no_grad():
    for name, p in model.named_parameters():
        keep_forget = "bias" in name and "lstm" in name
        vals = torch.from_numpy(r.normal(0, 0.3, tuple(p.shape)).astype(np.float32))
        if keep_forget:
            vals[8:16] = 1.
        p.copy_(vals)


def make_windows(n, T):
    # [z_{t-1}, covariates]: the lagged target (scaled by v) in channel 0
    t = np.arange(T + 1)
    ids = r.integers(0, params.num_class, n)
    z = 1 + 0.5 * np.sin(t[None] / 2.0 + ids[:, None]) + 0.1 * r.normal(size=(n, T + 1))
    z[r.random((n, T + 1)) < 0.1] = 0.0          # missing values
    cov = np.stack([np.sin(t / 3.0), t / T], -1)[None].repeat(n, 0)[:, 1:]
    x = np.concatenate([z[:, :-1, None], cov], -1)
    return (torch.from_numpy(x.astype(np.float32)), torch.from_numpy(ids),
            torch.from_numpy(z[:, 1:].astype(np.float32)))


train_loader = [make_windows(5, params.train_window) for _ in range(4)]
print("missing inputs", [int((b[0][:, :, 0] == 0).sum()) for b in train_loader])
optimizer = torch.optim.Adam(model.parameters(), lr=params.learning_rate)
for epoch in range(2):
    # a DataLoader hands out fresh tensors each epoch (train() writes into them)
    loss_epoch = train(model, optimizer, loss_fn, [(a.clone(), b, c) for a, b, c in train_loader], params)
    print("epoch", epoch, [f"{v:.5f}" for v in loss_epoch.tolist()])

# the in-place unsqueeze_ on an indexing view, as train() does it
tb = train_loader[0][0].permute(1, 0, 2).to(torch.float32)
row = tb[2]
v = row.unsqueeze_(0)
print("unsqueeze_", tuple(row.shape), v is row, tuple(tb[2].shape), tuple(tb.shape))

x, ids, z = make_windows(4, params.test_predict_start + params.predict_steps)
v = torch.stack([torch.tensor([1.5, 2.0, 1.0, 0.5]), torch.tensor([0.0, 0.1, -0.1, 0.2])], dim=1)
test_loader = [(x.clone(), ids, v, z)]
summary, sample_mu, sample_sigma, input_mu = evaluate(model, test_loader, params, sample=False)
print("conditioning mu", fmt(input_mu[0], 6))
print("forecast", fmt(sample_mu, 8), fmt(sample_sigma, 8))
print("ND", f"{summary['ND'][0] / summary['ND'][1]:.5f}", "RMSE",
      f"{math.sqrt(summary['RMSE'][0] / summary['RMSE'][2]) / (summary['RMSE'][1] / summary['RMSE'][2]):.5f}")
rel = accuracy_ND(sample_mu, z[:, params.test_predict_start:], relative=True)
print("ND relative", f"{rel[0]:.5f}", rel[1], accuracy_RMSE(sample_mu, z[:, 6:], relative=True)[1:])

torch.manual_seed(0)
samples, s_mu, s_sigma, _ = evaluate(model, [(x.clone(), ids, v, z)], params, sample=True)
print("samples", tuple(samples.shape), tuple(s_mu.shape), tuple(s_sigma.shape), bool((s_sigma > 0).all()))
print("sample median", fmt(s_mu, 4), fmt(s_sigma, 4))
q = torch.quantile(samples, torch.tensor([0.1, 0.5, 0.9]), dim=0)
print("quantiles", tuple(q.shape), bool((q[0] <= q[1]).all() and (q[1] <= q[2]).all()),
      "[rng]", fmt(q[:, 0, 0], 3))
# the metrics on fixed samples (deterministic)
fixed = torch.from_numpy(r.normal(1.0, 0.5, (20, 4, 2)).astype(np.float32))
labels = z[:, 6:].clone()
labels[0, 1] = 0
for rou in (0.5, 0.9):
    num, den = accuracy_ROU(rou, fixed, labels)
    print("rho-risk", rou, f"{num / den:.5f}", accuracy_ROU(rou, fixed, labels, relative=True)[1])
sorted_s, order = fixed.sort(dim=0)
print("sort quantile", fmt(sorted_s[int(0.9 * 20) - 1, 0], 2), order.dtype,
      fmt(torch.quantile(fixed, 0.9, dim=0)[0], 2), fmt(torch.quantile(fixed[:, 0, 0], torch.tensor([0.25, 0.75]), interpolation='nearest'), 2),
      fmt(fixed.median(dim=0)[0][0], 2), fmt(torch.median(fixed.flatten()).reshape(1), 1), fmt(fixed.std(dim=0)[1], 2))
normal = torch.distributions.normal.Normal(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.5]))
print("normal", fmt(normal.log_prob(torch.tensor([0.5, 2.0]))), fmt(normal.cdf(torch.tensor([0.5, 2.0]))),
      fmt(normal.icdf(torch.tensor([0.9, 0.1]))), fmt(normal.mean), fmt(normal.stddev), normal.batch_shape)


# one training step under torch.compile against the same step eagerly
def train_step(train_batch, idx, labels_batch):
    optimizer.zero_grad()
    batch_size = train_batch.shape[0]
    train_batch = train_batch.permute(1, 0, 2).to(torch.float32)
    labels_batch = labels_batch.permute(1, 0).to(torch.float32)
    idx = idx.unsqueeze(0)
    loss = torch.zeros(1)
    hidden = model.init_hidden(batch_size)
    cell = model.init_cell(batch_size)
    for t in range(params.train_window):
        zero_index = (train_batch[t, :, 0] == 0)
        if t > 0 and torch.sum(zero_index) > 0:
            train_batch[t, zero_index, 0] = mu[zero_index]
        mu, sigma, hidden, cell = model(train_batch[t].unsqueeze_(0).clone(), idx, hidden, cell)
        loss += loss_fn(mu, sigma, labels_batch[t])
    loss.backward()
    optimizer.step()
    return loss


batch = train_loader[1]
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(batch[0].clone(), *batch[1:]).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(batch[0].clone(), *batch[1:]).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
