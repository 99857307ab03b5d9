# LoRA the way microsoft/LoRA writes it: loralib/layers.py (the LoRALayer
# mixin with its `lambda x: x` dropout; Embedding, Linear and MergedLinear
# built by calling nn.Embedding.__init__ / nn.Linear.__init__ on self, whose
# reset_parameters reaches the subclass's override before lora_A exists;
# kaiming_uniform_(self.lora_A, a=math.sqrt(5)) and zeros_(self.lora_B);
# fan_in_fan_out with `self.weight.data = self.weight.data.transpose(0, 1)`
# and the T(w) helper; train(mode) merging and unmerging through
# `self.weight.data += / -= ...`; Embedding's F.embedding(x,
# self.lora_A.transpose(0, 1), self.padding_idx, ...); MergedLinear's lora_ind
# from new_zeros(..., dtype=torch.bool).view(...)[enable_lora, :] = True,
# zero_pad by result.new_zeros((len(self.lora_ind), *x.shape[1:])) and
# result[self.lora_ind] = x, merge_AB's grouped F.conv1d, the
# merge_AB().T forward of the current release and the older release's
# F.conv1d(after_A.transpose(-2, -1), self.lora_B.unsqueeze(-1),
# groups=sum(self.enable_lora)) forward with its view-based zero_pad),
# loralib/utils.py (mark_only_lora_as_trainable with bias='none' / 'all' /
# 'lora_only', lora_state_dict), and examples/NLG (src/model.py's GPT-2 with
# Conv1D's torch.addmm, the tanh gelu, the eps=1e-12 LayerNorm, the c_attn
# MergedLinear(enable_lora=[True, False, True], fan_in_fan_out=True,
# merge_weights=False), `w * b - 1e10 * (1 - b)` causal masking, split_heads
# with k=True, presents from torch.stack, the tied lm_head,
# nn.CrossEntropyLoss(ignore_index=-1, reduce=False) with lm_mask,
# label smoothing through log_softmax / gather, load_weight's key renaming
# and load_state_dict(strict=False); src/gpt2_ft.py's
# mark_only_lora_as_trainable, AdamW and a linear warm-up schedule, the
# LoRA-only checkpoint). Changes for a CPU test: a tiny GPT-2 (2 layers,
# n_embd 16) whose "pretrained" weights come from numpy, token data from
# numpy, a few fine-tuning steps; then one fine-tuning step under
# torch.compile against the same step eagerly.
import copy
import math
import os
import tempfile
from typing import Dict, List

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parameter import Parameter


# ---------------------------------------------------------------- loralib/layers.py
class LoRALayer():
    def __init__(
        self,
        r: int,
        lora_alpha: int,
        lora_dropout: float,
        merge_weights: bool,
    ):
        self.r = r
        self.lora_alpha = lora_alpha
        # Optional dropout
        if lora_dropout > 0.:
            self.lora_dropout = nn.Dropout(p=lora_dropout)
        else:
            self.lora_dropout = lambda x: x
        # Mark the weight as unmerged
        self.merged = False
        self.merge_weights = merge_weights


class Embedding(nn.Embedding, LoRALayer):
    # LoRA implemented in a dense layer
    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        r: int = 0,
        lora_alpha: int = 1,
        merge_weights: bool = True,
        **kwargs
    ):
        nn.Embedding.__init__(self, num_embeddings, embedding_dim, **kwargs)
        LoRALayer.__init__(self, r=r, lora_alpha=lora_alpha, lora_dropout=0,
                           merge_weights=merge_weights)
        # Actual trainable parameters
        if r > 0:
            self.lora_A = nn.Parameter(self.weight.new_zeros((r, num_embeddings)))
            self.lora_B = nn.Parameter(self.weight.new_zeros((embedding_dim, r)))
            self.scaling = self.lora_alpha / self.r
            # Freezing the pre-trained weight matrix
            self.weight.requires_grad = False
        self.reset_parameters()

    def reset_parameters(self):
        nn.Embedding.reset_parameters(self)
        if hasattr(self, 'lora_A'):
            # initialize A the same way as the default for nn.Linear and B to zero
            nn.init.zeros_(self.lora_A)
            nn.init.normal_(self.lora_B)

    def train(self, mode: bool = True):
        nn.Embedding.train(self, mode)
        if mode:
            if self.merge_weights and self.merged:
                # Make sure that the weights are not merged
                if self.r > 0:
                    self.weight.data -= (self.lora_B @ self.lora_A).transpose(0, 1) * self.scaling
                self.merged = False
        else:
            if self.merge_weights and not self.merged:
                # Merge the weights and mark it
                if self.r > 0:
                    self.weight.data += (self.lora_B @ self.lora_A).transpose(0, 1) * self.scaling
                self.merged = True

    def forward(self, x: torch.Tensor):
        if self.r > 0 and not self.merged:
            result = nn.Embedding.forward(self, x)
            after_A = F.embedding(
                x, self.lora_A.transpose(0, 1), self.padding_idx, self.max_norm,
                self.norm_type, self.scale_grad_by_freq, self.sparse
            )
            result += (after_A @ self.lora_B.transpose(0, 1)) * self.scaling
            return result
        else:
            return nn.Embedding.forward(self, x)


class Linear(nn.Linear, LoRALayer):
    # LoRA implemented in a dense layer
    def __init__(
        self,
        in_features: int,
        out_features: int,
        r: int = 0,
        lora_alpha: int = 1,
        lora_dropout: float = 0.,
        fan_in_fan_out: bool = False,  # Set this to True if the layer to replace stores weight like (fan_in, fan_out)
        merge_weights: bool = True,
        **kwargs
    ):
        nn.Linear.__init__(self, in_features, out_features, **kwargs)
        LoRALayer.__init__(self, r=r, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                           merge_weights=merge_weights)

        self.fan_in_fan_out = fan_in_fan_out
        # Actual trainable parameters
        if r > 0:
            self.lora_A = nn.Parameter(self.weight.new_zeros((r, in_features)))
            self.lora_B = nn.Parameter(self.weight.new_zeros((out_features, r)))
            self.scaling = self.lora_alpha / self.r
            # Freezing the pre-trained weight matrix
            self.weight.requires_grad = False
        self.reset_parameters()
        if fan_in_fan_out:
            self.weight.data = self.weight.data.transpose(0, 1)

    def reset_parameters(self):
        nn.Linear.reset_parameters(self)
        if hasattr(self, 'lora_A'):
            # initialize B the same way as the default for nn.Linear and A to zero
            # this is different than what is described in the paper but should not affect performance
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B)

    def train(self, mode: bool = True):
        def T(w):
            return w.transpose(0, 1) if self.fan_in_fan_out else w
        nn.Linear.train(self, mode)
        if mode:
            if self.merge_weights and self.merged:
                # Make sure that the weights are not merged
                if self.r > 0:
                    self.weight.data -= T(self.lora_B @ self.lora_A) * self.scaling
                self.merged = False
        else:
            if self.merge_weights and not self.merged:
                # Merge the weights and mark it
                if self.r > 0:
                    self.weight.data += T(self.lora_B @ self.lora_A) * self.scaling
                self.merged = True

    def forward(self, x: torch.Tensor):
        def T(w):
            return w.transpose(0, 1) if self.fan_in_fan_out else w
        if self.r > 0 and not self.merged:
            result = F.linear(x, T(self.weight), bias=self.bias)
            result += (self.lora_dropout(x) @ self.lora_A.transpose(0, 1) @ self.lora_B.transpose(0, 1)) * self.scaling
            return result
        else:
            return F.linear(x, T(self.weight), bias=self.bias)


class MergedLinear(nn.Linear, LoRALayer):
    # LoRA implemented in a dense layer
    def __init__(
        self,
        in_features: int,
        out_features: int,
        r: int = 0,
        lora_alpha: int = 1,
        lora_dropout: float = 0.,
        enable_lora: List[bool] = [False],
        fan_in_fan_out: bool = False,
        merge_weights: bool = True,
        **kwargs
    ):
        nn.Linear.__init__(self, in_features, out_features, **kwargs)
        LoRALayer.__init__(self, r=r, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                           merge_weights=merge_weights)
        assert out_features % len(enable_lora) == 0, \
            'The length of enable_lora must divide out_features'
        self.enable_lora = enable_lora
        self.fan_in_fan_out = fan_in_fan_out
        # Actual trainable parameters
        if r > 0 and any(enable_lora):
            self.lora_A = nn.Parameter(
                self.weight.new_zeros((r * sum(enable_lora), in_features)))
            self.lora_B = nn.Parameter(
                self.weight.new_zeros((out_features // len(enable_lora) * sum(enable_lora), r))
            )  # weights for Conv1D with groups=sum(enable_lora)
            self.scaling = self.lora_alpha / self.r
            # Freezing the pre-trained weight matrix
            self.weight.requires_grad = False
            # Compute the indices
            self.lora_ind = self.weight.new_zeros(
                (out_features, ), dtype=torch.bool
            ).view(len(enable_lora), -1)
            self.lora_ind[enable_lora, :] = True
            self.lora_ind = self.lora_ind.view(-1)
        self.reset_parameters()
        if fan_in_fan_out:
            self.weight.data = self.weight.data.transpose(0, 1)

    def reset_parameters(self):
        nn.Linear.reset_parameters(self)
        if hasattr(self, 'lora_A'):
            # initialize A the same way as the default for nn.Linear and B to zero
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B)

    def zero_pad(self, x):
        result = x.new_zeros((len(self.lora_ind), *x.shape[1:]))
        result[self.lora_ind] = x
        return result

    def merge_AB(self):
        def T(w):
            return w.transpose(0, 1) if self.fan_in_fan_out else w
        delta_w = F.conv1d(
            self.lora_A.unsqueeze(0),
            self.lora_B.unsqueeze(-1),
            groups=sum(self.enable_lora)
        ).squeeze(0)
        return T(self.zero_pad(delta_w))

    def train(self, mode: bool = True):
        def T(w):
            return w.transpose(0, 1) if self.fan_in_fan_out else w
        nn.Linear.train(self, mode)
        if mode:
            if self.merge_weights and self.merged:
                # Make sure that the weights are not merged
                if self.r > 0 and any(self.enable_lora):
                    self.weight.data -= self.merge_AB() * self.scaling
                self.merged = False
        else:
            if self.merge_weights and not self.merged:
                # Merge the weights and mark it
                if self.r > 0 and any(self.enable_lora):
                    self.weight.data += self.merge_AB() * self.scaling
                self.merged = True

    def forward(self, x: torch.Tensor):
        def T(w):
            return w.transpose(0, 1) if self.fan_in_fan_out else w
        if self.merged:
            return F.linear(x, T(self.weight), bias=self.bias)
        else:
            result = F.linear(x, T(self.weight), bias=self.bias)
            if self.r > 0:
                result += self.lora_dropout(x) @ T(self.merge_AB().T) * self.scaling
            return result


class MergedLinearV1(MergedLinear):
    """The forward and zero_pad of loralib's first release (0.1.0)."""

    def zero_pad_v1(self, x):
        result = x.new_zeros((*x.shape[:-1], self.out_features))
        result = result.view(-1, self.out_features)
        result[:, self.lora_ind] = x.reshape(
            -1, self.out_features // len(self.enable_lora) * sum(self.enable_lora)
        )
        return result.view((*x.shape[:-1], self.out_features))

    def forward(self, x: torch.Tensor):
        def T(w):
            return w.T if self.fan_in_fan_out else w
        result = F.linear(x, T(self.weight), bias=self.bias)
        if self.r > 0:
            after_A = F.linear(self.lora_dropout(x), self.lora_A)
            after_B = F.conv1d(
                after_A.transpose(-2, -1),
                self.lora_B.unsqueeze(-1),
                groups=sum(self.enable_lora)
            ).transpose(-2, -1)
            result += self.zero_pad_v1(after_B) * self.scaling
        return result


class ConvLoRA(nn.Module, LoRALayer):
    def __init__(self, conv_module, in_channels, out_channels, kernel_size, r=0, lora_alpha=1, lora_dropout=0., merge_weights=True, **kwargs):
        super(ConvLoRA, self).__init__()
        self.conv = conv_module(in_channels, out_channels, kernel_size, **kwargs)
        for name, param in self.conv.named_parameters():
            self.register_parameter(name, param)
        LoRALayer.__init__(self, r=r, lora_alpha=lora_alpha, lora_dropout=lora_dropout, merge_weights=merge_weights)
        assert isinstance(kernel_size, int)
        # Actual trainable parameters
        if r > 0:
            self.lora_A = nn.Parameter(
                self.conv.weight.new_zeros((r * kernel_size, in_channels * kernel_size))
            )
            self.lora_B = nn.Parameter(
              self.conv.weight.new_zeros((out_channels//self.conv.groups*kernel_size, r*kernel_size))
            )
            self.scaling = self.lora_alpha / self.r
            # Freezing the pre-trained weight matrix
            self.conv.weight.requires_grad = False
        self.reset_parameters()
        self.merged = False

    def reset_parameters(self):
        self.conv.reset_parameters()
        if hasattr(self, 'lora_A'):
            # initialize A the same way as the default for nn.Linear and B to zero
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B)

    def train(self, mode=True):
        super(ConvLoRA, self).train(mode)
        if mode:
            if self.merge_weights and self.merged:
                if self.r > 0:
                    # Make sure that the weights are not merged
                    self.conv.weight.data -= (self.lora_B @ self.lora_A).view(self.conv.weight.shape) * self.scaling
                self.merged = False
        else:
            if self.merge_weights and not self.merged:
                if self.r > 0:
                    # Merge the weights and mark it
                    self.conv.weight.data += (self.lora_B @ self.lora_A).view(self.conv.weight.shape) * self.scaling
                self.merged = True

    def forward(self, x):
        if self.r > 0 and not self.merged:
            return self.conv._conv_forward(
                x,
                self.conv.weight + (self.lora_B @ self.lora_A).view(self.conv.weight.shape) * self.scaling,
                self.conv.bias
            )
        return self.conv(x)


class Conv2d(ConvLoRA):
    def __init__(self, *args, **kwargs):
        super(Conv2d, self).__init__(nn.Conv2d, *args, **kwargs)


class Conv1d(ConvLoRA):
    def __init__(self, *args, **kwargs):
        super(Conv1d, self).__init__(nn.Conv1d, *args, **kwargs)


# ---------------------------------------------------------------- loralib/utils.py
def mark_only_lora_as_trainable(model: nn.Module, bias: str = 'none') -> None:
    for n, p in model.named_parameters():
        if 'lora_' not in n:
            p.requires_grad = False
    if bias == 'none':
        return
    elif bias == 'all':
        for n, p in model.named_parameters():
            if 'bias' in n:
                p.requires_grad = True
    elif bias == 'lora_only':
        for m in model.modules():
            if isinstance(m, LoRALayer) and \
                    hasattr(m, 'bias') and \
                    m.bias is not None:
                m.bias.requires_grad = True
    else:
        raise NotImplementedError


def lora_state_dict(model: nn.Module, bias: str = 'none') -> Dict[str, torch.Tensor]:
    my_state_dict = model.state_dict()
    if bias == 'none':
        return {k: my_state_dict[k] for k in my_state_dict if 'lora_' in k}
    elif bias == 'all':
        return {k: my_state_dict[k] for k in my_state_dict if 'lora_' in k or 'bias' in k}
    elif bias == 'lora_only':
        to_return = {}
        for k in my_state_dict:
            if 'lora_' in k:
                to_return[k] = my_state_dict[k]
                bias_name = k.split('lora_')[0] + 'bias'
                if bias_name in my_state_dict:
                    to_return[bias_name] = my_state_dict[bias_name]
        return to_return
    else:
        raise NotImplementedError


# ---------------------------------------------------------------- examples/NLG/src/model.py
def gelu(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))


class LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-12):
        """Construct a layernorm module in the TF style (epsilon inside the square root).
        """
        super(LayerNorm, self).__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x):
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.variance_epsilon)
        return self.weight * x + self.bias


class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super(Conv1D, self).__init__()
        self.nf = nf
        w = torch.empty(nx, nf)
        nn.init.normal_(w, std=0.02)
        self.weight = Parameter(w)
        self.bias = Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(*size_out)
        return x


class Attention(nn.Module):
    def __init__(self, nx, n_ctx, config, scale=False):
        super(Attention, self).__init__()
        n_state = nx  # in Attention: n_state=768 (nx=n_embd)
        # [switch nx => n_state from Block to Attention to keep identical to TF implem]

        assert n_state % config.n_head == 0
        self.register_buffer("bias", torch.tril(torch.ones(n_ctx, n_ctx)).view(1, 1, n_ctx, n_ctx))
        self.n_head = config.n_head
        self.split_size = n_state
        self.scale = scale
        self.c_attn = MergedLinear(
            nx, n_state * 3,
            r=config.lora_attn_dim,
            lora_alpha=config.lora_attn_alpha,
            lora_dropout=config.lora_dropout,
            enable_lora=[True, False, True],
            fan_in_fan_out=True,
            merge_weights=False
        )
        self.c_proj = Conv1D(n_state, nx)

        self.config = config

    def _attn(self, q, k, v, len_kv=None):
        w = torch.matmul(q, k)
        if self.scale:
            w = w / math.sqrt(v.size(-1))
        nd, ns = w.size(-2), w.size(-1)
        b = self.bias[:, :, ns-nd:ns, :ns]
        w = w * b - 1e10 * (1 - b)

        # q : (batch, head, q_seq_length, head_features)
        # k : (batch, head, head_features, kv_seq_length)
        # w : (batch, head, q_seq_length, kv_seq_length)
        # v : (batch, head, kv_seq_length, head_features)
        if len_kv is not None:
            _len = torch.arange(k.size(-1), device=k.device)
            _input_msk = _len[None, :] >= (len_kv)[:, None]
            w = w.masked_fill(_input_msk.unsqueeze(1).unsqueeze(2), -1.0e10)

        w = nn.Softmax(dim=-1)(w)
        return torch.matmul(w, v)

    def merge_heads(self, x):
        x = x.permute(0, 2, 1, 3).contiguous()
        new_x_shape = x.size()[:-2] + (x.size(-2) * x.size(-1),)
        return x.view(*new_x_shape)  # in Tensorflow implem: fct merge_states

    def split_heads(self, x, k=False):
        new_x_shape = x.size()[:-1] + (self.n_head, x.size(-1) // self.n_head)
        x = x.view(*new_x_shape)  # in Tensorflow implem: fct split_states
        if k:
            return x.permute(0, 2, 3, 1).contiguous()  # (batch, head, head_features, seq_length)
        else:
            return x.permute(0, 2, 1, 3).contiguous()  # (batch, head, seq_length, head_features)

    def forward(self, x, history=None, layer_past=None, len_past=None):
        hidden_states = x

        x = self.c_attn(x)
        query, key, value = x.split(self.split_size, dim=2)

        query = self.split_heads(query)
        key = self.split_heads(key, k=True)
        value = self.split_heads(value)

        len_kv = None

        if layer_past is not None:
            # key : (batch, head, head_features, seq_length)
            # value : (batch, head, seq_length, head_features)
            # layer_past, key : (batch, head, seq_length, head_features)
            if len_past is None:
                past_key, past_value = layer_past[0].transpose(-2, -1), layer_past[1]  # transpose back cf below
                key = torch.cat((past_key, key), dim=-1)
                value = torch.cat((past_value, value), dim=-2)

        present = torch.stack((key.transpose(-2, -1), value))  # transpose to have same shapes for stacking

        a = self._attn(query, key, value, len_kv=len_kv)
        a = self.merge_heads(a)
        a = self.c_proj(a)
        return a, present


class MLP(nn.Module):
    def __init__(self, n_state, config):  # in MLP: n_state=3072 (4 * n_embd)
        super(MLP, self).__init__()
        nx = config.n_embd
        self.c_fc = Conv1D(n_state, nx)
        self.c_proj = Conv1D(nx, n_state)
        self.act = gelu

    def forward(self, x):
        h = self.act(self.c_fc(x))
        h2 = self.c_proj(h)
        return h2


class Block(nn.Module):
    def __init__(self, n_ctx, config, scale=False):
        super(Block, self).__init__()
        nx = config.n_embd
        self.ln_1 = LayerNorm(nx, eps=config.layer_norm_epsilon)
        self.attn = Attention(nx, n_ctx, config, scale)
        self.ln_2 = LayerNorm(nx, eps=config.layer_norm_epsilon)
        self.mlp = MLP(4 * nx, config)

    def forward(self, x, layer_past=None, len_past=None):
        a, present = self.attn(self.ln_1(x), layer_past=layer_past, len_past=len_past)
        x = x + a
        m = self.mlp(self.ln_2(x))
        x = x + m
        return x, present


class GPT2Model(nn.Module):
    def __init__(self, config):
        super(GPT2Model, self).__init__()
        self.n_layer = config.n_layer
        self.n_embd = config.n_embd
        self.n_vocab = config.vocab_size

        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        block = Block(config.n_ctx, config, scale=True)
        self.h = nn.ModuleList([copy.deepcopy(block) for _ in range(config.n_layer)])
        self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)

        self.config = config

    def forward(self, input_ids, position_ids=None, token_type_ids=None, past=None, len_past=None):
        if past is None:
            past_length = 0
            past = [None] * len(self.h)
        elif len_past is None:
            # equal size for past. []
            past_length = past[0][0].size(-2)

        if position_ids is None and len_past is None:
            position_ids = torch.arange(
                past_length, input_ids.size(-1) + past_length,
                dtype=torch.long, device=input_ids.device
            )
            position_ids = position_ids.unsqueeze(0).expand_as(input_ids)

        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_ids.size(-1))
        position_ids = position_ids.view(-1, position_ids.size(-1))

        inputs_embeds = self.wte(input_ids)

        position_embeds = self.wpe(position_ids)

        if token_type_ids is not None:
            token_type_ids = token_type_ids.view(-1, token_type_ids.size(-1))
            token_type_embeds = self.wte(token_type_ids)
        else:
            token_type_embeds = 0
        hidden_states = inputs_embeds + position_embeds + token_type_embeds
        presents = []
        for block, layer_past in zip(self.h, past):
            hidden_states, present = block(hidden_states, layer_past=layer_past, len_past=len_past)
            presents.append(present)
        hidden_states = self.ln_f(hidden_states)
        output_shape = input_shape + (hidden_states.size(-1),)
        return hidden_states.view(*output_shape), presents


class GPT2LMHead(nn.Module):
    def __init__(self, model_embeddings_weights, config):
        super(GPT2LMHead, self).__init__()
        self.n_embd = config.n_embd
        self.set_embeddings_weights(model_embeddings_weights)

    def set_embeddings_weights(self, model_embeddings_weights):
        embed_shape = model_embeddings_weights.shape
        self.decoder = nn.Linear(embed_shape[1], embed_shape[0], bias=False)
        self.decoder.weight = model_embeddings_weights  # Tied weights

    def forward(self, hidden_state):
        # Truncated Language modeling logits (we remove the last token)
        # h_trunc = h[:, :-1].contiguous().view(-1, self.n_embd)
        lm_logits = self.decoder(hidden_state)
        return lm_logits


class GPT2Config(object):
    def __init__(
        self,
        vocab_size_or_config_json_file=50257,
        n_positions=1024,
        n_ctx=1024,
        n_embd=768,
        n_layer=12,
        n_head=12,
        layer_norm_epsilon=1e-5,
        initializer_range=0.02,
        lora_attn_dim=0,
        lora_attn_alpha=128,
        lora_dropout=0.0,
        lora_r_dropout=0.0,
        fix_dropout=0.0,
    ):
        self.vocab_size = vocab_size_or_config_json_file
        self.n_ctx = n_ctx
        self.n_positions = n_positions
        self.n_embd = n_embd
        self.n_layer = n_layer
        self.n_head = n_head
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.lora_attn_dim = lora_attn_dim
        self.lora_attn_alpha = lora_attn_alpha
        self.lora_dropout = lora_dropout
        self.lora_r_dropout = lora_r_dropout

        self.fix_dropout = fix_dropout


class GPT2LMModel(nn.Module):
    def __init__(self, config):
        super(GPT2LMModel, self).__init__()
        self.transformer = GPT2Model(config)
        self.lm_head = GPT2LMHead(self.transformer.wte.weight, config)
        self.apply(self._init_weights)

    def set_tied(self):
        """ Make sure we are sharing the embeddings"""
        self.lm_head.set_embeddings_weights(self.transformer.wte.weight)

    def forward(
        self,
        input_ids,
        lm_labels=None,
        lm_mask=None,
        past=None,
        len_past=None,
        label_smooth=0.0,
        is_report_accuracy=False
    ):
        _batch, _len = input_ids.shape
        hidden_states, presents = self.transformer(input_ids, past=past, len_past=len_past)

        # batch, seq, vocab
        lm_logits = self.lm_head(hidden_states)

        if lm_labels is not None:

            if label_smooth > 0.0001:
                logprobs = torch.nn.functional.log_softmax(lm_logits.view(-1, lm_logits.size(-1)), dim=-1)
                nll_loss = -logprobs.gather(dim=-1, index=lm_labels.view(-1).unsqueeze(1))
                nll_loss = nll_loss.squeeze(1)
                smooth_loss = -logprobs.mean(dim=-1)
                loss = (1.0 - label_smooth) * nll_loss + label_smooth * smooth_loss
                loss = loss.view(_batch, _len)
            else:
                loss_fct = nn.CrossEntropyLoss(ignore_index=-1, reduce=False)
                loss = loss_fct(lm_logits.view(-1, lm_logits.size(-1)), lm_labels.view(-1)).view(_batch, _len)

            if lm_mask is None:
                lm_mask = torch.ones(loss.shape, dtype=loss.dtype, device=loss.device)
            loss = loss * lm_mask

            loss = loss.sum() / (lm_mask.sum() + 0.0001)

            return lm_logits, loss
        return lm_logits, presents

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)

        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()

    def load_weight(self, state_dict):
        if 'model_state_dict' in state_dict:
            state_dict = state_dict['model_state_dict']

        state_dict_tmp = copy.deepcopy(state_dict)
        old_keys = []
        new_keys = []
        for key in state_dict_tmp:
            new_key = None
            if key.endswith(".g"):
                new_key = key[:-2] + ".weight"
            elif key.endswith(".b"):
                new_key = key[:-2] + ".bias"
            elif key.endswith(".w"):
                new_key = key[:-2] + ".weight"

            if key.startswith("module.transformer."):
                new_key = key[len("module.transformer."):]

            if new_key:
                old_keys.append(key)
                new_keys.append(new_key)

        for old_key, new_key in zip(old_keys, new_keys):
            state_dict[new_key] = state_dict.pop(old_key)

        for n, p in self.transformer.named_parameters():
            if n not in state_dict:
                state_dict[n] = p

        result = self.transformer.load_state_dict(state_dict, strict=False)
        self.set_tied()
        return result


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


rng = np.random.default_rng(0)


def arr(*shape, std=1.0):
    return torch.from_numpy(rng.normal(0, std, shape).astype(np.float32))


# the layers on their own
torch.manual_seed(0)
lin = Linear(6, 4, r=2, lora_alpha=4)
print("Linear", lin.weight.requires_grad, lin.lora_A.requires_grad, lin.scaling, lin.merged,
      "B zero", lin.lora_B.abs().sum().item(), "A bound", bool(lin.lora_A.abs().max() <= 1 / math.sqrt(6)))
print("lora_dropout is identity", lin.lora_dropout(torch.ones(2)).tolist(), type(lin.lora_dropout).__name__)
lin_t = Linear(6, 4, r=2, lora_alpha=4, fan_in_fan_out=True)
print("fan_in_fan_out weight", tuple(lin_t.weight.shape), lin_t.weight.is_contiguous(), tuple(lin_t.weight.stride()))
with torch.no_grad():
    for m in (lin, lin_t):
        m.weight.copy_(arr(*m.weight.shape, std=0.3))
        m.bias.copy_(arr(4, std=0.1))
        m.lora_A.copy_(arr(2, 6, std=0.3))
        m.lora_B.copy_(arr(4, 2, std=0.3))
x = arr(3, 6)
y_train = lin(x)
lin.eval()
y_eval = lin(x)
print("Linear merged", lin.merged, fmt(y_train, 6), "eval == train", torch.allclose(y_eval, y_train, atol=1e-6))
lin.train()
print("unmerged", lin.merged, torch.allclose(lin(x), y_train, atol=1e-6))
yt = lin_t(x)
lin_t.eval()
print("fan_in_fan_out merged == unmerged", torch.allclose(lin_t(x), yt, atol=1e-6), fmt(yt, 4))
lin_t.train()

emb = Embedding(10, 4, r=2, lora_alpha=2, padding_idx=0)
print("Embedding init", emb.lora_A.abs().sum().item(), "B normal", f"{emb.lora_B.std().item():.1f}",
      emb.weight.requires_grad, "padding row", emb.weight[0].abs().sum().item())
with torch.no_grad():
    emb.lora_A.copy_(arr(2, 10, std=0.5))
    emb.lora_B.copy_(arr(4, 2, std=0.5))
    emb.weight.copy_(arr(10, 4, std=0.5))
ids = torch.tensor([[0, 3, 9], [3, 3, 1]])
e_train = emb(ids)
e_train.sum().backward()
print("Embedding", fmt(e_train[0, 1], 4), "grad A", fmt(emb.lora_A.grad[:, [0, 3]], 4), "grad B", fmt(emb.lora_B.grad, 4))
emb.eval()
print("Embedding merged == unmerged", emb.merged, torch.allclose(emb(ids), e_train, atol=1e-5))
emb.train()

ml = MergedLinear(6, 9, r=2, lora_alpha=4, enable_lora=[True, False, True])
ml1 = MergedLinearV1(6, 9, r=2, lora_alpha=4, enable_lora=[True, False, True], fan_in_fan_out=True)
print("lora_ind", ml.lora_ind.tolist(), ml.lora_ind.dtype, "A", tuple(ml.lora_A.shape), "B", tuple(ml.lora_B.shape))
with torch.no_grad():
    ml.weight.copy_(arr(9, 6, std=0.3))
    ml.bias.copy_(arr(9, std=0.1))
    ml.lora_A.copy_(arr(4, 6, std=0.3))
    ml.lora_B.copy_(arr(6, 2, std=0.3))
    ml1.weight.copy_(ml.weight.T)
    ml1.bias.copy_(ml.bias)
    ml1.lora_A.copy_(ml.lora_A)
    ml1.lora_B.copy_(ml.lora_B)
delta = ml.merge_AB()
print("merge_AB", tuple(delta.shape), fmt(delta[6], 6), "zero rows", delta[3:6].abs().sum().item())
xm = arr(2, 5, 6)
m_train = ml(xm)
m_v1 = ml1(xm)
print("MergedLinear", fmt(m_train[1, 4], 9), "v1 forward agrees", torch.allclose(m_v1, m_train, atol=1e-6))
ml.eval()
print("MergedLinear merged == unmerged", torch.allclose(ml(xm), m_train, atol=1e-6))
ml.train()
print("unmerged back", torch.allclose(ml.weight, ml1.weight.T, atol=1e-6))
(m_v1 ** 2).sum().backward()
print("v1 grads", fmt(ml1.lora_A.grad, 4), fmt(ml1.lora_B.grad, 4), ml1.weight.grad)

# ConvLoRA: the wrapped conv's Parameters registered on the wrapper too,
# the low-rank update added through conv._conv_forward, merged by train(False)
cl = Conv2d(3, 4, 3, r=2, lora_alpha=4, padding=1)
print("ConvLoRA params", [n for n, _ in cl.named_parameters()], list(cl.state_dict()),
      [p.requires_grad for p in cl.parameters()], cl.weight is cl.conv.weight, tuple(cl.lora_B.shape))
with torch.no_grad():
    for n, p in cl.named_parameters():
        p.copy_(arr(*p.shape, std=0.3))
xc = arr(2, 3, 5, 5)
c_train = cl(xc)
gA, gB = torch.autograd.grad(c_train.pow(2).sum(), [cl.lora_A, cl.lora_B])
print("ConvLoRA", fmt(c_train[1, 2, 2], 5), "grads", fmt(gA, 4), fmt(gB, 4))
cl.eval()
print("ConvLoRA merged == unmerged", cl.merged, torch.allclose(cl(xc), c_train, atol=1e-5))
cl.train()
# (loralib's ConvLoRA shapes lora_A / lora_B for a k x k kernel: a Conv1d's
# update, (out * k) x (in * k) values, does not fit its out x in x k weight)
c1 = Conv1d(4, 4, 3, r=1, padding='same')
try:
    c1(arr(1, 4, 6))
except RuntimeError as e:
    print("Conv1d LoRA", tuple(c1.lora_A.shape), tuple(c1.lora_B.shape), "RuntimeError", e)

# a tiny GPT-2 with LoRA on c_attn, "pretrained" weights from numpy
config = GPT2Config(vocab_size_or_config_json_file=50, n_positions=16, n_ctx=16, n_embd=16, n_layer=2, n_head=2,
                    lora_attn_dim=4, lora_attn_alpha=32, lora_dropout=0.0)
torch.manual_seed(0)
lm_net = GPT2LMModel(config)
print("tied", lm_net.lm_head.decoder.weight is lm_net.transformer.wte.weight,
      "c_attn", tuple(lm_net.transformer.h[0].attn.c_attn.weight.shape),
      "trainable", sum(p.requires_grad for p in lm_net.parameters()))
pretrained = {}
for k, v in lm_net.transformer.state_dict().items():
    if 'lora_' in k or k.endswith('attn.bias'):
        continue
    name = "module.transformer." + k if k.startswith('h.0') else k
    if name.startswith("h.1") and (name.endswith("ln_1.weight") or name.endswith("ln_2.weight")):
        name = name[:-len("weight")] + "g"
    pretrained[name] = torch.from_numpy(rng.normal(1.0 if name.endswith(('.g', 'ln_f.weight')) else 0.0,
                                                   0.02 if 'ln' in name else 0.3,
                                                   tuple(v.shape)).astype(np.float32))
pretrained["h.1.attn.unused_extra"] = torch.zeros(3)
result = lm_net.load_weight({'model_state_dict': copy.deepcopy(pretrained)})
print("load_weight missing", result.missing_keys, "unexpected", result.unexpected_keys)
print("loaded", fmt(lm_net.transformer.h[1].ln_1.weight, 3), fmt(lm_net.transformer.h[0].mlp.c_fc.weight, 3),
      "tied again", lm_net.lm_head.decoder.weight is lm_net.transformer.wte.weight)
with torch.no_grad():
    for n, p in lm_net.named_parameters():
        if 'lora_A' in n:
            p.copy_(arr(*p.shape, std=0.2))

mark_only_lora_as_trainable(lm_net, bias='lora_only')
print("trainable", [n for n, p in lm_net.named_parameters() if p.requires_grad])
mark_only_lora_as_trainable(lm_net, bias='all')
print("bias='all'", sum(p.requires_grad for p in lm_net.parameters()))
mark_only_lora_as_trainable(lm_net, bias='lora_only')
try:
    mark_only_lora_as_trainable(lm_net, bias='some')
except NotImplementedError:
    print("NotImplementedError for bias='some'")
mark_only_lora_as_trainable(lm_net, bias='lora_only')

data = torch.from_numpy(rng.integers(1, 50, (8, 12)))
labels = torch.cat([data[:, 1:], torch.full((8, 1), -1, dtype=torch.long)], 1)
mask = (labels >= 0).float()
mask[:, :3] = 0.0
logits, presents = lm_net(data[:2])
print("logits", tuple(logits.shape), fmt(logits[1, 5], 4), "presents", len(presents), tuple(presents[0].shape))
# incremental decoding with past
with torch.no_grad():
    full, _ = lm_net(data[:2, :6])
    first, past = lm_net(data[:2, :5])
    step, _ = lm_net.transformer(data[:2, 5:6], past=past)
    print("past decoding", torch.allclose(lm_net.lm_head(step)[:, -1], full[:, -1], atol=1e-4))
_, loss_plain = lm_net(data[:2], lm_labels=labels[:2], lm_mask=mask[:2])
_, loss_smooth = lm_net(data[:2], lm_labels=labels[:2].clamp(min=0), lm_mask=mask[:2], label_smooth=0.1)
print("losses", f"{loss_plain.item():.5f}", f"{loss_smooth.item():.5f}")

trainable = [p for p in lm_net.parameters() if p.requires_grad]
optimizer = torch.optim.AdamW(trainable, lr=2e-3, weight_decay=0.01)
warmup, total = 2, 6
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda step: (step + 1) / warmup if step < warmup else max(0.0, (total - step) / (total - warmup)))
frozen_before = lm_net.transformer.h[0].mlp.c_fc.weight.clone()
lm_net.train()
for step in range(total):
    b = slice((step * 2) % 8, (step * 2) % 8 + 2)
    optimizer.zero_grad()
    _, loss = lm_net(data[b], lm_labels=labels[b], lm_mask=mask[b], label_smooth=0.0)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trainable, 1.0)
    optimizer.step()
    scheduler.step()
    print(f"step {step} loss {loss.item():.5f} lr {scheduler.get_last_lr()[0]:.6f}")
print("base frozen", torch.equal(frozen_before, lm_net.transformer.h[0].mlp.c_fc.weight),
      lm_net.transformer.h[0].mlp.c_fc.weight.grad, "lora B", fmt(lm_net.transformer.h[1].attn.c_attn.lora_B, 4))
print("c_attn bias grad", fmt(lm_net.transformer.h[0].attn.c_attn.bias.grad, 6))

sd = lora_state_dict(lm_net, bias='lora_only')
print("lora_state_dict", list(sd))
print("bias='none'", list(lora_state_dict(lm_net)), "bias='all'", len(lora_state_dict(lm_net, bias='all')))
path = os.path.join(tempfile.mkdtemp(), 'lora.pt')
torch.save(sd, path)
fresh = GPT2LMModel(config)
fresh.load_weight({'model_state_dict': copy.deepcopy(pretrained)})
missing = fresh.load_state_dict(torch.load(path), strict=False)
print("restored from the LoRA checkpoint", len(missing.missing_keys), missing.unexpected_keys)
lm_net.eval()
fresh.eval()
with torch.no_grad():
    print("same logits", torch.allclose(fresh(data[:2])[0], lm_net(data[:2])[0], atol=1e-5))
lm_net.train()


# one fine-tuning step under torch.compile against the same step eagerly
def train_step(ids, lab, msk):
    optimizer.zero_grad()
    _, loss = lm_net(ids, lm_labels=lab, lm_mask=msk)
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(lm_net.state_dict()), copy.deepcopy(optimizer.state_dict())
batch = (data[:4], labels[:4], mask[:4])
eager = [train_step(*batch).item() for _ in range(2)]
after = {k: v.clone() for k, v in lm_net.state_dict().items()}
lm_net.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(*batch).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(lm_net.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
