"""pytorch-metric-learning as its README and examples use it: an embedding
net trained on synthetic clustered data with a TripletMarginMiner and a
TripletMarginLoss (CosineSimilarity distance, ThresholdReducer), an
MPerClassSampler feeding the DataLoader, the library's other losses
(ContrastiveLoss, NTXentLoss, MultiSimilarityLoss with its miner,
ArcFaceLoss with its own optimizer, SupCon, CircleLoss, ProxyAnchor,
SelfSupervisedLoss, CrossBatchMemory), distances, reducers, miners, and
AccuracyCalculator with a torch k-nearest-neighbour search (no faiss);
then every other loss, miner and regularizer of the library, and its
TrainWithClassifier trainer and GlobalEmbeddingSpaceTester."""
import random

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from pytorch_metric_learning import distances, losses, miners, reducers, regularizers, samplers
from pytorch_metric_learning.utils import common_functions as c_f
from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
from pytorch_metric_learning.utils.inference import CustomKNN

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)

NUM_CLASSES, DIM, EMB = 4, 12, 8
centers = torch.randn(NUM_CLASSES, DIM) * 2
labels_all = torch.arange(NUM_CLASSES).repeat_interleave(16)
data_all = centers[labels_all] + torch.randn(len(labels_all), DIM)


class EmbeddingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(DIM, 32), nn.BatchNorm1d(32), nn.ReLU(),
                                 nn.Linear(32, EMB))

    def forward(self, x):
        return self.net(x)


def f5(x):
    return f"{float(x.detach() if torch.is_tensor(x) else x):.5f}"


model = EmbeddingNet()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

### pytorch-metric-learning stuff ###
distance = distances.CosineSimilarity()
reducer = reducers.ThresholdReducer(low=0)
loss_func = losses.TripletMarginLoss(margin=0.2, distance=distance, reducer=reducer)
mining_func = miners.TripletMarginMiner(margin=0.2, distance=distance, type_of_triplets="semihard")
accuracy_calculator = AccuracyCalculator(
    include=("precision_at_1", "r_precision", "mean_average_precision_at_r",
             "mean_average_precision", "mean_reciprocal_rank"),
    k="max_bin_count", knn_func=CustomKNN(distances.CosineSimilarity()))

sampler = samplers.MPerClassSampler(labels_all, m=4, batch_size=16, length_before_new_iter=48)
loader = DataLoader(TensorDataset(data_all, labels_all), batch_size=16, sampler=sampler)


def train(model, loss_func, mining_func, loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, labels) in enumerate(loader):
        optimizer.zero_grad()
        embeddings = model(data)
        indices_tuple = mining_func(embeddings, labels)
        loss = loss_func(embeddings, labels, indices_tuple)
        loss.backward()
        optimizer.step()
        print(f"Epoch {epoch} Iteration {batch_idx}: Loss = {loss.item():.5f}, "
              f"Number of mined triplets = {mining_func.num_triplets}, "
              f"labels {labels.tolist()}")


def test(model, accuracy_calculator):
    model.eval()
    with torch.no_grad():
        emb = model(data_all)
    acc = accuracy_calculator.get_accuracy(emb, labels_all, emb, labels_all, True)
    for k in sorted(acc):
        print(f"  {k} = {acc[k]:.5f}")
    return acc


for epoch in range(1, 3):
    train(model, loss_func, mining_func, loader, optimizer, epoch)
    test(model, accuracy_calculator)
print("reducer", type(loss_func.reducer).__name__, "distance", type(loss_func.distance).__name__)

# the other losses, miners, distances and reducers on one batch
torch.manual_seed(1)
emb = torch.randn(16, EMB, requires_grad=True)
lab = torch.tensor([0, 1, 2, 3] * 4)

for name, miner in [
    ("MultiSimilarityMiner", miners.MultiSimilarityMiner(epsilon=0.1)),
    ("TripletMarginMiner all", miners.TripletMarginMiner(margin=0.3, type_of_triplets="all")),
    ("TripletMarginMiner hard", miners.TripletMarginMiner(margin=0.3, type_of_triplets="hard")),
    ("BatchHardMiner", miners.BatchHardMiner()),
    ("PairMarginMiner", miners.PairMarginMiner(pos_margin=0.2, neg_margin=0.8)),
]:
    tup = miner(emb, lab)
    print(name, [len(t) for t in tup], [t[:5].tolist() for t in tup])

for name, dist in [("LpDistance", distances.LpDistance()),
                   ("LpDistance p1 unnormalized", distances.LpDistance(p=1, normalize_embeddings=False)),
                   ("CosineSimilarity", distances.CosineSimilarity()),
                   ("DotProductSimilarity", distances.DotProductSimilarity()),
                   ("SNRDistance", distances.SNRDistance())]:
    m = dist(emb[:4], emb[4:9])
    print(name, tuple(m.shape), [f5(v) for v in m.flatten()[:6]])

loss_fns = [
    ("TripletMarginLoss", losses.TripletMarginLoss()),
    ("TripletMarginLoss MeanReducer swap", losses.TripletMarginLoss(
        margin=0.1, swap=True, smooth_loss=True, reducer=reducers.MeanReducer())),
    ("ContrastiveLoss", losses.ContrastiveLoss(pos_margin=0, neg_margin=1)),
    ("ContrastiveLoss cosine", losses.ContrastiveLoss(
        pos_margin=1, neg_margin=0, distance=distances.CosineSimilarity())),
    ("NTXentLoss", losses.NTXentLoss(temperature=0.07)),
    ("MultiSimilarityLoss", losses.MultiSimilarityLoss(alpha=2, beta=50, base=0.5)),
    ("SupConLoss", losses.SupConLoss(temperature=0.1)),
    ("CircleLoss", losses.CircleLoss(m=0.4, gamma=80)),
    ("LiftedStructureLoss", losses.LiftedStructureLoss()),
    ("MarginLoss", losses.MarginLoss(margin=0.2, nu=0, beta=1.2)),
    ("NPairsLoss", losses.NPairsLoss()),
    ("AngularLoss", losses.AngularLoss(alpha=40)),
    ("TupletMarginLoss", losses.TupletMarginLoss()),
    ("GeneralizedLiftedStructureLoss", losses.GeneralizedLiftedStructureLoss()),
    ("FastAPLoss", losses.FastAPLoss(num_bins=10)),
    ("ContrastiveLoss AvgNonZero", losses.ContrastiveLoss(reducer=reducers.AvgNonZeroReducer())),
    ("ContrastiveLoss ClassWeighted", losses.ContrastiveLoss(
        reducer=reducers.ClassWeightedReducer(torch.tensor([1.0, 2.0, 0.5, 1.5])))),
    ("TripletMarginLoss SumReducer", losses.TripletMarginLoss(reducer=reducers.SumReducer())),
    ("ContrastiveLoss DoNothing", losses.ContrastiveLoss(reducer=reducers.DoNothingReducer())),
]
ms_miner = miners.MultiSimilarityMiner(epsilon=0.1)
for name, fn in loss_fns:
    emb.grad = None
    if name == "MultiSimilarityLoss":
        loss = fn(emb, lab, ms_miner(emb, lab))
    else:
        loss = fn(emb, lab)
    if isinstance(loss, dict):
        print(name, {k: (v["reduction_type"], tuple(v["losses"].shape)) for k, v in loss.items()})
        continue
    loss.backward()
    print(name, f5(loss), "grad", f5(emb.grad.norm()), f5(emb.grad[0, 0]))

# losses with their own parameters (classification-style) and their own optimizer
torch.manual_seed(2)
for name, fn in [
    ("ArcFaceLoss", losses.ArcFaceLoss(num_classes=NUM_CLASSES, embedding_size=EMB, margin=28.6, scale=64)),
    ("CosFaceLoss", losses.CosFaceLoss(num_classes=NUM_CLASSES, embedding_size=EMB)),
    ("SubCenterArcFaceLoss", losses.SubCenterArcFaceLoss(num_classes=NUM_CLASSES, embedding_size=EMB)),
    ("ProxyAnchorLoss", losses.ProxyAnchorLoss(num_classes=NUM_CLASSES, embedding_size=EMB)),
    ("ProxyNCALoss", losses.ProxyNCALoss(num_classes=NUM_CLASSES, embedding_size=EMB)),
    ("NormalizedSoftmaxLoss", losses.NormalizedSoftmaxLoss(num_classes=NUM_CLASSES, embedding_size=EMB)),
    ("SoftTripleLoss", losses.SoftTripleLoss(num_classes=NUM_CLASSES, embedding_size=EMB, centers_per_class=3)),
    ("ArcFaceLoss regularized", losses.ArcFaceLoss(
        num_classes=NUM_CLASSES, embedding_size=EMB, weight_regularizer=regularizers.RegularFaceRegularizer())),
]:
    loss_optimizer = torch.optim.SGD(fn.parameters(), lr=0.1)
    for step in range(2):
        loss_optimizer.zero_grad()
        emb.grad = None
        loss = fn(emb, lab)
        loss.backward()
        loss_optimizer.step()
        print(name, step, f5(loss), f5(emb.grad.norm()))
    if name == "ArcFaceLoss":
        logits = fn.get_logits(emb)
        print("  logits", tuple(logits.shape), [f5(v) for v in logits[0]])

# self-supervised wrapper, cross-batch memory, regularizer on embeddings
torch.manual_seed(3)
aug = emb.detach() + 0.8 * torch.randn(16, EMB)
ss = losses.SelfSupervisedLoss(losses.TripletMarginLoss())
print("SelfSupervisedLoss", f5(ss(emb, aug)))
xbm = losses.CrossBatchMemory(losses.ContrastiveLoss(), EMB, memory_size=24,
                              miner=miners.MultiSimilarityMiner())
for i in range(3):
    e = torch.randn(8, EMB)
    l = torch.randint(0, NUM_CLASSES, (8,))
    print("CrossBatchMemory", i, f5(xbm(e, l)), "queue_idx", xbm.queue_idx, "filled", xbm.has_been_filled)
lp = losses.ContrastiveLoss(embedding_regularizer=regularizers.LpRegularizer())
print("ContrastiveLoss + LpRegularizer", f5(lp(emb, lab)))
print("loss repr", losses.TripletMarginLoss(margin=0.3))
print("labels_to_indices", {int(k): v.tolist() for k, v in c_f.get_labels_to_indices(lab.numpy()).items()})

# the remaining losses (labels, a miner's tuples, or two views)
torch.manual_seed(4)
emb = torch.randn(16, EMB, requires_grad=True)
ref = torch.randn(16, EMB)
more_losses = [
    ("HistogramLoss", losses.HistogramLoss(n_bins=10), {}),
    ("InstanceLoss", losses.InstanceLoss(gamma=16), {}),
    ("IntraPairVarianceLoss", losses.IntraPairVarianceLoss(), {}),
    ("ManifoldLoss", losses.ManifoldLoss(l=EMB, K=4), {"labels": False}),
    ("PNPLoss", losses.PNPLoss(b=2, alpha=1, variant="Ds"), {}),
    ("RankedListLoss", losses.RankedListLoss(margin=0.4, Tn=1, Tp=0.5), {}),
    ("SmoothAPLoss", losses.SmoothAPLoss(temperature=0.05), {}),
    ("DynamicSoftMarginLoss", losses.DynamicSoftMarginLoss(num_bins=5), {}),
    ("ThresholdConsistentMarginLoss", losses.ThresholdConsistentMarginLoss(), {}),
    ("SignalToNoiseRatioContrastiveLoss", losses.SignalToNoiseRatioContrastiveLoss(), {}),
    ("NCALoss", losses.NCALoss(softmax_scale=2), {}),
    ("MultipleLosses", losses.MultipleLosses(
        [losses.ContrastiveLoss(), losses.TripletMarginLoss()], weights=[1.0, 0.5]), {}),
    ("ContrastiveLoss ref_emb", losses.ContrastiveLoss(), {"ref": True}),
    ("ContrastiveLoss PerAnchorReducer", losses.ContrastiveLoss(
        reducer=reducers.PerAnchorReducer(reducers.AvgNonZeroReducer())), {}),
    ("ContrastiveLoss MultipleReducers", losses.ContrastiveLoss(
        reducer=reducers.MultipleReducers({"pos_loss": reducers.MeanReducer(),
                                           "neg_loss": reducers.SumReducer()})), {}),
]
for name, fn, how in more_losses:
    emb.grad = None
    if how.get("labels") is False:
        loss = fn(emb)
    elif how.get("ref"):
        loss = fn(emb, lab, ref_emb=ref, ref_labels=lab.flip(0))
    else:
        loss = fn(emb, lab)
    loss.backward()
    print(name, f5(loss), "grad", f5(emb.grad.norm()))

vic = losses.VICRegLoss()
emb.grad = None
loss = vic(emb, ref_emb=emb * 0.9 + 0.1 * ref)
loss.backward()
print("VICRegLoss", f5(loss), f5(emb.grad.norm()))

for name, fn in [
    ("LargeMarginSoftmaxLoss", losses.LargeMarginSoftmaxLoss(num_classes=NUM_CLASSES, embedding_size=EMB, margin=4)),
    ("SphereFaceLoss", losses.SphereFaceLoss(num_classes=NUM_CLASSES, embedding_size=EMB, margin=4)),
    ("P2SGradLoss", losses.P2SGradLoss(descriptors_dim=EMB, num_classes=NUM_CLASSES)),
]:
    emb.grad = None
    loss = fn(emb, lab)
    loss.backward()
    print(name, f5(loss), f5(emb.grad.norm()), f5(next(fn.parameters()).grad.norm()))

for name, miner in [
    ("AngularMiner", miners.AngularMiner(angle=20)),
    ("BatchEasyHardMiner", miners.BatchEasyHardMiner(pos_strategy="easy", neg_strategy="semihard")),
    ("BatchEasyHardMiner all", miners.BatchEasyHardMiner(pos_strategy="all", neg_strategy="hard")),
    ("DistanceWeightedMiner", miners.DistanceWeightedMiner(cutoff=0.5, nonzero_loss_cutoff=1.4)),
    ("HDCMiner", miners.HDCMiner(filter_percentage=0.5)),
    ("UniformHistogramMiner", miners.UniformHistogramMiner(num_bins=10, pos_per_bin=3, neg_per_bin=3)),
    ("EmbeddingsAlreadyPackagedAsTriplets", miners.EmbeddingsAlreadyPackagedAsTriplets()),
]:
    tup = miner(emb.detach()[:15] if "Packaged" in name else emb.detach(), lab[:15] if "Packaged" in name else lab)
    print(name, [len(t) for t in tup], [t[:4].tolist() for t in tup])

for name, reg in [("CenterInvariantRegularizer", regularizers.CenterInvariantRegularizer()),
                  ("SparseCentersRegularizer", regularizers.SparseCentersRegularizer(
                      num_classes=NUM_CLASSES, centers_per_class=3)),
                  ("ZeroMeanRegularizer", regularizers.ZeroMeanRegularizer())]:
    fn = losses.SoftTripleLoss(num_classes=NUM_CLASSES, embedding_size=EMB, centers_per_class=3,
                               weight_regularizer=reg)
    print(name, f5(fn(emb, lab)))

# the library's trainer and tester on the same data (no workers, no faiss)
from pytorch_metric_learning import testers, trainers  # noqa: E402

torch.manual_seed(5)
np.random.seed(5)
trunk = nn.Sequential(nn.Linear(DIM, 16), nn.ReLU())
embedder = nn.Linear(16, EMB)
classifier = nn.Linear(EMB, NUM_CLASSES)
dataset = TensorDataset(data_all, labels_all)
iteration_losses = []
trainer = trainers.TrainWithClassifier(
    models={"trunk": trunk, "embedder": embedder, "classifier": classifier},
    optimizers={k + "_optimizer": torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
                for k, m in [("trunk", trunk), ("embedder", embedder), ("classifier", classifier)]},
    batch_size=16,
    loss_funcs={"metric_loss": losses.MultiSimilarityLoss(),
                "classifier_loss": nn.CrossEntropyLoss()},
    mining_funcs={"tuple_miner": miners.MultiSimilarityMiner(epsilon=0.1)},
    dataset=dataset,
    sampler=samplers.MPerClassSampler(labels_all, m=4, length_before_new_iter=48),
    loss_weights={"metric_loss": 1, "classifier_loss": 0.5},
    dataloader_num_workers=0,
    end_of_iteration_hook=lambda t: iteration_losses.append(
        {k: float(v.detach() if torch.is_tensor(v) else v) for k, v in t.losses.items()}),
)
trainer.train(num_epochs=2)
for i, l in enumerate(iteration_losses):
    print("trainer iteration", i, {k: f5(v) for k, v in sorted(l.items())})
tester = testers.GlobalEmbeddingSpaceTester(
    dataloader_num_workers=0, batch_size=32,
    accuracy_calculator=AccuracyCalculator(include=("precision_at_1", "r_precision"),
                                           knn_func=CustomKNN(distances.LpDistance())))
acc = tester.test({"val": dataset}, 1, trunk, embedder)
print("tester", {s: {k: f5(v) for k, v in sorted(a.items()) if not k.startswith("epoch")}
                 for s, a in acc.items()})
