# The Attentive Neural Process of deepmind/neural-processes
# (attentive_neural_process.ipynb) as its PyTorch ports write it: the 1-D GP
# curve sampler (GPCurvesReader: squared-exponential kernel with random
# length scales, torch.cholesky of the float64 kernel, curves drawn by
# matmul with standard normals, context / target split, the NPRegressionDescription
# namedtuple), batch_mlp, the attention module (rep 'identity' / 'mlp';
# uniform, laplace, dot_product and multihead attention, the multihead one
# through nn.MultiheadAttention(batch_first=True) cross-attention from the
# target to the context points), the deterministic encoder, the latent
# encoder returning torch.distributions.Normal with sigma = 0.1 + 0.9 *
# sigmoid, the decoder's Normal with 0.1 + 0.9 * softplus, and the
# LatentModel's loss -mean(log_p - kl / num_targets) with
# torch.distributions.kl_divergence(posterior, prior), trained with Adam.
# Changes for a CPU test: small sizes, weights from numpy, few steps. The
# sampler's and the latent path's draws (torch.rand / randn, rsample)
# differ between tracec and torch, so the sampler prints its draws on
# [rng] lines and the compared training uses curves built by the same
# kernel and cholesky from numpy draws, through a LatentModel subclass whose
# forward takes rsample's standard normals from numpy (rsample's own
# loc + scale * eps); then one training step under torch.compile against
# the same step eagerly.
import collections
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal, kl_divergence

# The (A)NP takes as input a `NPRegressionDescription` namedtuple with fields:
#   `query`: a tuple containing ((context_x, context_y), target_x)
#   `target_y`: a tensor containing the ground truth for the targets to be
#     predicted
#   `num_total_points`: A vector containing a scalar that describes the total
#     number of datapoints used (context + target)
#   `num_context_points`: A vector containing a scalar that describes the number
#     of datapoints used as context
NPRegressionDescription = collections.namedtuple(
    "NPRegressionDescription",
    ("query", "target_y", "num_total_points", "num_context_points"))


class GPCurvesReader(object):
    """Generates curves using a Gaussian Process (GP).

    Supports vector inputs (x) and vector outputs (y). Kernel is
    mean-squared exponential, using the x-value l2 coordinate distance scaled by
    some factor chosen randomly in a range. Outputs are independent gaussian
    processes.
    """

    def __init__(self,
                 batch_size,
                 max_num_context,
                 x_size=1,
                 y_size=1,
                 l1_scale=0.6,
                 sigma_scale=1.0,
                 random_kernel_parameters=True,
                 testing=False):
        self._batch_size = batch_size
        self._max_num_context = max_num_context
        self._x_size = x_size
        self._y_size = y_size
        self._l1_scale = l1_scale
        self._sigma_scale = sigma_scale
        self._random_kernel_parameters = random_kernel_parameters
        self._testing = testing

    def _gaussian_kernel(self, xdata, l1, sigma_f, sigma_noise=2e-2):
        """Applies the Gaussian kernel to generate curve data.

        Args:
          xdata: Tensor of shape [B, num_total_points, x_size] with
              the values of the x-axis data.
          l1: Tensor of shape [B, y_size, x_size], the scale
              parameter of the Gaussian kernel.
          sigma_f: Tensor of shape [B, y_size], the magnitude
              of the std.
          sigma_noise: Float, std of the noise that we add for stability.

        Returns:
          The kernel, a float tensor of shape
          [B, y_size, num_total_points, num_total_points].
        """
        num_total_points = xdata.shape[1]

        # Expand and take the difference
        xdata1 = xdata.unsqueeze(1)  # [B, 1, num_total_points, x_size]
        xdata2 = xdata.unsqueeze(2)  # [B, num_total_points, 1, x_size]
        diff = xdata1 - xdata2  # [B, num_total_points, num_total_points, x_size]

        # [B, y_size, num_total_points, num_total_points, x_size]
        norm = torch.square(diff[:, None, :, :, :] / l1[:, :, None, None, :])

        norm = torch.sum(norm, -1)  # [B, data_size, num_total_points, num_total_points]

        # [B, y_size, num_total_points, num_total_points]
        kernel = torch.square(sigma_f)[:, :, None, None] * torch.exp(-0.5 * norm)

        # Add some noise to the diagonal to make the cholesky work.
        kernel += (sigma_noise ** 2) * torch.eye(num_total_points)

        return kernel

    def generate_curves(self):
        """Builds the op delivering the data.

        Generated functions are `float32` with x values between -2 and 2.

        Returns:
          A `CNPRegressionDescription` namedtuple.
        """
        num_context = torch.randint(low=3, high=self._max_num_context, size=(1,)).item()

        # If we are testing we want to have more targets and have them evenly
        # distributed in order to plot the function.
        if self._testing:
            num_target = 400
            num_total_points = num_target
            x_values = torch.arange(-2., 2., 1. / 100).unsqueeze(0).repeat(self._batch_size, 1)
            x_values = x_values.unsqueeze(-1)
        # During training the number of target points and their x-positions are
        # selected at random
        else:
            num_target = torch.randint(low=0, high=self._max_num_context - num_context, size=(1,)).item()
            num_total_points = num_context + num_target
            x_values = torch.rand(self._batch_size, num_total_points, self._x_size) * 4 - 2

        # Set kernel parameters
        # Either choose a set of random parameters for the mini-batch
        if self._random_kernel_parameters:
            l1 = torch.rand(self._batch_size, self._y_size, self._x_size) * (self._l1_scale - 0.1) + 0.1
            sigma_f = torch.rand(self._batch_size, self._y_size) * (self._sigma_scale - 0.1) + 0.1
        # Or use the same fixed parameters for all mini-batches
        else:
            l1 = torch.ones(self._batch_size, self._y_size, self._x_size) * self._l1_scale
            sigma_f = torch.ones(self._batch_size, self._y_size) * self._sigma_scale

        # Pass the x_values through the Gaussian kernel
        # [batch_size, y_size, num_total_points, num_total_points]
        kernel = self._gaussian_kernel(x_values, l1, sigma_f)

        # Calculate Cholesky, using double precision for better stability:
        cholesky = torch.cholesky(kernel.double()).float()

        # Sample a curve
        # [batch_size, y_size, num_total_points, 1]
        y_values = torch.matmul(cholesky, torch.randn(self._batch_size, self._y_size, num_total_points, 1))

        # [batch_size, num_total_points, y_size]
        y_values = y_values.squeeze(3).permute(0, 2, 1)

        if self._testing:
            # Select the targets
            target_x = x_values
            target_y = y_values

            # Select the observations
            idx = torch.randperm(num_target)
            context_x = x_values[:, idx[:num_context], :]
            context_y = y_values[:, idx[:num_context], :]

        else:
            # Select the targets which will consist of the context points as well as
            # some new target points
            target_x = x_values[:, :num_target + num_context, :]
            target_y = y_values[:, :num_target + num_context, :]

            # Select the observations
            context_x = x_values[:, :num_context, :]
            context_y = y_values[:, :num_context, :]

        query = ((context_x, context_y), target_x)

        return NPRegressionDescription(
            query=query,
            target_y=target_y,
            num_total_points=target_x.shape[1],
            num_context_points=num_context)


class BatchMLP(nn.Module):
    """Apply MLP to the final axis of a 3D tensor (reusing already defined MLPs).

    Args:
      input: input tensor of shape [B,n,d_in].
      output_sizes: An iterable containing the output sizes of the MLP as defined
          in `basic.Linear`.
    Returns:
      tensor of shape [B,n,d_out] where d_out=output_sizes[-1]
    """

    def __init__(self, input_size, output_sizes):
        super().__init__()
        sizes = [input_size] + list(output_sizes)
        self.layers = nn.ModuleList([nn.Linear(i, o) for i, o in zip(sizes[:-1], sizes[1:])])

    def forward(self, input):
        # Get the shapes of the input and reshape to parallelise across observations
        batch_size, num_context, filter_size = input.shape
        output = input.reshape((-1, filter_size))
        # Pass through MLP
        for i, layer in enumerate(self.layers[:-1]):
            output = F.relu(layer(output))
        # Last layer without a ReLu
        output = self.layers[-1](output)
        # Bring back into original shape
        return output.reshape(batch_size, num_context, -1)


def uniform_attention(q, v):
    """Uniform attention. Equivalent to np.

    Args:
      q: queries. tensor of shape [B,m,d_k].
      v: values. tensor of shape [B,n,d_v].

    Returns:
      tensor of shape [B,m,d_v].
    """
    total_points = q.shape[1]
    rep = torch.mean(v, dim=1, keepdim=True)  # [B,1,d_v]
    rep = rep.repeat(1, total_points, 1)
    return rep


def laplace_attention(q, k, v, scale, normalise):
    """Computes laplace exponential attention.

    Args:
      q: queries. tensor of shape [B,m,d_k].
      k: keys. tensor of shape [B,n,d_k].
      v: values. tensor of shape [B,n,d_v].
      scale: float that scales the L1 distance.
      normalise: Boolean that determines whether weights sum to 1.

    Returns:
      tensor of shape [B,m,d_v].
    """
    k = k.unsqueeze(1)  # [B,1,n,d_k]
    q = q.unsqueeze(2)  # [B,m,1,d_k]
    unnorm_weights = - torch.abs((k - q) / scale)  # [B,m,n,d_k]
    unnorm_weights = unnorm_weights.sum(dim=-1)  # [B,m,n]
    if normalise:
        weight_fn = lambda x: torch.softmax(x, dim=-1)
    else:
        weight_fn = lambda x: 1 + torch.tanh(x)
    weights = weight_fn(unnorm_weights)  # [B,m,n]
    rep = torch.einsum('bik,bkj->bij', weights, v)  # [B,m,d_v]
    return rep


def dot_product_attention(q, k, v, normalise):
    """Computes dot product attention.

    Args:
      q: queries. tensor of  shape [B,m,d_k].
      k: keys. tensor of shape [B,n,d_k].
      v: values. tensor of shape [B,n,d_v].
      normalise: Boolean that determines whether weights sum to 1.

    Returns:
      tensor of shape [B,m,d_v].
    """
    d_k = q.shape[-1]
    scale = math.sqrt(d_k)
    unnorm_weights = torch.einsum('bjk,bik->bij', k, q) / scale  # [B,m,n]
    if normalise:
        weight_fn = lambda x: torch.softmax(x, dim=-1)
    else:
        weight_fn = torch.sigmoid
    weights = weight_fn(unnorm_weights)  # [B,m,n]
    rep = torch.einsum('bik,bkj->bij', weights, v)  # [B,m,d_v]
    return rep


class Attention(nn.Module):
    """The Attention module."""

    def __init__(self, rep, output_sizes, att_type, x_size=1, scale=1., normalise=True, num_heads=8, d_v=None):
        """Create attention module.

        Takes in context inputs, target inputs and
        representations of each context input/output pair
        to output an aggregated representation of the context data.
        Args:
          rep: transformation to apply to contexts before computing attention.
              One of: ['identity','mlp'].
          output_sizes: list of number of hidden units per layer of mlp.
              Used only if rep == 'mlp'.
          att_type: type of attention. One of the following:
              ['uniform','laplace','dot_product','multihead']
          scale: scale of attention.
          normalise: Boolean determining whether to:
              1. apply softmax to weights so that they sum to 1 across context pts or
              2. apply custom transformation to have weights in [0,1].
          num_heads: number of heads for multihead.
        """
        super().__init__()
        self._rep = rep
        self._output_sizes = output_sizes
        self._type = att_type
        self._scale = scale
        self._normalise = normalise
        if self._rep == 'mlp':
            self.batch_mlp_k = BatchMLP(x_size, output_sizes)
            self.batch_mlp_q = BatchMLP(x_size, output_sizes)
        if self._type == 'multihead':
            self._num_heads = num_heads
            d_k = output_sizes[-1] if rep == 'mlp' else x_size
            self.multihead = nn.MultiheadAttention(d_k, num_heads, kdim=d_k, vdim=d_v, batch_first=True)

    def forward(self, x1, x2, r):
        """Apply attention to create aggregated representation of r.

        Args:
          x1: tensor of shape [B,n1,d_x].
          x2: tensor of shape [B,n2,d_x].
          r: tensor of shape [B,n1,d].

        Returns:
          tensor of shape [B,n2,d]

        Raises:
          NameError: The argument for rep/type was invalid.
        """
        if self._rep == 'identity':
            k, q = (x1, x2)
        elif self._rep == 'mlp':
            # Pass through MLP
            k = self.batch_mlp_k(x1)
            q = self.batch_mlp_q(x2)
        else:
            raise NameError("'rep' not among ['identity','mlp']")

        if self._type == 'uniform':
            rep = uniform_attention(q, r)
        elif self._type == 'laplace':
            rep = laplace_attention(q, k, r, self._scale, self._normalise)
        elif self._type == 'dot_product':
            rep = dot_product_attention(q, k, r, self._normalise)
        elif self._type == 'multihead':
            rep, _ = self.multihead(q, k, r, need_weights=False)
        else:
            raise NameError(("'att_type' not among ['uniform','laplace','dot_product'"
                             ",'multihead']"))

        return rep


class DeterministicEncoder(nn.Module):
    """The Deterministic Encoder."""

    def __init__(self, input_size, output_sizes, attention):
        """(A)NP deterministic encoder.

        Args:
          output_sizes: An iterable containing the output sizes of the encoding MLP.
          attention: The attention module.
        """
        super().__init__()
        self.batch_mlp = BatchMLP(input_size, output_sizes)
        self._attention = attention

    def forward(self, context_x, context_y, target_x):
        """Encodes the inputs into one representation.

        Args:
          context_x: Tensor of shape [B,observations,d_x]. For this 1D regression
              task this corresponds to the x-values.
          context_y: Tensor of shape [B,observations,d_y]. For this 1D regression
              task this corresponds to the y-values.
          target_x: Tensor of shape [B,target_observations,d_x].
              For this 1D regression task this corresponds to the x-values.

        Returns:
          The encoded representation. Tensor of shape [B,target_observations,d]
        """

        # Concatenate x and y along the filter axes
        encoder_input = torch.cat([context_x, context_y], dim=-1)

        # Pass final axis through MLP
        hidden = self.batch_mlp(encoder_input)

        # Apply attention
        hidden = self._attention(context_x, target_x, hidden)

        return hidden


class LatentEncoder(nn.Module):
    """The Latent Encoder."""

    def __init__(self, input_size, output_sizes, num_latents):
        """(A)NP latent encoder.

        Args:
          output_sizes: An iterable containing the output sizes of the encoding MLP.
          num_latents: The latent dimensionality.
        """
        super().__init__()
        self.batch_mlp = BatchMLP(input_size, output_sizes)
        self._num_latents = num_latents
        # First apply intermediate relu layer
        hidden_size = (output_sizes[-1] + num_latents) // 2
        self.penultimate_layer = nn.Linear(output_sizes[-1], hidden_size)
        self.mean_layer = nn.Linear(hidden_size, num_latents)
        self.std_layer = nn.Linear(hidden_size, num_latents)

    def forward(self, x, y):
        """Encodes the inputs into one representation.

        Args:
          x: Tensor of shape [B,observations,d_x]. For this 1D regression
              task this corresponds to the x-values.
          y: Tensor of shape [B,observations,d_y]. For this 1D regression
              task this corresponds to the y-values.

        Returns:
          A normal distribution over tensors of shape [B, num_latents]
        """

        # Concatenate x and y along the filter axes
        encoder_input = torch.cat([x, y], dim=-1)

        # Pass final axis through MLP
        hidden = self.batch_mlp(encoder_input)

        # Aggregator: take the mean over all points
        hidden = hidden.mean(dim=1)

        # Have further MLP layers that map to the parameters of the Gaussian latent
        hidden = F.relu(self.penultimate_layer(hidden))
        # Then apply further linear layers to output latent mu and log sigma
        mu = self.mean_layer(hidden)
        log_sigma = self.std_layer(hidden)

        # Compute sigma
        sigma = 0.1 + 0.9 * torch.sigmoid(log_sigma)

        return Normal(loc=mu, scale=sigma)


class Decoder(nn.Module):
    """The Decoder."""

    def __init__(self, input_size, output_sizes):
        """(A)NP decoder.

        Args:
          output_sizes: An iterable containing the output sizes of the decoder MLP
              as defined in `basic.Linear`.
        """
        super().__init__()
        self.batch_mlp = BatchMLP(input_size, output_sizes)

    def forward(self, representation, target_x):
        """Decodes the individual targets.

        Args:
          representation: The representation of the context for target predictions.
              Tensor of shape [B,target_observations,?].
          target_x: The x locations for the target query.
              Tensor of shape [B,target_observations,d_x].

        Returns:
          dist: A multivariate Gaussian over the target points. A distribution over
              tensors of shape [B,target_observations,d_y].
          mu: The mean of the multivariate Gaussian.
              Tensor of shape [B,target_observations,d_x].
          sigma: The standard deviation of the multivariate Gaussian.
              Tensor of shape [B,target_observations,d_x].
        """
        # concatenate target_x and representation
        hidden = torch.cat([representation, target_x], dim=-1)

        # Pass final axis through MLP
        hidden = self.batch_mlp(hidden)

        # Get the mean an the variance
        mu, log_sigma = torch.split(hidden, 1, dim=-1)

        # Bound the variance
        sigma = 0.1 + 0.9 * F.softplus(log_sigma)

        # Get the distribution
        dist = Normal(loc=mu, scale=sigma)

        return dist, mu, sigma


class LatentModel(nn.Module):
    """The (A)NP model."""

    def __init__(self, x_size, y_size, latent_encoder_output_sizes, num_latents,
                 decoder_output_sizes, use_deterministic_path=True,
                 deterministic_encoder_output_sizes=None, attention=None):
        """Initialises the model.

        Args:
          latent_encoder_output_sizes: An iterable containing the sizes of hidden
              layers of the latent encoder.
          num_latents: The latent dimensionality.
          decoder_output_sizes: An iterable containing the sizes of hidden layers of
              the decoder. The last element should correspond to d_y * 2
              (it encodes both mean and variance concatenated)
          use_deterministic_path: a boolean that indicates whether the deterministic
              encoder is used or not.
          deterministic_encoder_output_sizes: An iterable containing the sizes of
              hidden layers of the deterministic encoder. The last one is the size
              of the deterministic representation r.
          attention: The attention module used in the deterministic encoder.
              Only relevant when use_deterministic_path=True.
        """
        super().__init__()
        self._latent_encoder = LatentEncoder(x_size + y_size, latent_encoder_output_sizes, num_latents)
        rep_size = num_latents + x_size
        if use_deterministic_path:
            self._deterministic_encoder = DeterministicEncoder(
                x_size + y_size, deterministic_encoder_output_sizes, attention)
            rep_size += deterministic_encoder_output_sizes[-1]
        self._decoder = Decoder(rep_size, decoder_output_sizes)
        self._use_deterministic_path = use_deterministic_path

    def forward(self, query, num_targets, target_y=None):
        """Returns the predicted mean and variance at the target points.

        Args:
          query: Array containing ((context_x, context_y), target_x) where:
              context_x: Tensor of shape [B,num_contexts,d_x].
                  Contains the x values of the context points.
              context_y: Tensor of shape [B,num_contexts,d_y].
                  Contains the y values of the context points.
              target_x: Tensor of shape [B,num_targets,d_x].
                  Contains the x values of the target points.
          num_targets: Number of target points.
          target_y: The ground truth y values of the target y.
              Tensor of shape [B,num_targets,d_y].

        Returns:
          log_p: The log_probability of the target_y given the predicted
              distribution. Tensor of shape [B,num_targets].
          mu: The mean of the predicted distribution.
              Tensor of shape [B,num_targets,d_y].
          sigma: The variance of the predicted distribution.
              Tensor of shape [B,num_targets,d_y].
        """

        (context_x, context_y), target_x = query

        # Pass query through the encoder and the decoder
        prior = self._latent_encoder(context_x, context_y)

        # For training, when target_y is available, use targets for latent encoder.
        # Note that targets contain contexts by design.
        if target_y is None:
            latent_rep = self.sample(prior)
        # For testing, when target_y unavailable, use contexts for latent encoder.
        else:
            posterior = self._latent_encoder(target_x, target_y)
            latent_rep = self.sample(posterior)
        latent_rep = latent_rep.unsqueeze(1).repeat(1, num_targets, 1)
        if self._use_deterministic_path:
            deterministic_rep = self._deterministic_encoder(context_x, context_y, target_x)
            representation = torch.cat([deterministic_rep, latent_rep], dim=-1)
        else:
            representation = latent_rep

        dist, mu, sigma = self._decoder(representation, target_x)

        # If we want to calculate the log_prob for training we will make use of the
        # target_y. At test time the target_y is not available so we return None.
        if target_y is not None:
            log_p = dist.log_prob(target_y).squeeze(-1)
            posterior = self._latent_encoder(target_x, target_y)
            kl = kl_divergence(posterior, prior).sum(dim=-1, keepdim=True)
            kl = kl.repeat(1, num_targets)
            loss = - torch.mean(log_p - kl / num_targets)
        else:
            log_p = None
            kl = None
            loss = None

        return mu, sigma, log_p, kl, loss

    def sample(self, dist):
        return dist.rsample()


class NumpyNoiseLatentModel(LatentModel):
    """rsample with the standard normals taken from numpy (loc + scale * eps,
    rsample's own formula), so that tracec and torch draw the same z."""

    def __init__(self, *args, noise_rng, **kwargs):
        super().__init__(*args, **kwargs)
        self.noise_rng = noise_rng
        self.eps = None

    def sample(self, dist):
        if self.eps is None:
            self.eps = torch.from_numpy(self.noise_rng.normal(size=tuple(dist.loc.shape)).astype(np.float32))
        return dist.loc + dist.scale * self.eps


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, r, std=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


r = np.random.default_rng(0)
nr = np.random.default_rng(1)

# the GP sampler: its draws differ, its structure does not
torch.manual_seed(0)
dataset_train = GPCurvesReader(batch_size=4, max_num_context=12)
data_train = dataset_train.generate_curves()
(cx, cy), tx = data_train.query
print("train curves", cx.shape[0], cx.shape[-1], tx.shape[-1], data_train.target_y.shape[-1],
      data_train.num_total_points == tx.shape[1], 3 <= data_train.num_context_points < 12,
      torch.equal(tx[:, :data_train.num_context_points], cx))
print("train curves", data_train.num_context_points, data_train.num_total_points, fmt(cy, 3))
dataset_test = GPCurvesReader(batch_size=1, max_num_context=12, testing=True, random_kernel_parameters=False)
data_test = dataset_test.generate_curves()
print("test curves", tuple(data_test.query[1].shape), tuple(data_test.target_y.shape), data_test.num_total_points,
      f"{data_test.query[1][0, 137, 0].item():.4f}")

# the kernel and its cholesky on numpy points
B, N = 4, 10
x_np = np.sort(nr.uniform(-2, 2, (B, N, 1)), axis=1).astype(np.float32)
l1 = torch.from_numpy(nr.uniform(0.1, 0.6, (B, 1, 1)).astype(np.float32))
sigma_f = torch.from_numpy(nr.uniform(0.1, 1.0, (B, 1)).astype(np.float32))
kernel = dataset_train._gaussian_kernel(torch.from_numpy(x_np), l1, sigma_f)
chol = torch.cholesky(kernel.double()).float()
chol2 = torch.linalg.cholesky(kernel.double())
print("kernel", tuple(kernel.shape), fmt(kernel[1, 0, 2], 4), "cholesky", chol.dtype, fmt(chol[1, 0, 3], 4),
      torch.allclose(chol.double(), chol2, atol=1e-6), torch.allclose(chol @ chol.transpose(-1, -2), kernel, atol=1e-5),
      bool((chol.triu(1) == 0).all()))
L, info = torch.linalg.cholesky_ex(kernel)
print("cholesky_ex", info.tolist(), torch.allclose(L, chol, atol=1e-5),
      "upper", torch.allclose(torch.linalg.cholesky(kernel, upper=True), chol.transpose(-1, -2), atol=1e-5))
try:
    torch.linalg.cholesky(torch.tensor([[1.0, 2.0], [2.0, 1.0]]))
except Exception as e:
    print(type(e).__name__, str(e).split(":")[0])


def numpy_curves(num_context, num_total):
    """generate_curves' training branch with numpy's draws."""
    x_values = torch.from_numpy(nr.uniform(-2, 2, (B, num_total, 1)).astype(np.float32))
    l1 = torch.from_numpy(nr.uniform(0.1, 0.6, (B, 1, 1)).astype(np.float32))
    sigma_f = torch.from_numpy(nr.uniform(0.1, 1.0, (B, 1)).astype(np.float32))
    kernel = dataset_train._gaussian_kernel(x_values, l1, sigma_f)
    cholesky = torch.cholesky(kernel.double()).float()
    y_values = torch.matmul(cholesky, torch.from_numpy(nr.normal(size=(B, 1, num_total, 1)).astype(np.float32)))
    y_values = y_values.squeeze(3).permute(0, 2, 1)
    query = ((x_values[:, :num_context], y_values[:, :num_context]), x_values)
    return NPRegressionDescription(query=query, target_y=y_values, num_total_points=num_total,
                                   num_context_points=num_context)


# every attention on the same inputs
q_, k_, v_ = (torch.from_numpy(r.normal(size=s).astype(np.float32)) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 6)))
print("uniform", fmt(uniform_attention(q_, v_)[1, 2], 3), "laplace", fmt(laplace_attention(q_, k_, v_, 1.0, True)[0, 1], 3),
      fmt(laplace_attention(q_, k_, v_, 0.5, False)[0, 1], 3))
print("dot_product", fmt(dot_product_attention(q_, k_, v_, True)[1, 0], 3), fmt(dot_product_attention(q_, k_, v_, False)[1, 0], 3))
mha = Attention('mlp', [8, 8], 'multihead', x_size=4, num_heads=2, d_v=6)
load_numpy(mha, r)
print("multihead", tuple(mha(k_, q_, v_).shape), fmt(mha(k_, q_, v_)[0, 2], 4),
      [n for n, _ in mha.named_parameters()][4:9])

HIDDEN = 16
model = NumpyNoiseLatentModel(1, 1, [HIDDEN] * 2, HIDDEN, [HIDDEN, HIDDEN, 2], use_deterministic_path=True,
                              deterministic_encoder_output_sizes=[HIDDEN] * 2,
                              attention=Attention('mlp', [HIDDEN] * 2, 'multihead', num_heads=4), noise_rng=nr)
load_numpy(model, r, std=0.2)
print("params", sum(p.numel() for p in model.parameters()))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for it in range(4):
    data = numpy_curves(5, 9)
    model.eps = None
    optimizer.zero_grad()
    mu, sigma, log_p, kl, loss = model(data.query, data.num_total_points, data.target_y)
    loss.backward()
    optimizer.step()
    print(f"Iteration: {it}, train loss: {loss.item():.5f}", tuple(log_p.shape), tuple(kl.shape),
          f"kl {kl[0, 0].item():.5f}", fmt(sigma, 2))

# the prior and the posterior, their KL against the closed form
data = numpy_curves(4, 8)
(cx, cy), tx = data.query
prior = model._latent_encoder(cx, cy)
posterior = model._latent_encoder(tx, data.target_y)
kl = kl_divergence(posterior, prior)
closed = (torch.log(prior.scale / posterior.scale) + (posterior.scale ** 2 + (posterior.loc - prior.loc) ** 2)
          / (2 * prior.scale ** 2) - 0.5)
print("kl", tuple(kl.shape), fmt(kl.sum(-1), 4), torch.allclose(kl, closed, atol=1e-5),
      f"{prior.log_prob(posterior.loc).sum().item():.4f}", fmt(prior.entropy()[0], 2), prior.batch_shape, prior.event_shape)

# test time: no target_y, the prior's sample
model.eval()
with torch.no_grad():
    model.eps = None
    mu, sigma, log_p, kl, loss = model(data.query, data.num_total_points)
print("predict", tuple(mu.shape), fmt(mu[0], 4), fmt(sigma[0], 3), log_p, kl, loss)
sampling = LatentModel(1, 1, [HIDDEN] * 2, HIDDEN, [HIDDEN, HIDDEN, 2], use_deterministic_path=True,
                       deterministic_encoder_output_sizes=[HIDDEN] * 2,
                       attention=Attention('mlp', [HIDDEN] * 2, 'multihead', num_heads=4))
print("load_state_dict", sampling.load_state_dict(model.state_dict()))
with torch.no_grad():
    torch.manual_seed(0)
    pred = sampling.eval()(data_test.query, data_test.num_total_points)
print("sampled predict", tuple(pred[0].shape), "[rng]", fmt(pred[0][0, ::100], 4))
model.train()

# one training step under torch.compile against the same step eagerly
data = numpy_curves(6, 10)
model.eps = torch.from_numpy(nr.normal(size=(B, HIDDEN)).astype(np.float32))


def train_step(query, target_y):
    optimizer.zero_grad()
    mu, sigma, log_p, kl, loss = model(query, 10, target_y)
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(data.query, data.target_y).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(data.query, data.target_y).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
