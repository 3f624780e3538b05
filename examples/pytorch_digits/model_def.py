"""Handwritten digits (scikit-learn's 1,797 8x8 images) with a small MLP, as a PyTorchTrial.

Runs unchanged on Determined and on hpcdet: ``entrypoint: model_def:DigitsTrial`` in the
configs here, or through the Trainer in ``trainer.py``. The data ships inside scikit-learn,
so nothing is downloaded.
"""

from typing import Any

import torch
import torch.nn as nn
from determined import pytorch
from sklearn.datasets import load_digits
from torch.utils.data import TensorDataset

VALIDATION_RECORDS = 360


def digits(train: bool) -> TensorDataset:
    data = load_digits()
    x = torch.tensor(data.data, dtype=torch.float32) / 16.0
    y = torch.tensor(data.target, dtype=torch.long)
    # A fixed split: the same on every worker and every run.
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    picked = order[VALIDATION_RECORDS:] if train else order[:VALIDATION_RECORDS]
    return TensorDataset(x[picked], y[picked])


class DigitsTrial(pytorch.PyTorchTrial):
    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        hidden = context.get_hparam("hidden")
        self.model = context.wrap_model(nn.Sequential(
            nn.Linear(64, hidden),
            nn.ReLU(),
            nn.Dropout(context.get_hparam("dropout")),
            nn.Linear(hidden, 10),
        ))
        self.optimizer = context.wrap_optimizer(
            torch.optim.Adam(self.model.parameters(), lr=context.get_hparam("lr"))
        )
        self.scheduler = context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=3, gamma=0.5),
            step_mode=pytorch.LRScheduler.StepMode.STEP_EVERY_EPOCH,
        )
        self.loss = nn.CrossEntropyLoss()

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(
            digits(train=True), batch_size=self.context.get_per_slot_batch_size(), shuffle=True
        )

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(
            digits(train=False), batch_size=self.context.get_per_slot_batch_size()
        )

    def train_batch(self, batch: pytorch.TorchData, epoch_idx: int, batch_idx: int
                    ) -> dict[str, Any]:
        x, y = batch
        output = self.model(x)
        loss = self.loss(output, y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        accuracy = (output.argmax(dim=1) == y).float().mean()
        return {"loss": loss, "accuracy": accuracy}

    def evaluate_batch(self, batch: pytorch.TorchData, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        output = self.model(x)
        return {
            "validation_loss": self.loss(output, y),
            "validation_accuracy": (output.argmax(dim=1) == y).float().mean(),
        }
