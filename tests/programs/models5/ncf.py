# guoyang9/NCF (model.py's NCF: GMF, MLP, NeuMF-end and NeuMF-pre with its
# published init (normal_ std=0.01, xavier_uniform_, kaiming_uniform_(a=1,
# nonlinearity='sigmoid')); data_utils.py's load_all and NCFData with
# negative sampling; evaluate.py's hit / ndcg / metrics with torch.topk and
# torch.take; main.py's training loop with BCEWithLogitsLoss, Adam (SGD for
# NeuMF-pre) and torch.save of the best model), on synthetic ratings written
# in the published file formats.  Changes for a CPU test: .cuda() is
# .to(device), pandas' read_csv and scipy's dok_matrix are plain Python (a
# dict keyed by (user, item)), the train DataLoader does not shuffle and has
# no workers, and the epoch-time line is marked [rng].  Weights come from
# numpy after the published init (whose draws differ between tracec and
# torch), negatives from numpy's seeded global generator and dropout is 0, so
# tracec and torch compute the same numbers.  Then the training step under
# torch.compile against the same step run eagerly.
import copy
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data as data

np.random.seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# ---- config.py ----
dataset = 'ml-1m'
model_path = './models/'
train_rating = 'ml-1m.train.rating'
test_negative = 'ml-1m.test.negative'


# ---- model.py ----

class NCF(nn.Module):
	def __init__(self, user_num, item_num, factor_num, num_layers,
					dropout, model, GMF_model=None, MLP_model=None):
		super(NCF, self).__init__()
		"""
		user_num: number of users;
		item_num: number of items;
		factor_num: number of predictive factors;
		num_layers: the number of layers in MLP model;
		dropout: dropout rate between fully connected layers;
		model: 'MLP', 'GMF', 'NeuMF-end', and 'NeuMF-pre';
		GMF_model: pre-trained GMF weights;
		MLP_model: pre-trained MLP weights.
		"""
		self.dropout = dropout
		self.model = model
		self.GMF_model = GMF_model
		self.MLP_model = MLP_model

		self.embed_user_GMF = nn.Embedding(user_num, factor_num)
		self.embed_item_GMF = nn.Embedding(item_num, factor_num)
		self.embed_user_MLP = nn.Embedding(
				user_num, factor_num * (2 ** (num_layers - 1)))
		self.embed_item_MLP = nn.Embedding(
				item_num, factor_num * (2 ** (num_layers - 1)))

		MLP_modules = []
		for i in range(num_layers):
			input_size = factor_num * (2 ** (num_layers - i))
			MLP_modules.append(nn.Dropout(p=self.dropout))
			MLP_modules.append(nn.Linear(input_size, input_size//2))
			MLP_modules.append(nn.ReLU())
		self.MLP_layers = nn.Sequential(*MLP_modules)

		if self.model in ['MLP', 'GMF']:
			predict_size = factor_num
		else:
			predict_size = factor_num * 2
		self.predict_layer = nn.Linear(predict_size, 1)

		self._init_weight_()

	def _init_weight_(self):
		""" We leave the weights initialization here. """
		if not self.model == 'NeuMF-pre':
			nn.init.normal_(self.embed_user_GMF.weight, std=0.01)
			nn.init.normal_(self.embed_user_MLP.weight, std=0.01)
			nn.init.normal_(self.embed_item_GMF.weight, std=0.01)
			nn.init.normal_(self.embed_item_MLP.weight, std=0.01)

			for m in self.MLP_layers:
				if isinstance(m, nn.Linear):
					nn.init.xavier_uniform_(m.weight)
			nn.init.kaiming_uniform_(self.predict_layer.weight,
									a=1, nonlinearity='sigmoid')

			for m in self.modules():
				if isinstance(m, nn.Linear) and m.bias is not None:
					m.bias.data.zero_()
		else:
			# embedding layers
			self.embed_user_GMF.weight.data.copy_(
							self.GMF_model.embed_user_GMF.weight)
			self.embed_item_GMF.weight.data.copy_(
							self.GMF_model.embed_item_GMF.weight)
			self.embed_user_MLP.weight.data.copy_(
							self.MLP_model.embed_user_MLP.weight)
			self.embed_item_MLP.weight.data.copy_(
							self.MLP_model.embed_item_MLP.weight)

			# mlp layers
			for (m1, m2) in zip(
				self.MLP_layers, self.MLP_model.MLP_layers):
				if isinstance(m1, nn.Linear) and isinstance(m2, nn.Linear):
					m1.weight.data.copy_(m2.weight)
					m1.bias.data.copy_(m2.bias)

			# predict layers
			predict_weight = torch.cat([
				self.GMF_model.predict_layer.weight,
				self.MLP_model.predict_layer.weight], dim=1)
			precit_bias = self.GMF_model.predict_layer.bias + \
						self.MLP_model.predict_layer.bias

			self.predict_layer.weight.data.copy_(0.5 * predict_weight)
			self.predict_layer.bias.data.copy_(0.5 * precit_bias)

	def forward(self, user, item):
		if not self.model == 'MLP':
			embed_user_GMF = self.embed_user_GMF(user)
			embed_item_GMF = self.embed_item_GMF(item)
			output_GMF = embed_user_GMF * embed_item_GMF
		if not self.model == 'GMF':
			embed_user_MLP = self.embed_user_MLP(user)
			embed_item_MLP = self.embed_item_MLP(item)
			interaction = torch.cat((embed_user_MLP, embed_item_MLP), -1)
			output_MLP = self.MLP_layers(interaction)

		if self.model == 'GMF':
			concat = output_GMF
		elif self.model == 'MLP':
			concat = output_MLP
		else:
			concat = torch.cat((output_GMF, output_MLP), -1)

		prediction = self.predict_layer(concat)
		return prediction.view(-1)


# ---- data_utils.py ----

def load_all(test_num=100):
	""" We load all the three file here to save time in each epoch. """
	train_data = [[int(v) for v in line.split('\t')[:2]] for line in open(train_rating)]

	user_num = max(x[0] for x in train_data) + 1
	item_num = max(x[1] for x in train_data) + 1

	# load ratings as a dok matrix
	train_mat = {}
	for x in train_data:
		train_mat[x[0], x[1]] = 1.0

	test_data = []
	with open(test_negative, 'r') as fd:
		line = fd.readline()
		while line != None and line != '':
			arr = line.split('\t')
			u = eval(arr[0])[0]
			test_data.append([u, eval(arr[0])[1]])
			for i in arr[1:]:
				test_data.append([u, int(i)])
			line = fd.readline()
	return train_data, test_data, user_num, item_num, train_mat


class NCFData(data.Dataset):
	def __init__(self, features,
				num_item, train_mat=None, num_ng=0, is_training=None):
		super(NCFData, self).__init__()
		""" Note that the labels are only useful when training, we thus
			add them in the ng_sample() function.
		"""
		self.features_ps = features
		self.num_item = num_item
		self.train_mat = train_mat
		self.num_ng = num_ng
		self.is_training = is_training
		self.labels = [0 for _ in range(len(features))]

	def ng_sample(self):
		assert self.is_training, 'no need to sampling when testing'

		self.features_ng = []
		for x in self.features_ps:
			u = x[0]
			for t in range(self.num_ng):
				j = np.random.randint(self.num_item)
				while (u, j) in self.train_mat:
					j = np.random.randint(self.num_item)
				self.features_ng.append([u, j])

		labels_ps = [1 for _ in range(len(self.features_ps))]
		labels_ng = [0 for _ in range(len(self.features_ng))]

		self.features_fill = self.features_ps + self.features_ng
		self.labels_fill = labels_ps + labels_ng

	def __len__(self):
		return (self.num_ng + 1) * len(self.labels)

	def __getitem__(self, idx):
		features = self.features_fill if self.is_training \
					else self.features_ps
		labels = self.labels_fill if self.is_training \
					else self.labels

		user = features[idx][0]
		item = features[idx][1]
		label = labels[idx]
		return user, item ,label


# ---- evaluate.py ----

def hit(gt_item, pred_items):
	if gt_item in pred_items:
		return 1
	return 0


def ndcg(gt_item, pred_items):
	if gt_item in pred_items:
		index = pred_items.index(gt_item)
		return np.reciprocal(np.log2(index+2))
	return 0


def metrics(model, test_loader, top_k):
	HR, NDCG = [], []

	for user, item, label in test_loader:
		user = user.to(device)
		item = item.to(device)

		predictions = model(user, item)
		_, indices = torch.topk(predictions, top_k)
		recommends = torch.take(
				item, indices).cpu().numpy().tolist()

		gt_item = item[0].item()
		HR.append(hit(gt_item, recommends))
		NDCG.append(ndcg(gt_item, recommends))

	return np.mean(HR), np.mean(NDCG)


# ---- synthetic ratings in the published formats ----
g = np.random.default_rng(0)
n_users, n_items, per_user, test_num_ng = 10, 40, 6, 19
with open(train_rating, 'w') as f, open(test_negative, 'w') as fn:
	for u in range(n_users):
		# users like items near 4 * u (mod n_items)
		liked = (4 * u + g.choice(9, per_user + 1, replace=False)) % n_items
		for i in liked[:-1]:
			f.write('%d\t%d\t5\t978300760\n' % (u, i))
		others = [i for i in range(n_items) if i not in liked]
		negs = g.choice(others, test_num_ng, replace=False)
		fn.write('(%d,%d)\t' % (u, liked[-1]) + '\t'.join(str(i) for i in negs) + '\n')


def numpy_init(model, seed):
	r = np.random.default_rng(seed)
	with torch.no_grad():
		for name, p in model.named_parameters():
			std = 0.3 if name.startswith("embed") else (0.05 if p.dim() == 1 else p.shape[1] ** -0.5)
			p.copy_(torch.from_numpy((std * r.standard_normal(tuple(p.shape))).astype(np.float32)))
	return model


# ---- main.py ----
class Args:
	lr = 0.001
	dropout = 0.0
	batch_size = 32          # 256
	epochs = 3               # 20
	top_k = 5                # 10
	factor_num = 8           # 32
	num_layers = 3
	num_ng = 4
	test_num_ng = test_num_ng
	out = True


args = Args()

############################## PREPARE DATASET ##########################
train_data, test_data, user_num, item_num, train_mat = load_all()
print("users", user_num, "items", item_num, "train", len(train_data), "test", len(test_data))

# construct the train and test datasets
train_dataset = NCFData(
		train_data, item_num, train_mat, args.num_ng, True)
test_dataset = NCFData(
		test_data, item_num, train_mat, 0, False)
train_loader = data.DataLoader(train_dataset,
		batch_size=args.batch_size, shuffle=False, num_workers=0)
test_loader = data.DataLoader(test_dataset,
		batch_size=args.test_num_ng+1, shuffle=False, num_workers=0)


def run(config_model, GMF_model=None, MLP_model=None, seed=1):
	########################### CREATE MODEL #################################
	model = NCF(user_num, item_num, args.factor_num, args.num_layers,
						args.dropout, config_model, GMF_model, MLP_model)
	if config_model != 'NeuMF-pre':
		print("init", config_model, f"{model.embed_user_GMF.weight.std().item():.2f}",
			  all(m.bias.abs().sum().item() == 0 for m in model.modules() if isinstance(m, nn.Linear)))
		numpy_init(model, seed)
	model.to(device)
	loss_function = nn.BCEWithLogitsLoss()

	if config_model == 'NeuMF-pre':
		optimizer = optim.SGD(model.parameters(), lr=args.lr)
	else:
		optimizer = optim.Adam(model.parameters(), lr=args.lr)

	########################### TRAINING #####################################
	count, best_hr = 0, 0
	for epoch in range(args.epochs):
		model.train() # Enable dropout (if have).
		start_time = time.time()
		train_loader.dataset.ng_sample()

		for user, item, label in train_loader:
			user = user.to(device)
			item = item.to(device)
			label = label.float().to(device)

			model.zero_grad()
			prediction = model(user, item)
			loss = loss_function(prediction, label)
			loss.backward()
			optimizer.step()
			count += 1

		model.eval()
		HR, NDCG = metrics(model, test_loader, args.top_k)

		elapsed_time = time.time() - start_time
		print("[rng] The time elapse of epoch {:03d}".format(epoch) + " is: " +
				time.strftime("%H: %M: %S", time.gmtime(elapsed_time)))
		print("HR: {:.3f}\tNDCG: {:.3f}".format(np.mean(HR), np.mean(NDCG)))
		print("loss {:.6f} steps {}".format(loss.item(), count))

		if HR > best_hr:
			best_hr, best_ndcg, best_epoch = HR, NDCG, epoch
			if args.out:
				if not os.path.exists(model_path):
					os.mkdir(model_path)
				torch.save(model,
					'{}{}.pth'.format(model_path, config_model))

	print("End. Best epoch {:03d}: HR = {:.3f}, NDCG = {:.3f}".format(
										best_epoch, best_hr, best_ndcg))
	return model, optimizer, loss_function


GMF_model, _, _ = run('GMF', seed=1)
MLP_model, _, _ = run('MLP', seed=2)
print(MLP_model)
model, optimizer, loss_function = run('NeuMF-end', seed=3)

# NeuMF-pre from the saved GMF and MLP models
assert os.path.exists(model_path + 'GMF.pth')
GMF_model = torch.load(model_path + 'GMF.pth', weights_only=False)
MLP_model = torch.load(model_path + 'MLP.pth', weights_only=False)
pre, _, _ = run('NeuMF-pre', GMF_model, MLP_model)
print("pre predict_layer", [f"{v:.5f}" for v in pre.predict_layer.weight[0, :4].tolist()])

# one evaluation batch: topk indices and the items they pick
user, item, label = next(iter(test_loader))
with torch.no_grad():
	predictions = model(user, item)
_, indices = torch.topk(predictions, args.top_k)
print("topk", indices.tolist(), torch.take(item, indices).tolist(), item[0].item())

# the training step under torch.compile against the same step run eagerly
train_dataset.ng_sample()
user, item, label = next(iter(train_loader))
label = label.float()
model.train()


def train_step(user, item, label):
	model.zero_grad()
	prediction = model(user, item)
	loss = loss_function(prediction, label)
	loss.backward()
	optimizer.step()
	return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(user, item, label).item() for _ in range(3)]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(user, item, label).item() for _ in range(3)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
	  all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
