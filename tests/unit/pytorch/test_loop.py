"""The PyTorchTrial loop off the cluster: LR step modes, callbacks, the checkpoint's keys,
and the messages for a trial class that cannot run."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import require_modules

require_modules("torch")

import torch  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402

from hpcdet.errors import TrialClassError  # noqa: E402
from hpcdet.pytorch import (  # noqa: E402
    Batch,
    DataLoader,
    Epoch,
    LRScheduler,
    PyTorchCallback,
    PyTorchTrial,
    PyTorchTrialContext,
    Trainer,
    init,
    to_device,
)
from hpcdet.pytorch._trial import evaluation_mode, load_trial_class  # noqa: E402

MODES = LRScheduler.StepMode
# Tiny's extra schedulers count steps on optimizers that never step, which torch warns of.
pytestmark = pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)`")


class _Events(PyTorchCallback):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def on_training_epoch_start(self, epoch_idx: int) -> None:
        self.seen.append(("epoch_start", epoch_idx))

    def on_validation_end(self, metrics: dict[str, Any]) -> None:
        self.seen.append(("validated", metrics["batches"]))

    def on_checkpoint_upload_end(self, uuid: str) -> None:
        self.seen.append("checkpoint")

    def state_dict(self) -> dict[str, Any]:
        return {"events": len(self.seen)}


class Tiny(PyTorchTrial):
    """10 records, 2 per slot: 5 batches an epoch; each LR step mode counts its steps."""

    def __init__(self, context: PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(torch.nn.Linear(1, 1))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=1.0))
        self.steps = {}
        for mode in (MODES.STEP_EVERY_EPOCH, MODES.STEP_EVERY_BATCH,
                     MODES.STEP_EVERY_OPTIMIZER_STEP, MODES.MANUAL_STEP):
            opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda n: n)
            self.steps[mode] = context.wrap_lr_scheduler(sched, step_mode=mode, frequency=2)
        self.events = _Events()

    def build_training_data_loader(self) -> DataLoader:
        x = torch.arange(10, dtype=torch.float32).unsqueeze(1)
        return DataLoader(TensorDataset(x, 2 * x), batch_size=2, shuffle=True)

    def build_validation_data_loader(self) -> DataLoader:
        x = torch.arange(4, dtype=torch.float32).unsqueeze(1)
        return DataLoader(TensorDataset(x, 2 * x), batch_size=2)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.model(x), y) * 1e-3
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        return {"loss": loss}

    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        return {"validation_loss": torch.nn.functional.mse_loss(self.model(x), y)}

    def build_callbacks(self) -> dict[str, PyTorchCallback]:
        return {"events": self.events}


def _fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **fit: Any) -> Tiny:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("HPCDET_CLUSTER_INFO", raising=False)
    with init(hparams={"global_batch_size": 2}) as context:
        trial = Tiny(context)
        Trainer(trial, context).fit(**fit)
    return trial


def test_step_modes_callbacks_and_the_checkpoint(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    trial = _fit(tmp_path, monkeypatch, max_length=Epoch(2), validation_period=Batch(4))
    counts = {mode: s.last_epoch for mode, s in trial.steps.items()}
    # 10 batches over 2 epochs, frequency 2: every 2 batches, every 2 optimizer steps, once
    # after the second epoch, and never by hand.
    assert counts == {MODES.STEP_EVERY_BATCH: 5, MODES.STEP_EVERY_OPTIMIZER_STEP: 5,
                      MODES.STEP_EVERY_EPOCH: 1, MODES.MANUAL_STEP: 0}
    seen = trial.events.seen
    assert [e for e in seen if isinstance(e, tuple) and e[0] == "epoch_start"] == [
        ("epoch_start", 0), ("epoch_start", 1)]
    # Validations at 4 and 8, and at the end; local mode checkpoints after each ("all").
    assert [e for e in seen if isinstance(e, tuple) and e[0] == "validated"] == [
        ("validated", 4), ("validated", 8), ("validated", 10)]
    assert seen.count("checkpoint") == 3
    ckpts = sorted((tmp_path / "hpcdet" / "checkpoints").iterdir(),
                   key=lambda p: p.stat().st_mtime)
    state = torch.load(ckpts[-1] / "state-dict.pth", weights_only=False)
    assert {"models_state_dict", "optimizers_state_dict", "lr_schedulers_state_dict",
            "callbacks", "rng_state"} <= set(state)
    assert len(state["lr_schedulers_state_dict"]) == 4
    assert state["callbacks"] == {"events": {"events": len(seen) - 1}}
    assert {"cpu_rng_state", "random_rng_state"} <= set(state["rng_state"])
    assert {p.name for p in ckpts[-1].iterdir()} >= {"state-dict.pth", "trial_state.json",
                                                      "load_data.json", "metadata.json"}


def test_a_length_is_required_off_the_cluster(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="max_length must be defined in local training mode"):
        _fit(tmp_path, monkeypatch)


def test_a_batch_size_the_slots_do_not_share_evenly_is_named() -> None:
    from hpcdet.core import DistributedContext
    from hpcdet.core._context import _dummy_init

    class _Four(DistributedContext):
        def __init__(self) -> None:
            super().__init__(rank=0, size=4, local_rank=0, local_size=4, cross_rank=0,
                             cross_size=1, transport=object())  # type: ignore[arg-type]

    core = _dummy_init(distributed=_Four(), checkpoint_storage="/tmp")

    def ctx(gbs: int) -> PyTorchTrialContext:
        return PyTorchTrialContext(core, hparams={"global_batch_size": gbs}, exp_conf={},
                                   trial_seed=0, trial_id=1, experiment_id=1,
                                   device=torch.device("cpu"))

    assert ctx(32).get_per_slot_batch_size() == 8
    assert ctx(30).get_per_slot_batch_size() == 7  # rounded down, with a warning
    with pytest.raises(ValueError, match="global_batch_size \\(2\\) is smaller than the "
                                         "trial's 4 slots"):
        ctx(2).get_per_slot_batch_size()
    with pytest.raises(ValueError, match="global_batch_size must be a positive integer"):
        PyTorchTrialContext(core, hparams={}, exp_conf={}, trial_seed=0, trial_id=1,
                            experiment_id=1, device=torch.device("cpu")
                            ).get_per_slot_batch_size()


def test_a_trial_class_that_cannot_run_is_named(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    class NoValidation(Tiny):
        evaluate_batch = PyTorchTrial.evaluate_batch

    class Both(Tiny):
        def evaluate_full_dataset(self, data_loader: Any) -> dict[str, Any]:
            return {}

    with pytest.raises(TrialClassError, match="must define exactly one of evaluate_batch\\(\\) "
                                          "and evaluate_full_dataset\\(\\), not neither"):
        evaluation_mode(NoValidation)
    with pytest.raises(TrialClassError, match="not both"):
        evaluation_mode(Both)

    class Incomplete(PyTorchTrial):
        def __init__(self, context: PyTorchTrialContext) -> None:
            pass

    with pytest.raises(TrialClassError, match="Incomplete does not define "
                                          "build_training_data_loader, "
                                          "build_validation_data_loader, train_batch"):
        evaluation_mode(Incomplete)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "mine.py").write_text("class NotATrial:\n    pass\n")
    with pytest.raises(TrialClassError, match="NotATrial is not a subclass of "
                                          "det.pytorch.PyTorchTrial"):
        load_trial_class("mine:NotATrial")
    with pytest.raises(TrialClassError, match="module mine has no class Missing"):
        load_trial_class("mine:Missing")
    with pytest.raises(TrialClassError, match="cannot import absent"):
        load_trial_class("absent:Trial")


def test_a_trial_comes_back_from_its_checkpoint(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcdet.pytorch import load_trial_from_checkpoint_path

    trial = _fit(tmp_path, monkeypatch, max_length=Batch(3))
    ckpt = next((tmp_path / "hpcdet" / "checkpoints").iterdir())
    assert (ckpt / "code" / Path(__file__).name).exists()  # the trial's own directory
    loaded = load_trial_from_checkpoint_path(ckpt, trial_class=Tiny)
    assert isinstance(loaded, Tiny) and loaded.context.get_hparams() == {"global_batch_size": 2}
    for mine, theirs in zip(loaded.model.state_dict().values(),
                            trial.model.state_dict().values()):
        assert torch.equal(mine, theirs)
    with pytest.raises(TrialClassError, match="is not a checkpoint of a PyTorchTrial"):
        load_trial_from_checkpoint_path(tmp_path)


def test_aggregation_steps_the_optimizer_every_nth_batch(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("HPCDET_CLUSTER_INFO", raising=False)
    with init(hparams={"global_batch_size": 2}, aggregation_frequency=2) as context:
        trial = Tiny(context)
        Trainer(trial, context).fit(max_length=Epoch(2))
    # 10 batches, the optimizer stepped on every second: 5 steps, the scheduler every 2 of them.
    assert context._optimizer_steps == 5
    assert trial.steps[MODES.STEP_EVERY_OPTIMIZER_STEP].last_epoch == 2
    assert trial.steps[MODES.STEP_EVERY_BATCH].last_epoch == 5


class _Timeline(PyTorchCallback):
    """Each epoch end, report, validation and checkpoint, with the batch it came after."""

    def __init__(self) -> None:
        self.trained = 0
        self.seen: list[tuple[str, int]] = []

    def on_training_epoch_end(self, epoch_idx: int) -> None:
        self.seen.append(("epoch_end", epoch_idx))

    def on_training_workload_end(self, avg_metrics: dict[str, Any],
                                 batch_metrics: list[dict[str, Any]]) -> None:
        self.trained += len(batch_metrics)
        self.seen.append(("report", self.trained))

    def on_validation_end(self, metrics: dict[str, Any]) -> None:
        self.seen.append(("validated", metrics["batches"]))

    def on_checkpoint_upload_end(self, uuid: str) -> None:
        self.seen.append(("checkpoint", self.trained))


class Timed(Tiny):
    def build_callbacks(self) -> dict[str, PyTorchCallback]:
        self.timeline = _Timeline()
        return {"timeline": self.timeline}


def test_periods_fall_due_at_their_batches(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("HPCDET_CLUSTER_INFO", raising=False)
    with init(hparams={"global_batch_size": 2}) as context:
        trial = Timed(context)
        Trainer(trial, context).fit(max_length=Batch(17), reporting_period=Batch(3),
                                    validation_period=Batch(4), checkpoint_period=Batch(7),
                                    checkpoint_policy="none")
    expected: list[tuple[str, int]] = []
    for n in range(1, 18):  # epochs of 5 batches; every boundary ends a window of metrics
        if n % 5 == 0:
            expected.append(("epoch_end", n // 5 - 1))
        validate, checkpoint = n % 4 == 0 and n < 17, n % 7 == 0 and n < 17
        if validate or checkpoint or n % 3 == 0 or n == 17:
            expected.append(("report", n))
        if validate:
            expected.append(("validated", n))
        if checkpoint:
            expected.append(("checkpoint", n))
    expected += [("validated", 17), ("checkpoint", 17)]
    assert trial.timeline.seen == expected


class StopsItself(Tiny):
    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        if batch_idx == 5:
            self.context.set_stop_requested(True)
        return super().train_batch(batch, epoch_idx, batch_idx)


def test_one_worker_stops_after_the_batch_that_asked(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("HPCDET_CLUSTER_INFO", raising=False)
    with init(hparams={"global_batch_size": 2}) as context:
        Trainer(StopsItself(context), context).fit(max_length=Epoch(4),
                                                   checkpoint_policy="none")
    (ckpt,) = (tmp_path / "hpcdet" / "checkpoints").iterdir()
    assert json.loads((ckpt / "trial_state.json").read_text())["batches_trained"] == 6


def test_to_device_keeps_the_batch_shape_and_moves_only_what_it_must() -> None:
    Pair = collections.namedtuple("Pair", "x y")
    x, y = torch.zeros(2), torch.ones(2)
    cpu = torch.device("cpu")
    moved = to_device([x, (y, {"a": x}), Pair(x, y), 3], cpu)
    assert type(moved) is list and type(moved[1]) is tuple and type(moved[2]) is Pair
    assert moved[0] is x and moved[1][0] is y and moved[1][1]["a"] is x and moved[3] == 3
    assert to_device((x, y), "cpu")[0].device == cpu
    assert to_device(torch.nn.Parameter(x), cpu).device == cpu


class Pauses(Tiny):
    """Stops after its third batch the first time (a checkpoint, as a pause leaves one)."""

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        self.threads = torch.get_num_threads()
        if batch_idx == 2 and self.stop_at_third:
            self.context.set_stop_requested(True)
        return super().train_batch(batch, epoch_idx, batch_idx)

    stop_at_third = False
    threads = 0


def _stop_and_resume(tmp_path: Path, threads: tuple[int, int]) -> tuple[Pauses, Pauses]:
    """The same seed trained 2 epochs without a stop, and stopped after batch 3 and resumed
    from its checkpoint, each process's intra-op threads as ``threads`` says."""
    runs = []
    for stop, n in ((False, threads[0]), (True, threads[0]), (False, threads[1])):
        torch.set_num_threads(n)
        resume = None
        if runs and not stop:
            resume = next(c.name for c in (tmp_path / "hpcdet" / "checkpoints").iterdir()
                          if json.loads((c / "trial_state.json").read_text())[
                              "batches_trained"] == 3)
        with init(hparams={"global_batch_size": 2}) as context:
            trial = Pauses(context)
            trial.stop_at_third = stop
            Trainer(trial, context).fit(max_length=Epoch(2), latest_checkpoint=resume,
                                        checkpoint_policy="none")
        runs.append(trial)
    return runs[0], runs[2]


def test_a_resumed_trial_keeps_the_optimizer_step_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("HPCDET_CLUSTER_INFO", raising=False)
    whole, resumed = _stop_and_resume(tmp_path, (1, 1))
    # Every 2 optimizer steps over 10: a resumed count from 0 would step at 5, 7 and 9.
    assert [t.steps[MODES.STEP_EVERY_OPTIMIZER_STEP].last_epoch for t in (whole, resumed)] == [
        5, 5]
    assert resumed.context._optimizer_steps == 10


def test_a_resume_with_another_thread_count_says_it_is_not_bitwise(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("HPCDET_CLUSTER_INFO", raising=False)
    before = torch.get_num_threads()
    try:
        whole, resumed = _stop_and_resume(tmp_path, (1, 2))
    finally:
        torch.set_num_threads(before)
    # The user's count stands (it sets the speed too); the drift it causes is named.
    assert (whole.threads, resumed.threads) == (1, 2)
    assert ("this run uses 2 intra-op threads where the checkpointed run used 1"
            in caplog.text)
    assert "OMP_NUM_THREADS" in caplog.text
