"""The rest of Determined's PyTorchTrial surface: ``context.experimental`` (AMP on the CPU,
no automatic moves to the device, a trial's own DataLoader), the context's other methods,
records counted by ``get_batch_length()``, and ``load_trial_from_checkpoint_path``'s
deprecated ``**kwargs``."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.support import require_modules

require_modules("torch")

import torch  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402

from hpcdet.pytorch import (  # noqa: E402
    Batch,
    DataLoader,
    Epoch,
    PyTorchCallback,
    PyTorchTrial,
    PyTorchTrialContext,
    Trainer,
    init,
    load_trial_from_checkpoint_path,
)
from hpcdet.pytorch._loop import Loop  # noqa: E402
from hpcdet.pytorch._units import Periods, Searcher  # noqa: E402


@pytest.fixture(autouse=True)
def _off_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("HPCDET_CLUSTER_INFO", raising=False)


class _Recorder(torch.nn.Module):
    """y = w x, recording whether autocast was on in its forward pass and the dtype there."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(1, 1, bias=False)
        self.seen: list[tuple[bool, torch.dtype]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.linear(x)
        self.seen.append((torch.is_autocast_enabled("cpu"), out.dtype))
        return out


class Regression(PyTorchTrial):
    """y = 2x on 16 records, 4 per batch; ``amp`` turns on ``use_amp()``."""

    def __init__(self, context: PyTorchTrialContext, amp: bool = False,
                 own_loader: bool = False) -> None:
        self.context = context
        if amp:
            context.experimental.use_amp()
        if own_loader:
            context.experimental.disable_dataset_reproducibility_checks()
        self.own_loader = own_loader
        self.model = context.wrap_model(_Recorder())
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.5))
        self.losses: list[float] = []
        self.outside: list[tuple[bool, torch.dtype]] = []

    def _data(self) -> TensorDataset:
        x = torch.linspace(-1, 1, 16).unsqueeze(1)
        return TensorDataset(x, 2 * x)

    def build_training_data_loader(self) -> Any:
        if self.own_loader:
            return torch.utils.data.DataLoader(self._data(), batch_size=4)
        return DataLoader(self._data(), batch_size=4, shuffle=True)

    def build_validation_data_loader(self) -> Any:
        if self.own_loader:
            return torch.utils.data.DataLoader(self._data(), batch_size=8)
        return DataLoader(self._data(), batch_size=8)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        pred = self.model(x)
        self.outside.append((torch.is_autocast_enabled("cpu"), pred.dtype))
        loss = torch.nn.functional.mse_loss(pred, y)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt, clip_grads=lambda ps: None)
        self.losses.append(loss.item())
        return {"loss": loss}

    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        return {"validation_loss": torch.nn.functional.mse_loss(self.model(x), y)}


def _train(max_length: Any, **trial_kwargs: Any) -> Regression:
    with init(hparams={"global_batch_size": 4}) as context:
        trial = Regression(context, **trial_kwargs)
        Trainer(trial, context).fit(max_length=max_length)
    return trial


def test_use_amp_runs_the_forward_pass_under_cpu_autocast_and_still_trains() -> None:
    trial = _train(Epoch(10), amp=True)
    training = trial.model.seen[:len(trial.outside)]
    # Inside the model: autocast on, bfloat16 (the CPU's AMP dtype); back in train_batch:
    # autocast off and the output float32 again, as Determined's use_amp() hands it back.
    assert set(training) == {(True, torch.bfloat16)}
    assert set(trial.outside) == {(False, torch.float32)}
    first, last = sum(trial.losses[:4]), sum(trial.losses[-4:])  # the first and last epoch
    assert last < first / 20, trial.losses
    assert abs(trial.model.linear.weight.item() - 2) < 0.1
    assert trial.context.scalers == []  # no GradScaler for bfloat16 on the CPU


def test_without_amp_nothing_is_autocast() -> None:
    trial = _train(Batch(3))
    assert set(trial.model.seen) == {(False, torch.float32)}


def test_use_amp_after_wrap_model_is_refused() -> None:
    with init(hparams={"global_batch_size": 4}) as context:
        context.wrap_model(torch.nn.Linear(1, 1))
        with pytest.raises(RuntimeError, match=r"use_amp\(\) before context.wrap_model"):
            context.experimental.use_amp()


def test_a_wrapped_scaler_is_not_applied_twice() -> None:
    """As in Determined: a scaler from wrap_scaler() is the trial's to apply; backward()
    does not scale the loss again."""

    class Doubling:
        def scale(self, loss: torch.Tensor) -> torch.Tensor:
            raise AssertionError("backward() scaled the loss with the trial's own scaler")

    with init(hparams={"global_batch_size": 4}) as context:
        context.wrap_scaler(Doubling())
        weight = torch.nn.Parameter(torch.ones(1))
        context.backward((weight * 3).sum())
        assert weight.grad is not None and weight.grad.item() == 3


def test_disable_auto_to_device_leaves_batches_as_loaded(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    moved: list[Any] = []
    monkeypatch.setattr("hpcdet.pytorch._loop.to_device",
                        lambda data, *args: moved.append(data) or data)
    with init(hparams={"global_batch_size": 4}) as context:
        trial = Regression(context)
        context.experimental.disable_auto_to_device()
        Trainer(trial, context).fit(max_length=Batch(2))
    assert moved == []
    assert context.experimental._auto_to_device is False


def test_a_trials_own_loader_needs_the_checks_disabled() -> None:
    with init(hparams={"global_batch_size": 4}) as context:
        trial = Regression(context)
        trial.own_loader = True
        with pytest.raises(TypeError, match="disable_dataset_reproducibility_checks"):
            Trainer(trial, context).fit(max_length=Batch(2))


def test_with_the_checks_disabled_the_trials_own_loader_repeats_epoch_after_epoch() -> None:
    trial = _train(Batch(10), own_loader=True)
    # 4 batches an epoch (the loader's len), 10 batches: 2.5 passes, every batch trained.
    assert len(trial.losses) == 10
    assert trial.context.current_train_epoch() == 2


class _Validations(PyTorchCallback):
    def __init__(self) -> None:
        self.metrics: list[dict[str, Any]] = []

    def on_validation_end(self, metrics: dict[str, Any]) -> None:
        self.metrics.append(metrics)


class Counted(Regression):
    """10 records, 4 per batch: batches of 4, 4 and 2 records, counted by a
    get_batch_length() of the trial's own."""

    def __init__(self, context: PyTorchTrialContext) -> None:
        super().__init__(context)
        self.lengths: list[int] = []
        self.validations = _Validations()

    def _data(self) -> TensorDataset:
        x = torch.linspace(-1, 1, 10).unsqueeze(1)
        return TensorDataset(x, 2 * x)

    def get_batch_length(self, batch: Any) -> int:
        n = int(batch[0].shape[0])
        self.lengths.append(n)
        return n

    def build_callbacks(self) -> dict[str, PyTorchCallback]:
        return {"validations": self.validations}


def test_records_are_counted_with_get_batch_length(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "hpcdet.pytorch")
    with init(hparams={"global_batch_size": 4}) as context:
        trial = Counted(context)
        loop = Loop(trial, context, Periods(checkpoint_policy="none"),
                    Searcher(time_metric="records"))
        loop.run(iter([(6, None)]), None)
    # Two epochs of 3 batches (4 + 4 + 2 records), then one validation of 10 in 2 batches.
    assert trial.lengths == [4, 4, 2, 4, 4, 2, 8, 2]
    assert loop.records_trained == 20
    assert trial.validations.metrics[-1]["records"] == 20  # not 6 batches x 4
    assert "validated: 10 records in" in caplog.text and "in 2 batches" in caplog.text


def test_the_record_count_survives_a_resume(tmp_path: Path) -> None:
    def loop(context: PyTorchTrialContext) -> Loop:
        return Loop(Counted(context), context, Periods(checkpoint_policy="none"),
                    Searcher(time_metric="records"))

    with init(hparams={"global_batch_size": 4}) as context:
        loop(context).run(iter([(4, None)]), None)  # 4 + 4 + 2 + 4 records
    (uuid,) = [p.name for p in (tmp_path / "hpcdet" / "checkpoints").iterdir()]
    with init(hparams={"global_batch_size": 4}) as context:
        second = loop(context)
        second.run(iter([(6, None)]), uuid)
        assert context.get_initial_batch() == 4
    assert second.records_trained == 20
    assert second.trial.validations.metrics[-1]["records"] == 20  # type: ignore[attr-defined]


def test_the_contexts_other_methods(caplog: pytest.LogCaptureFixture) -> None:
    with init(hparams={"global_batch_size": 4}) as context:
        assert context.get_initial_batch() == 0
        context.set_enable_tensorboard_logging(False)
        assert context.get_enable_tensorboard_logging() is False
        with pytest.raises(AssertionError):
            context.set_enable_tensorboard_logging("no")  # type: ignore[arg-type]
        caplog.set_level(logging.WARNING, "hpcdet.pytorch")
        context.set_profiler(activities=[], schedule=None)
        context.set_profiler()
        assert caplog.text.count("hpcdet has no profiler") == 1
        with pytest.raises(NotImplementedError, match=r"Apex.*experimental\.use_amp\(\)"):
            context.configure_apex_amp(models=None, optimizers=None, opt_level="O1")


def test_load_takes_torch_load_kwargs_or_the_deprecated_kwargs(tmp_path: Path) -> None:
    trial = _train(Batch(2))
    ckpt = next(p for p in (tmp_path / "hpcdet" / "checkpoints").iterdir()
                if (p / "load_data.json").exists())
    with pytest.warns(FutureWarning, match="torch_load_kwargs"):
        old = load_trial_from_checkpoint_path(str(ckpt), trial_class=Regression,
                                              map_location="cpu")
    assert isinstance(old, Regression)
    assert torch.equal(old.model.linear.weight, trial.model.linear.weight)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = load_trial_from_checkpoint_path(ckpt, trial_class=Regression,
                                              trial_kwargs={"amp": False},
                                              torch_load_kwargs={"map_location": "cpu"})
    assert torch.equal(new.model.linear.weight, trial.model.linear.weight)
    with pytest.raises(ValueError, match="not both"):
        load_trial_from_checkpoint_path(ckpt, trial_class=Regression,
                                        torch_load_kwargs={"map_location": "cpu"},
                                        weights_only=False)


def test_on_a_gpu_use_amp_brings_a_float16_grad_scaler() -> None:
    import types

    from hpcdet.pytorch._experimental import amp_dtype

    core = types.SimpleNamespace(distributed=types.SimpleNamespace(rank=0, size=1))
    context = PyTorchTrialContext(core, hparams={}, exp_conf={},  # type: ignore[arg-type]
                                  trial_seed=0, trial_id=None, experiment_id=None,
                                  device=torch.device("cuda", 0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a CPU build of torch disables a CUDA scaler
        context.experimental.use_amp()
    assert amp_dtype(context.device) == torch.float16
    assert len(context.scalers) == 1 and isinstance(context.scalers[0], torch.amp.GradScaler)
    assert context.experimental._scaler is context.scalers[0]
    with pytest.raises(RuntimeError, match="its own GradScaler"):
        fresh = PyTorchTrialContext(core, hparams={}, exp_conf={},  # type: ignore[arg-type]
                                    trial_seed=0, trial_id=None, experiment_id=None,
                                    device=torch.device("cpu"))
        fresh.wrap_scaler(object())
        fresh.experimental.use_amp()
