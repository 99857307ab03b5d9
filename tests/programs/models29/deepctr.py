# DeepFM and xDeepFM for CTR the way shenweichen/DeepCTR-Torch writes them
# (inputs.py, layers/interaction.py, layers/core.py, models/basemodel.py,
# models/deepfm.py, models/xdeepfm.py): SparseFeat / DenseFeat columns and
# build_input_features' OrderedDict of column slices, create_embedding_matrix
# (an nn.ModuleDict of per-field nn.Embedding(..., sparse=sparse) initialized
# by nn.init.normal_(std=init_std)), input_from_feature_columns slicing
# X[:, start:end].long(), the Linear part (dim-1 embeddings, a dense weight
# Parameter, linear_logit += ...), FM's 0.5 * (square_of_sum - sum_of_square)
# summed over dim 2, CIN (torch.einsum('bhd,bmd->bhmd'), reshape, a
# kernel-size-1 nn.Conv1d per layer, torch.split of the split-half feature
# maps, torch.cat of the direct connections), DNN (nn.Linear with
# normal_(std=init_std) weights, nn.BatchNorm1d, ReLU, nn.Dropout),
# PredictionLayer (a bias Parameter added in place, torch.sigmoid),
# add_regularization_weight / get_regularization_loss (L2 over the embedding
# tables and the DNN's non-BN weights, total_reg_loss += torch.sum(l2 *
# torch.square(parameter)) into a torch.zeros((1,))), fit's
# F.binary_cross_entropy(y_pred, y.squeeze(), reduction='sum') + reg_loss over
# a TensorDataset / DataLoader, and evaluate's roc_auc / log_loss (written
# here in numpy, as sklearn's metrics compute them). The sparse variant
# builds the embeddings with sparse=True and steps them with optim.SparseAdam
# beside optim.Adam for the dense part (as the repo's issues and the
# PyTorch docs recommend); PyTorch then refuses a dense gradient (an L2 term
# over a whole sparse table) in SparseAdam and a sparse one in Adam.
# Changes for a CPU test: synthetic Criteo-like data from numpy (four
# categorical fields, two dense ones), small embeddings and layers, a few
# epochs with shuffle=False; then one training step under torch.compile
# against the same step eagerly.
import copy
from collections import OrderedDict, namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as Data


# inputs.py
class SparseFeat(namedtuple('SparseFeat', ['name', 'vocabulary_size', 'embedding_dim', 'embedding_name'])):
    __slots__ = ()

    def __new__(cls, name, vocabulary_size, embedding_dim=4, embedding_name=None):
        if embedding_name is None:
            embedding_name = name
        return super(SparseFeat, cls).__new__(cls, name, vocabulary_size, embedding_dim, embedding_name)

    def __hash__(self):
        return self.name.__hash__()


class DenseFeat(namedtuple('DenseFeat', ['name', 'dimension', 'dtype'])):
    __slots__ = ()

    def __new__(cls, name, dimension=1, dtype="float32"):
        return super(DenseFeat, cls).__new__(cls, name, dimension, dtype)

    def __hash__(self):
        return self.name.__hash__()


def build_input_features(feature_columns):
    # Return OrderedDict: {feature_name:(start, start+dimension)}
    features = OrderedDict()
    start = 0
    for feat in feature_columns:
        feat_name = feat.name
        if feat_name in features:
            continue
        if isinstance(feat, SparseFeat):
            features[feat_name] = (start, start + 1)
            start += 1
        elif isinstance(feat, DenseFeat):
            features[feat_name] = (start, start + feat.dimension)
            start += feat.dimension
        else:
            raise TypeError("Invalid feature column type,got", type(feat))
    return features


def create_embedding_matrix(feature_columns, init_std=0.0001, linear=False, sparse=False, device='cpu'):
    sparse_feature_columns = list(
        filter(lambda x: isinstance(x, SparseFeat), feature_columns)) if len(feature_columns) else []
    embedding_dict = nn.ModuleDict(
        {feat.embedding_name: nn.Embedding(feat.vocabulary_size, feat.embedding_dim if not linear else 1, sparse=sparse)
         for feat in sparse_feature_columns}
    )
    for tensor in embedding_dict.values():
        nn.init.normal_(tensor.weight, mean=0, std=init_std)
    return embedding_dict.to(device)


def combined_dnn_input(sparse_embedding_list, dense_value_list):
    if len(sparse_embedding_list) > 0 and len(dense_value_list) > 0:
        sparse_dnn_input = torch.flatten(torch.cat(sparse_embedding_list, dim=-1), start_dim=1)
        dense_dnn_input = torch.flatten(torch.cat(dense_value_list, dim=-1), start_dim=1)
        return torch.cat([sparse_dnn_input, dense_dnn_input], dim=-1)
    elif len(sparse_embedding_list) > 0:
        return torch.flatten(torch.cat(sparse_embedding_list, dim=-1), start_dim=1)
    elif len(dense_value_list) > 0:
        return torch.flatten(torch.cat(dense_value_list, dim=-1), start_dim=1)
    else:
        raise NotImplementedError


# layers/core.py
class PredictionLayer(nn.Module):
    def __init__(self, task='binary', use_bias=True, **kwargs):
        if task not in ["binary", "multiclass", "regression"]:
            raise ValueError("task must be binary,multiclass or regression")
        super(PredictionLayer, self).__init__()
        self.use_bias = use_bias
        self.task = task
        if self.use_bias:
            self.bias = nn.Parameter(torch.zeros((1,)))

    def forward(self, X):
        output = X
        if self.use_bias:
            output += self.bias
        if self.task == "binary":
            output = torch.sigmoid(output)
        return output


class DNN(nn.Module):
    def __init__(self, inputs_dim, hidden_units, activation='relu', l2_reg=0, dropout_rate=0, use_bn=False,
                 init_std=0.0001, seed=1024, device='cpu'):
        super(DNN, self).__init__()
        self.dropout_rate = dropout_rate
        self.dropout = nn.Dropout(dropout_rate)
        self.seed = seed
        self.l2_reg = l2_reg
        self.use_bn = use_bn
        if len(hidden_units) == 0:
            raise ValueError("hidden_units is empty!!")
        hidden_units = [inputs_dim] + list(hidden_units)

        self.linears = nn.ModuleList(
            [nn.Linear(hidden_units[i], hidden_units[i + 1]) for i in range(len(hidden_units) - 1)])

        if self.use_bn:
            self.bn = nn.ModuleList(
                [nn.BatchNorm1d(hidden_units[i + 1]) for i in range(len(hidden_units) - 1)])

        self.activation_layers = nn.ModuleList([nn.ReLU(inplace=True) for i in range(len(hidden_units) - 1)])

        for name, tensor in self.linears.named_parameters():
            if 'weight' in name:
                nn.init.normal_(tensor, mean=0, std=init_std)

        self.to(device)

    def forward(self, inputs):
        deep_input = inputs

        for i in range(len(self.linears)):

            fc = self.linears[i](deep_input)

            if self.use_bn:
                fc = self.bn[i](fc)

            fc = self.activation_layers[i](fc)

            fc = self.dropout(fc)
            deep_input = fc
        return deep_input


# layers/interaction.py
class FM(nn.Module):
    """Factorization Machine models pairwise (order-2) feature interactions
     without linear term and bias.
      Input shape
        - 3D tensor with shape: ``(batch_size,field_size,embedding_size)``.
      Output shape
        - 2D tensor with shape: ``(batch_size, 1)``.
    """

    def __init__(self):
        super(FM, self).__init__()

    def forward(self, inputs):
        fm_input = inputs

        square_of_sum = torch.pow(torch.sum(fm_input, dim=1, keepdim=True), 2)
        sum_of_square = torch.sum(fm_input * fm_input, dim=1, keepdim=True)
        cross_term = square_of_sum - sum_of_square
        cross_term = 0.5 * torch.sum(cross_term, dim=2, keepdim=False)

        return cross_term


class CIN(nn.Module):
    """Compressed Interaction Network used in xDeepFM."""

    def __init__(self, field_size, layer_size=(128, 128), activation='relu', split_half=True, l2_reg=1e-5, seed=1024,
                 device='cpu'):
        super(CIN, self).__init__()
        if len(layer_size) == 0:
            raise ValueError(
                "layer_size must be a list(tuple) of length greater than 1")

        self.layer_size = layer_size
        self.field_nums = [field_size]
        self.split_half = split_half
        self.activation = nn.ReLU() if activation == 'relu' else None
        self.l2_reg = l2_reg
        self.seed = seed

        self.conv1ds = nn.ModuleList()
        for i, size in enumerate(self.layer_size):
            self.conv1ds.append(
                nn.Conv1d(self.field_nums[-1] * self.field_nums[0], size, 1))

            if self.split_half:
                if i != len(self.layer_size) - 1 and size % 2 > 0:
                    raise ValueError(
                        "layer_size must be even number except for the last layer when split_half=True")

                self.field_nums.append(size // 2)
            else:
                self.field_nums.append(size)

        #         for tensor in self.conv1ds:
        #             nn.init.normal_(tensor.weight, mean=0, std=init_std)
        self.to(device)

    def forward(self, inputs):
        if len(inputs.shape) != 3:
            raise ValueError(
                "Unexpected inputs dimensions %d, expect to be 3 dimensions" % (len(inputs.shape)))
        batch_size = inputs.shape[0]
        dim = inputs.shape[-1]
        hidden_nn_layers = [inputs]
        final_result = []

        for i, size in enumerate(self.layer_size):
            # x^(k-1) * x^0
            x = torch.einsum(
                'bhd,bmd->bhmd', hidden_nn_layers[-1], hidden_nn_layers[0])
            # x.shape = (batch_size , hi * m, dim)
            x = x.reshape(
                batch_size, hidden_nn_layers[-1].shape[1] * hidden_nn_layers[0].shape[1], dim)
            # x.shape = (batch_size , hi, dim)
            x = self.conv1ds[i](x)

            if self.activation is None or self.activation == 'linear':
                curr_out = x
            else:
                curr_out = self.activation(x)

            if self.split_half:
                if i != len(self.layer_size) - 1:
                    next_hidden, direct_connect = torch.split(
                        curr_out, 2 * [size // 2], 1)
                else:
                    direct_connect = curr_out
                    next_hidden = 0
            else:
                direct_connect = curr_out
                next_hidden = curr_out

            final_result.append(direct_connect)
            hidden_nn_layers.append(next_hidden)

        result = torch.cat(final_result, dim=1)
        result = torch.sum(result, -1)

        return result


# models/basemodel.py
class Linear(nn.Module):
    def __init__(self, feature_columns, feature_index, init_std=0.0001, device='cpu'):
        super(Linear, self).__init__()
        self.feature_index = feature_index
        self.device = device
        self.sparse_feature_columns = list(
            filter(lambda x: isinstance(x, SparseFeat), feature_columns)) if len(feature_columns) else []
        self.dense_feature_columns = list(
            filter(lambda x: isinstance(x, DenseFeat), feature_columns)) if len(feature_columns) else []

        self.embedding_dict = create_embedding_matrix(feature_columns, init_std, linear=True, sparse=False,
                                                      device=device)

        for tensor in self.embedding_dict.values():
            nn.init.normal_(tensor.weight, mean=0, std=init_std)

        if len(self.dense_feature_columns) > 0:
            self.weight = nn.Parameter(torch.Tensor(sum(fc.dimension for fc in self.dense_feature_columns), 1).to(
                device))
            torch.nn.init.normal_(self.weight, mean=0, std=init_std)

    def forward(self, X, sparse_feat_refine_weight=None):

        sparse_embedding_list = [self.embedding_dict[feat.embedding_name](
            X[:, self.feature_index[feat.name][0]:self.feature_index[feat.name][1]].long()) for
            feat in self.sparse_feature_columns]

        dense_value_list = [X[:, self.feature_index[feat.name][0]:self.feature_index[feat.name][1]] for feat in
                            self.dense_feature_columns]

        linear_logit = torch.zeros([X.shape[0], 1]).to(self.device)
        if len(sparse_embedding_list) > 0:
            sparse_embedding_cat = torch.cat(sparse_embedding_list, dim=-1)
            if sparse_feat_refine_weight is not None:
                # w_{x,i}=m_{x,i} * w_i (in IFM and DIFM)
                sparse_embedding_cat = sparse_embedding_cat * sparse_feat_refine_weight.unsqueeze(1)
            sparse_feat_logit = torch.sum(sparse_embedding_cat, dim=-1, keepdim=False)
            linear_logit += sparse_feat_logit
        if len(dense_value_list) > 0:
            dense_value_logit = torch.cat(
                dense_value_list, dim=-1).matmul(self.weight)
            linear_logit += dense_value_logit

        return linear_logit


class BaseModel(nn.Module):
    def __init__(self, linear_feature_columns, dnn_feature_columns, l2_reg_linear=1e-5, l2_reg_embedding=1e-5,
                 init_std=0.0001, seed=1024, task='binary', device='cpu', sparse=False):
        super(BaseModel, self).__init__()
        torch.manual_seed(seed)
        self.dnn_feature_columns = dnn_feature_columns
        self.reg_loss = torch.zeros((1,), device=device)
        self.aux_loss = torch.zeros((1,), device=device)
        self.device = device

        self.feature_index = build_input_features(linear_feature_columns + dnn_feature_columns)

        self.embedding_dict = create_embedding_matrix(dnn_feature_columns, init_std, sparse=sparse, device=device)

        self.linear_model = Linear(linear_feature_columns, self.feature_index, device=device)

        self.regularization_weight = []

        if not sparse:      # (an L2 term over a whole table makes its gradient dense)
            self.add_regularization_weight(self.embedding_dict.parameters(), l2=l2_reg_embedding)
        self.add_regularization_weight(self.linear_model.parameters(), l2=l2_reg_linear)

        self.out = PredictionLayer(task, )
        self.to(device)

    def input_from_feature_columns(self, X, feature_columns, embedding_dict, support_dense=True):
        sparse_feature_columns = list(
            filter(lambda x: isinstance(x, SparseFeat), feature_columns)) if len(feature_columns) else []
        dense_feature_columns = list(
            filter(lambda x: isinstance(x, DenseFeat), feature_columns)) if len(feature_columns) else []

        if not support_dense and len(dense_feature_columns) > 0:
            raise ValueError(
                "DenseFeat is not supported in dnn_feature_columns")

        sparse_embedding_list = [embedding_dict[feat.embedding_name](
            X[:, self.feature_index[feat.name][0]:self.feature_index[feat.name][1]].long()) for
            feat in sparse_feature_columns]

        dense_value_list = [X[:, self.feature_index[feat.name][0]:self.feature_index[feat.name][1]] for feat in
                            dense_feature_columns]

        return sparse_embedding_list, dense_value_list

    def compute_input_dim(self, feature_columns, include_sparse=True, include_dense=True, feature_group=False):
        sparse_feature_columns = list(
            filter(lambda x: isinstance(x, SparseFeat), feature_columns)) if len(feature_columns) else []
        dense_feature_columns = list(
            filter(lambda x: isinstance(x, DenseFeat), feature_columns)) if len(feature_columns) else []

        dense_input_dim = sum(map(lambda x: x.dimension, dense_feature_columns))
        if feature_group:
            sparse_input_dim = len(sparse_feature_columns)
        else:
            sparse_input_dim = sum(feat.embedding_dim for feat in sparse_feature_columns)
        input_dim = 0
        if include_sparse:
            input_dim += sparse_input_dim
        if include_dense:
            input_dim += dense_input_dim
        return input_dim

    def add_regularization_weight(self, weight_list, l1=0.0, l2=0.0):
        # For a Parameter, put it in a list to keep Compatible with get_regularization_loss()
        if isinstance(weight_list, torch.nn.parameter.Parameter):
            weight_list = [weight_list]
        # For generators, filters and ParameterLists, convert them to a list of tensors to avoid bugs.
        # e.g., we can't pickle generator objects when we save the model.
        else:
            weight_list = list(weight_list)
        self.regularization_weight.append((weight_list, l1, l2))

    def get_regularization_loss(self, ):
        total_reg_loss = torch.zeros((1,), device=self.device)
        for weight_list, l1, l2 in self.regularization_weight:
            for w in weight_list:
                if isinstance(w, tuple):
                    parameter = w[1]  # named_parameters
                else:
                    parameter = w
                if l1 > 0:
                    total_reg_loss += torch.sum(l1 * torch.abs(parameter))
                if l2 > 0:
                    try:
                        total_reg_loss += torch.sum(l2 * torch.square(parameter))
                    except AttributeError:
                        total_reg_loss += torch.sum(l2 * parameter * parameter)

        return total_reg_loss


# models/deepfm.py
class DeepFM(BaseModel):
    def __init__(self, linear_feature_columns, dnn_feature_columns, use_fm=True,
                 dnn_hidden_units=(256, 128), l2_reg_linear=0.00001, l2_reg_embedding=0.00001, l2_reg_dnn=0,
                 init_std=0.0001, seed=1024, dnn_dropout=0, dnn_activation='relu', dnn_use_bn=False,
                 task='binary', device='cpu', sparse=False):

        super(DeepFM, self).__init__(linear_feature_columns, dnn_feature_columns, l2_reg_linear=l2_reg_linear,
                                     l2_reg_embedding=l2_reg_embedding, init_std=init_std, seed=seed, task=task,
                                     device=device, sparse=sparse)

        self.use_fm = use_fm
        self.use_dnn = len(dnn_feature_columns) > 0 and len(dnn_hidden_units) > 0
        if use_fm:
            self.fm = FM()

        if self.use_dnn:
            self.dnn = DNN(self.compute_input_dim(dnn_feature_columns), dnn_hidden_units,
                           activation=dnn_activation, l2_reg=l2_reg_dnn, dropout_rate=dnn_dropout, use_bn=dnn_use_bn,
                           init_std=init_std, device=device)
            self.dnn_linear = nn.Linear(dnn_hidden_units[-1], 1, bias=False).to(device)

            self.add_regularization_weight(
                filter(lambda x: 'weight' in x[0] and 'bn' not in x[0], self.dnn.named_parameters()), l2=l2_reg_dnn)
            self.add_regularization_weight(self.dnn_linear.weight, l2=l2_reg_dnn)
        self.to(device)

    def forward(self, X):

        sparse_embedding_list, dense_value_list = self.input_from_feature_columns(X, self.dnn_feature_columns,
                                                                                  self.embedding_dict)
        logit = self.linear_model(X)

        if self.use_fm and len(sparse_embedding_list) > 0:
            fm_input = torch.cat(sparse_embedding_list, dim=1)
            logit += self.fm(fm_input)

        if self.use_dnn:
            dnn_input = combined_dnn_input(
                sparse_embedding_list, dense_value_list)
            dnn_output = self.dnn(dnn_input)
            dnn_logit = self.dnn_linear(dnn_output)
            logit += dnn_logit

        y_pred = self.out(logit)

        return y_pred


# models/xdeepfm.py
class xDeepFM(BaseModel):
    def __init__(self, linear_feature_columns, dnn_feature_columns, dnn_hidden_units=(256, 256),
                 cin_layer_size=(256, 128,), cin_split_half=True, cin_activation='relu', l2_reg_linear=0.00001,
                 l2_reg_embedding=0.00001, l2_reg_dnn=0, l2_reg_cin=0, init_std=0.0001, seed=1024, dnn_dropout=0,
                 dnn_activation='relu', dnn_use_bn=False, task='binary', device='cpu'):

        super(xDeepFM, self).__init__(linear_feature_columns, dnn_feature_columns, l2_reg_linear=l2_reg_linear,
                                      l2_reg_embedding=l2_reg_embedding, init_std=init_std, seed=seed, task=task,
                                      device=device)
        self.dnn_hidden_units = dnn_hidden_units
        self.use_dnn = len(dnn_feature_columns) > 0 and len(dnn_hidden_units) > 0
        if self.use_dnn:
            self.dnn = DNN(self.compute_input_dim(dnn_feature_columns), dnn_hidden_units,
                           activation=dnn_activation, l2_reg=l2_reg_dnn, dropout_rate=dnn_dropout, use_bn=dnn_use_bn,
                           init_std=init_std, device=device)
            self.dnn_linear = nn.Linear(dnn_hidden_units[-1], 1, bias=False).to(device)
            self.add_regularization_weight(
                filter(lambda x: 'weight' in x[0] and 'bn' not in x[0], self.dnn.named_parameters()), l2=l2_reg_dnn)

            self.add_regularization_weight(self.dnn_linear.weight, l2=l2_reg_dnn)

        self.cin_layer_size = cin_layer_size
        self.use_cin = len(self.cin_layer_size) > 0 and len(dnn_feature_columns) > 0
        if self.use_cin:
            field_num = len(self.embedding_dict)
            if cin_split_half == True:
                self.featuremap_num = sum(
                    cin_layer_size[:-1]) // 2 + cin_layer_size[-1]
            else:
                self.featuremap_num = sum(cin_layer_size)
            self.cin = CIN(field_num, cin_layer_size,
                           cin_activation, cin_split_half, l2_reg_cin, seed, device=device)
            self.cin_linear = nn.Linear(self.featuremap_num, 1, bias=False).to(device)
            self.add_regularization_weight(filter(lambda x: 'weight' in x[0], self.cin.named_parameters()),
                                           l2=l2_reg_cin)

        self.to(device)

    def forward(self, X):

        sparse_embedding_list, dense_value_list = self.input_from_feature_columns(X, self.dnn_feature_columns,
                                                                                  self.embedding_dict)

        linear_logit = self.linear_model(X)
        if self.use_cin:
            cin_input = torch.cat(sparse_embedding_list, dim=1)
            cin_output = self.cin(cin_input)
            cin_logit = self.cin_linear(cin_output)
        if self.use_dnn:
            dnn_input = combined_dnn_input(sparse_embedding_list, dense_value_list)
            dnn_output = self.dnn(dnn_input)
            dnn_logit = self.dnn_linear(dnn_output)

        if len(self.dnn_hidden_units) == 0 and len(self.cin_layer_size) == 0:  # only linear
            final_logit = linear_logit
        elif len(self.dnn_hidden_units) == 0 and len(self.cin_layer_size) > 0:  # linear + CIN
            final_logit = linear_logit + cin_logit
        elif len(self.dnn_hidden_units) > 0 and len(self.cin_layer_size) == 0:  # linear +　Deep
            final_logit = linear_logit + dnn_logit
        elif len(self.dnn_hidden_units) > 0 and len(self.cin_layer_size) > 0:  # linear + CIN + Deep
            final_logit = linear_logit + dnn_logit + cin_logit
        else:
            raise NotImplementedError

        y_pred = self.out(final_logit)

        return y_pred


# sklearn.metrics, as evaluate() uses them
def roc_auc_score(y_true, y_score):
    order = np.argsort(y_score, kind="mergesort")
    ranks = np.empty(len(y_score))
    s = np.asarray(y_score)[order]
    i = 0
    while i < len(s):       # average ranks of ties
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[order[i:j + 1]] = 0.5 * (i + j) + 1
        i = j + 1
    pos = np.asarray(y_true) == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def log_loss(y_true, y_pred, eps=1e-7):
    p = np.clip(y_pred, eps, 1 - eps)
    return float(-np.mean(y_true * np.log(p) + (1 - y_true) * np.log(1 - p)))


def fmt(t, n=4):
    return [f"{v:.5f}" for v in t.reshape(-1)[:n].tolist()]


# data: four categorical fields, two dense ones, clicks from a planted FM
rng = np.random.default_rng(0)
vocab = {"C1": 7, "C2": 11, "C3": 5, "C4": 9}
n = 192
cats = {k: rng.integers(0, v, n) for k, v in vocab.items()}
dense = rng.normal(0, 1, (n, 2)).astype(np.float32)
w = {k: rng.normal(0, 1, v) for k, v in vocab.items()}
score = sum(w[k][cats[k]] for k in vocab) + 0.8 * dense[:, 0] - 0.5 * dense[:, 1] * (cats["C1"] % 2)
y = (score + rng.normal(0, 0.5, n) > np.median(score)).astype(np.float32)
x = np.concatenate([np.stack([cats[k] for k in vocab], 1).astype(np.float32), dense], axis=-1)
x_train, y_train, x_test, y_test = x[:128], y[:128], x[128:], y[128:]

fixlen_feature_columns = [SparseFeat(feat, vocabulary_size=v, embedding_dim=4) for feat, v in vocab.items()] + \
                         [DenseFeat(feat, 1, ) for feat in ["I1", "I2"]]
dnn_feature_columns = fixlen_feature_columns
linear_feature_columns = fixlen_feature_columns
print("feature_index", dict(build_input_features(linear_feature_columns)))


def load_numpy(model, seed):
    """The weights from numpy (init_std-like for embeddings, wider for the rest)."""
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = 0.05 if "embedding" in name else 0.2
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


# FM and CIN on their own
emb = torch.from_numpy(rng.normal(0, 1, (3, 4, 5)).astype(np.float32))
pairs = sum((emb[:, i] * emb[:, j]).sum(-1) for i in range(4) for j in range(i + 1, 4))
print("fm", fmt(FM()(emb)), tuple(FM()(emb).shape), torch.allclose(FM()(emb).squeeze(1), pairs, atol=1e-5))
cin = CIN(4, (6, 4), split_half=True)
load_numpy(cin, 3)
out = cin(emb)
print("cin", tuple(out.shape), cin.field_nums, fmt(out, 6))
cin_full = CIN(4, (6, 4), split_half=False)
print("cin no split", tuple(cin_full(emb).shape), cin_full.field_nums)
try:
    CIN(4, (5, 4))
except ValueError as e:
    print("ValueError", e)
try:
    cin(emb[0])
except ValueError as e:
    print("ValueError", e)


def fit(model, x, y, batch_size=32, epochs=3, optims=None, verbose=True):
    """BaseModel.fit's loop (shuffle=False)."""
    train_tensor_data = Data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    train_loader = Data.DataLoader(dataset=train_tensor_data, shuffle=False, batch_size=batch_size)
    loss_func = F.binary_cross_entropy
    history = []
    for epoch in range(epochs):
        model = model.train()
        loss_epoch = 0
        total_loss_epoch = 0
        for _, (x_train, y_train) in enumerate(train_loader):
            x = x_train.to(model.device).float()
            y = y_train.to(model.device).float()

            y_pred = model(x).squeeze()

            for optim in optims:
                optim.zero_grad()
            loss = loss_func(y_pred, y.squeeze(), reduction='sum')
            reg_loss = model.get_regularization_loss()

            total_loss = loss + reg_loss + model.aux_loss

            loss_epoch += loss.item()
            total_loss_epoch += total_loss.item()
            total_loss.backward()
            for optim in optims:
                optim.step()
        history.append(total_loss_epoch / len(train_loader))
        if verbose:
            print(f"epoch {epoch + 1} loss {loss_epoch / len(train_loader):.4f} total {total_loss_epoch / len(train_loader):.4f}")
    return history


def predict(model, x, batch_size=256):
    model = model.eval()
    loader = Data.DataLoader(dataset=Data.TensorDataset(torch.from_numpy(x)), shuffle=False, batch_size=batch_size)
    pred_ans = []
    with torch.no_grad():
        for _, x_test in enumerate(loader):
            x = x_test[0].to(model.device).float()
            y_pred = model(x).cpu().data.numpy()
            pred_ans.append(y_pred)
    return np.concatenate(pred_ans).astype("float64")


# DeepFM, dense embeddings, BatchNorm in the DNN, SGD (compile(optimizer="sgd")):
# Adam would step the Linear biases ahead of the BatchNorms by +-lr on the
# rounding noise of their (exactly zero) gradients
model = DeepFM(linear_feature_columns, dnn_feature_columns, dnn_hidden_units=(16, 8), l2_reg_embedding=1e-3,
               l2_reg_dnn=1e-4, dnn_use_bn=True, dnn_dropout=0.0, task='binary')
load_numpy(model, 1)
print("deepfm params", sum(p.numel() for p in model.parameters()), [n for n, _ in model.named_parameters()][:5])
print("regularization groups", [(len(wl), l1, l2) for wl, l1, l2 in model.regularization_weight])
print("reg loss", fmt(model.get_regularization_loss()), tuple(model.get_regularization_loss().shape))
sgd = torch.optim.SGD(model.parameters(), lr=0.01)
fit(model, x_train, y_train, optims=[sgd])
pred = predict(model, x_test)
print("deepfm test LogLoss", round(log_loss(y_test, pred[:, 0]), 4), "AUC", round(roc_auc_score(y_test, pred[:, 0]), 4))
print("bn running", fmt(model.dnn.bn[0].running_mean), fmt(model.dnn.bn[0].running_var), model.dnn.bn[0].num_batches_tracked.item())

# xDeepFM
xmodel = xDeepFM(linear_feature_columns, dnn_feature_columns, dnn_hidden_units=(16, 8), cin_layer_size=(8, 6),
                 l2_reg_embedding=1e-3, l2_reg_cin=1e-4, dnn_use_bn=False, task='binary')
load_numpy(xmodel, 2)
print("xdeepfm featuremap_num", xmodel.featuremap_num, "cin convs", [tuple(c.weight.shape) for c in xmodel.cin.conv1ds])
xadam = torch.optim.Adam(xmodel.parameters(), lr=0.01)
fit(xmodel, x_train, y_train, optims=[xadam])
pred = predict(xmodel, x_test)
print("xdeepfm test LogLoss", round(log_loss(y_test, pred[:, 0]), 4), "AUC", round(roc_auc_score(y_test, pred[:, 0]), 4))
print("xdeepfm grads", fmt(xmodel.cin.conv1ds[1].weight.grad), fmt(xmodel.embedding_dict["C2"].weight.grad[3]))

# DeepFM with sparse embeddings: SparseAdam for them, Adam for the rest
smodel = DeepFM(linear_feature_columns, dnn_feature_columns, dnn_hidden_units=(16, 8), l2_reg_dnn=1e-4,
                dnn_use_bn=False, task='binary', sparse=True)
load_numpy(smodel, 1)
sparse_params = [p for n, p in smodel.named_parameters() if n.startswith("embedding_dict")]
dense_params = [p for n, p in smodel.named_parameters() if not n.startswith("embedding_dict")]
print("sparse tables", len(sparse_params), [smodel.embedding_dict[k].sparse for k in vocab], smodel.embedding_dict["C1"])
sopt = torch.optim.SparseAdam(sparse_params, lr=0.01)
dopt = torch.optim.Adam(dense_params, lr=0.01)
before = smodel.embedding_dict["C2"].weight.detach().clone()
fit(smodel, x_train[:8], y_train[:8], batch_size=8, epochs=1, optims=[sopt, dopt], verbose=False)
g = smodel.embedding_dict["C2"].weight.grad
print("sparse grad", g.is_sparse, tuple(g.shape), fmt(g.to_dense()[:, 0], 5))
used = sorted(set(x_train[:8, 1].astype(int).tolist()))
moved = (smodel.embedding_dict["C2"].weight.detach() != before).any(1).nonzero().flatten().tolist()
print("rows looked up", used, "rows moved", moved)
print("sparse adam state", sorted(sopt.state[sparse_params[0]].keys()), fmt(sopt.state[sparse_params[1]]["exp_avg"][:, 1], 11))
hist = fit(smodel, x_train, y_train, epochs=3, optims=[sopt, dopt])
pred = predict(smodel, x_test)
print("sparse deepfm AUC", round(roc_auc_score(y_test, pred[:, 0]), 4))
dense_twin = DeepFM(linear_feature_columns, dnn_feature_columns, dnn_hidden_units=(16, 8), l2_reg_dnn=1e-4,
                    dnn_use_bn=True, task='binary', sparse=False)
print("same tables", dense_twin.embedding_dict["C1"].sparse, list(dense_twin.state_dict()) == list(smodel.state_dict()))

# PyTorch's refusals: Adam on a sparse gradient, SparseAdam on a dense one
smodel.zero_grad()
smodel(torch.from_numpy(x_train[:8])).sum().backward()
try:
    torch.optim.Adam(sparse_params[:1], lr=0.01).step()
except RuntimeError as e:
    print("RuntimeError", e)
smodel.zero_grad()
loss = smodel(torch.from_numpy(x_train[:8])).sum() + 1e-3 * torch.sum(torch.square(sparse_params[0]))
loss.backward()
print("mixed grad sparse", sparse_params[0].grad.is_sparse, sparse_params[1].grad.is_sparse)
try:
    sopt.step()
except RuntimeError as e:
    print("RuntimeError", e)


# one training step under torch.compile against the same step eagerly
loss_func = F.binary_cross_entropy
xb, yb = torch.from_numpy(x_train[:32]), torch.from_numpy(y_train[:32])


def train_step(x, y):
    xadam.zero_grad()
    y_pred = xmodel(x).squeeze()
    loss = loss_func(y_pred, y.squeeze(), reduction='sum')
    total_loss = loss + xmodel.get_regularization_loss() + xmodel.aux_loss
    total_loss.backward()
    xadam.step()
    return total_loss


xmodel.train()
state, opt_state = copy.deepcopy(xmodel.state_dict()), copy.deepcopy(xadam.state_dict())
eager = [train_step(xb, yb).item() for _ in range(2)]
after = {k: v.clone() for k, v in xmodel.state_dict().items()}
xmodel.load_state_dict(state)
xadam.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(xb, yb).item() for _ in range(2)]
print("compiled losses", [f"{v:.4f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(xmodel.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
