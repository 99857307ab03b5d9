# Lightning-AI/torchmetrics as its README and classification / regression
# docs use it (the library itself from PyPI): module metrics updated per
# batch and computed over the epoch (accuracy, macro F1, precision, the
# confusion matrix, a MetricCollection), binary AUROC, the regression
# metrics, the functional interface and reset().  Changed for a CPU test:
# random predictions instead of a model's.
import torch
import torchmetrics
from torchmetrics import MetricCollection
from torchmetrics.classification import (BinaryAUROC, MulticlassAccuracy,
                                         MulticlassConfusionMatrix, MulticlassF1Score,
                                         MulticlassPrecision)
from torchmetrics.regression import MeanAbsoluteError, MeanSquaredError, PearsonCorrCoef, R2Score

torch.manual_seed(0)
acc = MulticlassAccuracy(num_classes=4)
f1 = MulticlassF1Score(num_classes=4, average='macro')
cm = MulticlassConfusionMatrix(num_classes=4)
coll = MetricCollection({'acc': MulticlassAccuracy(num_classes=4, average='micro'),
                         'prec': MulticlassPrecision(num_classes=4)})
for _ in range(3):
    preds = torch.randn(16, 4).softmax(-1)
    target = torch.randint(0, 4, (16,))
    print(f"batch acc {acc(preds, target)} f1 {f1(preds, target)}")
    cm.update(preds, target)
    coll.update(preds, target)
print(acc.compute(), f1.compute(), cm.compute(), coll.compute())
auroc = BinaryAUROC()
scores, labels = torch.rand(50), torch.randint(0, 2, (50,))
print(auroc(scores, labels))
mse, r2, pearson, mae = MeanSquaredError(), R2Score(), PearsonCorrCoef(), MeanAbsoluteError()
x = torch.randn(30)
y = 2 * x + 0.3 * torch.randn(30)
print(mse(x, y), r2(x, y), pearson(x, y), mae(x, y))
print(torchmetrics.functional.accuracy(preds, target, task='multiclass', num_classes=4),
      torchmetrics.functional.auroc(scores, labels, task='binary'))
acc.reset()
print(acc.update(preds, target), acc.compute())
