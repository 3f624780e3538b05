"""Training throughput of a PyTorchTrial against the same model in a plain torch loop.

Usage: ``python bench/pytorch_throughput.py [EPOCHS] [REPEATS]`` (default 20 and 5).

Both train the digits MLP of ``examples/pytorch_digits`` on one CPU slot, in this process and
off the cluster, for EPOCHS epochs of 45 batches of 32, then validate once and save once: the
PyTorchTrial through ``det.pytorch.Trainer`` (its loop: sharded, resumable data, metric
averaging, LR stepping, a stop check per batch), the baseline a hand-written loop over torch's
DataLoader with the same work per batch. Runs alternate; medians and their ratio are printed.
"""

from __future__ import annotations

import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "examples" / "pytorch_digits"), str(REPO / "hpcdet" / "shim")]

import model_def  # noqa: E402

from hpcdet import pytorch  # noqa: E402

HPARAMS = {"global_batch_size": 32, "lr": 0.01, "hidden": 64, "dropout": 0.1}


def with_trainer(epochs: int, storage: str) -> float:
    started = time.perf_counter()
    with pytorch.init(hparams=HPARAMS, exp_conf={"checkpoint_storage": storage}) as context:
        trial = model_def.DigitsTrial(context)
        pytorch.Trainer(trial, context).fit(max_length=pytorch.Epoch(epochs),
                                            checkpoint_policy="none")
    return time.perf_counter() - started


def plain(epochs: int, storage: str) -> float:
    started = time.perf_counter()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    loss_fn = torch.nn.CrossEntropyLoss()
    train = torch.utils.data.DataLoader(model_def.digits(True), batch_size=32, shuffle=True)
    val = torch.utils.data.DataLoader(model_def.digits(False), batch_size=32)
    sums: dict[str, float] = {}
    for _ in range(epochs):
        for x, y in train:
            out = model(x)
            loss = loss_fn(out, y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            for k, v in (("loss", loss), ("accuracy", (out.argmax(1) == y).float().mean())):
                sums[k] = sums.get(k, 0.0) + v.item()
        sched.step()
    model.eval()
    with torch.no_grad():
        accs = [(model(x).argmax(1) == y).float().mean().item() for x, y in val]
    torch.save({"models_state_dict": [model.state_dict()]}, Path(storage) / "state.pth")
    assert statistics.mean(accs) > 0.5
    return time.perf_counter() - started


def main() -> None:
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)
    times: dict[str, list[float]] = {"PyTorchTrial (Trainer)": [], "plain torch loop": []}
    with tempfile.TemporaryDirectory() as storage:
        with_trainer(1, storage), plain(1, storage)  # warm up imports and data
        for _ in range(repeats):
            times["PyTorchTrial (Trainer)"].append(with_trainer(epochs, storage))
            times["plain torch loop"].append(plain(epochs, storage))
    batches = epochs * 45
    medians = {k: statistics.median(v) for k, v in times.items()}
    print(f"{batches} batches of 32 on 1 CPU thread, median of {repeats}")
    for name, m in medians.items():
        print(f"  {name:24s} {m:7.3f} s  {batches / m:8.0f} batches/s")
    ratio = medians["plain torch loop"] / medians["PyTorchTrial (Trainer)"]
    print(f"  throughput ratio (PyTorchTrial / plain): {ratio:.1%} (target >= 97%)")


if __name__ == "__main__":
    main()
