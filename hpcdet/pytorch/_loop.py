"""The loop that trains a ``PyTorchTrial`` on the Core API.

Per global batch, every worker trains on its own batch (``train_batch``); the loop keeps the
position (``batches_trained``), steps LR schedulers, and at the configured periods reports
averaged training metrics, validates, and checkpoints. A preemption, pause or searcher stop
makes it checkpoint and return; a trial resumed from that checkpoint continues at the same
batch, with the same data order and the same random state.

A single worker checks for a stop after every batch; several agree on it (one allgather) at
each report, validation or checkpoint, so they always leave the loop at the same batch.
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from hpcdet.core import EarlyExitReason, SearcherOperation
from hpcdet.pytorch._callback import PyTorchCallback
from hpcdet.pytorch._context import PyTorchTrialContext, to_device
from hpcdet.pytorch._loaders import (
    check_loaders,
    epoch_length,
    timing,
    training_batches,
    validation_batches,
)
from hpcdet.pytorch._lr_scheduler import LRScheduler
from hpcdet.pytorch._reducer import (
    Reducer,
    check_batches,
    check_reducers,
    plain_metrics,
    reduce_batches,
)
from hpcdet.pytorch._state import (
    CODE_DIR,
    LOAD_DATA_FILE,
    STATE_FILE,
    TRIAL_STATE_FILE,
    copy_code,
    load_state,
    read_checkpoint,
    rng_state,
    training_state,
)
from hpcdet.pytorch._trial import (
    PyTorchTrial,
    evaluate_batch_takes_index,
    evaluation_mode,
)
from hpcdet.pytorch._units import Periods, Searcher, TrainUnit

logger = logging.getLogger("hpcdet.pytorch")

CHECKPOINT_POLICIES = ("best", "all", "none")
_EVERY_BATCH = LRScheduler.StepMode.STEP_EVERY_BATCH
_EVERY_EPOCH = LRScheduler.StepMode.STEP_EVERY_EPOCH


class _Stop(Exception):
    """Leave training: the workers agreed to stop (preemption, searcher, or the trial)."""

    def __init__(self, preempted: bool) -> None:
        self.preempted = preempted


class Loop:
    """Trains ``trial`` through ``context`` (see the module's docstring)."""

    def __init__(
        self,
        trial: PyTorchTrial,
        context: PyTorchTrialContext,
        periods: Periods,
        searcher: Searcher,
        *,
        test_mode: bool = False,
    ) -> None:
        if periods.checkpoint_policy not in CHECKPOINT_POLICIES:
            raise ValueError(f"checkpoint_policy must be one of {', '.join(CHECKPOINT_POLICIES)}"
                             f", not {periods.checkpoint_policy!r}")
        self.trial = trial
        self.ctx = context
        self.core = context._core
        self.dist = context.distributed
        self.periods = periods
        self.searcher = searcher
        self.test_mode = test_mode
        self.evaluation = evaluation_mode(type(trial))
        self.callbacks: dict[str, PyTorchCallback] = dict(trial.build_callbacks())
        self.reducers = check_reducers(trial.evaluation_reducer())
        self.seed = context.get_trial_seed()
        self.epoch_len = 1  # known once the training data loader is built (run())
        self._global_batch = 1
        # The periods in batches (0: not periodically), known with the epoch length.
        self._report_every = self._validate_every = self._checkpoint_every = 0

        self.batches_trained = 0
        # Records trained by every worker together, counted by the trial's
        # get_batch_length(); the ones this worker trained since the last report.
        self.records_trained = 0
        self._period_records = 0
        self.last_validation: int | None = None
        self.last_checkpoint: int | None = None
        self.best: float | None = None
        self.last_metrics: dict[str, Any] | None = None
        self._period_metrics: list[dict[str, Any]] = []

    def _build_loaders(self) -> None:
        train = self.trial.build_training_data_loader()
        val = self.trial.build_validation_data_loader()
        check_loaders(train, val, not self.ctx.experimental._data_repro_checks_disabled)
        self.train_data = train
        self.val_data = val
        self.epoch_len = epoch_length(train, self.dist.size, self.seed, self.dist.broadcast)
        if self.epoch_len == 0:
            raise ValueError("the training data loader has no batches (is the dataset empty, "
                             "or smaller than the batch size with drop_last=True?)")
        self.ctx._epoch_len = self.epoch_len
        self._global_batch = self._global_batch_size()
        self._report_every = self._every(self.periods.reporting)
        self._validate_every = self._every(self.periods.validation)
        self._checkpoint_every = self._every(self.periods.checkpoint)

    # --- helpers ------------------------------------------------------------------------

    def _global_batch_size(self) -> int:
        try:
            return self.ctx.get_global_batch_size()
        except ValueError:
            return (getattr(self.train_data, "batch_size", None) or 1) * self.dist.size

    def to_batches(self, unit: TrainUnit) -> int:
        return unit.batches(self.epoch_len, self._global_batch)

    def _every(self, unit: TrainUnit | None) -> int:
        return 0 if unit is None else self.to_batches(unit)

    def _is_chief(self) -> bool:
        return self.dist.rank == 0

    def _callbacks(self, hook: str, *args: Any) -> None:
        for cb in self.callbacks.values():
            getattr(cb, hook)(*args)

    # --- checkpoints --------------------------------------------------------------------

    def restore(self, uuid: str) -> None:
        """Load the checkpoint ``uuid``; its counters too when it is this trial's own."""
        with self.core.checkpoint.restore_path(uuid) as path:
            state, counters = read_checkpoint(Path(path), uuid, self.ctx.device)
        self._callbacks("on_checkpoint_load_start", state)
        load_state(self.ctx, self.callbacks, self.dist.rank, self.dist.size, state)
        own = counters.get("trial_id") == self.ctx._trial_id
        if own:
            self.batches_trained = int(counters.get("batches_trained", 0))
            self.records_trained = int(counters.get(
                "records_trained", self.batches_trained * self._global_batch))
            self.last_checkpoint = self.batches_trained
            self.last_validation = counters.get("last_validation")
            self.best = counters.get("best")
            # Older checkpoints lack the count: one optimizer step per aggregation is the
            # usual trial's.
            self.ctx._optimizer_steps = int(counters.get(
                "optimizer_steps", self.batches_trained // self.ctx._aggregation_frequency))
        logger.info("resumed from checkpoint %s at batch %d", uuid, self.batches_trained)

    def checkpoint(self) -> None:
        """Save a checkpoint at the current batch (collective: every worker calls it)."""
        if self.last_checkpoint == self.batches_trained:
            return
        rng_states = self.dist.allgather(rng_state())
        self.last_checkpoint = self.batches_trained
        uuid = None
        if self._is_chief():
            uuid = self._write_checkpoint(training_state(self.ctx, self.callbacks, rng_states))
        uuid = self.dist.broadcast(uuid)
        self._callbacks("on_checkpoint_upload_end", uuid)

    def _write_checkpoint(self, state: dict[str, Any]) -> str:
        self._callbacks("on_checkpoint_save_start", state)
        metadata = {
            "steps_completed": self.batches_trained,
            "framework": f"torch-{torch.__version__}",
            "format": "pickle",
            "trial_type": "PyTorchTrial",
        }
        counters = {
            "trial_id": self.ctx._trial_id,
            "batches_trained": self.batches_trained,
            # With one worker a stop can come between reports, with the last records
            # counted here only; with several, workers stop at reports.
            "records_trained": self.records_trained + self._period_records,
            "epochs_trained": self.batches_trained // self.epoch_len,
            "last_validation": self.last_validation,
            "best": self.best,
            "optimizer_steps": self.ctx._optimizer_steps,
        }
        load_data = {
            "trial_type": "PyTorchTrial",
            "trial_cls_spec": f"{type(self.trial).__module__}:{type(self.trial).__qualname__}",
            "experiment_config": self.ctx.get_experiment_config(),
            "hparams": self.ctx.get_hparams(),
        }
        with self.core.checkpoint.store_path(metadata, shard=False) as (path, uuid):
            torch.save(state, Path(path) / STATE_FILE)
            (Path(path) / TRIAL_STATE_FILE).write_text(json.dumps(counters))
            (Path(path) / LOAD_DATA_FILE).write_text(json.dumps(load_data, default=str))
            copy_code(Path(inspect.getfile(type(self.trial))).parent, Path(path) / CODE_DIR)
            self._callbacks("on_checkpoint_write_end", str(path))
            self._callbacks("on_checkpoint_end", str(path))
        logger.info("checkpoint %s at batch %d", uuid, self.batches_trained)
        return str(uuid)

    # --- validation ---------------------------------------------------------------------

    def validate(self) -> dict[str, Any]:
        """Validate every worker's share (or, with ``evaluate_full_dataset``, all of it on
        the chief) and report; then checkpoint if the policy says so."""
        self._callbacks("on_validation_start")
        self._callbacks("on_validation_epoch_start")
        for model in self.ctx.models:
            model.eval()
        for r in self.ctx.reducers:
            r.reducer.reset()
        outputs: list[dict[str, Any]] = []
        started = time.monotonic()
        with torch.no_grad():
            if self.evaluation == "batch":
                with_index = evaluate_batch_takes_index(type(self.trial))
                loader = validation_batches(self.val_data, self.dist.size, self.dist.rank,
                                            self.seed)
                records = 0
                for idx, batch in enumerate(loader):
                    if self.ctx.experimental._auto_to_device:
                        batch = self.ctx.to_device(batch)
                    records += self.trial.get_batch_length(batch)
                    out = (self.trial.evaluate_batch(batch, idx) if with_index
                           else self.trial.evaluate_batch(batch))  # type: ignore[call-arg]
                    outputs.append(plain_metrics(out, "evaluate_batch()"))
                    if self.test_mode:
                        break
                gathered = self.dist.allgather((outputs, records))
                every = [m for per_rank, _ in gathered for m in per_rank]
                metrics = reduce_batches(check_batches(every, self.reducers), self.reducers)
                if self._is_chief():
                    logger.info("%s", timing("validated", time.monotonic() - started,
                                             sum(n for _, n in gathered), len(every)))
            else:
                full = None
                if self._is_chief():
                    whole = validation_batches(self.val_data, 1, 0, self.seed)
                    full = plain_metrics(self.trial.evaluate_full_dataset(whole),
                                         "evaluate_full_dataset()")
                metrics = self.dist.broadcast(full)
            for r in self.ctx.reducers:
                if r.for_validation:
                    metrics.update(r.result(self.dist.allgather(r.reducer.per_slot_reduce())))
        for model in self.ctx.models:
            model.train()
        self._add_time_metric(metrics)
        best_checkpoint = False
        if self._is_chief():
            if self.periods.checkpoint_policy == "best":
                previous = self.core.train.get_experiment_best_validation()
                best_checkpoint = self._improves(metrics, previous)
            self.core.train.report_validation_metrics(self.batches_trained, metrics)
        self.last_validation = self.batches_trained
        self.last_metrics = metrics
        self._callbacks("on_validation_epoch_end", outputs)
        self._callbacks("on_validation_end", metrics)
        if self.dist.broadcast(best_checkpoint) or self.periods.checkpoint_policy == "all":
            self.checkpoint()
        return metrics

    def _add_time_metric(self, metrics: dict[str, Any]) -> None:
        # As Determined 0.38: a searcher's time_metric can be batches or epochs unasked.
        metrics.setdefault("batches", self.batches_trained)
        metrics.setdefault("epochs", self.batches_trained // self.epoch_len)
        if self.searcher.time_metric == "records":
            metrics.setdefault("records", self.records_trained)

    def searcher_value(self, metrics: dict[str, Any]) -> float:
        """The searcher's metric among ``metrics``.

        Raises:
            ValueError: The validation metrics lack it (naming those there are), or it is
                not a number.
        """
        name = self.searcher.metric
        if name is None or name not in metrics:
            raise ValueError(
                f"Search method is configured to use metric {name!r} (searcher.metric) but the "
                f"trial returned validation metrics {sorted(metrics)}; return it from "
                "evaluate_batch() or evaluate_full_dataset()"
            )
        value = metrics[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"Searcher validation metric {name!r} returned a non-scalar "
                             f"value: {value!r}")
        return float(value)

    def _improves(self, metrics: dict[str, Any], experiment_best: float | None) -> bool:
        """Whether ``metrics`` beat the experiment's best validation (as Determined's
        ``best`` policy judges), or this trial's when the experiment has none yet."""
        if self.searcher.metric is None:
            return False
        value = self.searcher_value(metrics)
        best = experiment_best if experiment_best is not None else self.best
        better = best is None or (value < best if self.searcher.smaller_is_better
                                  else value > best)
        if self.best is None or (value < self.best if self.searcher.smaller_is_better
                                 else value > self.best):
            self.best = value
        return better

    # --- training -----------------------------------------------------------------------

    def _agree_to_stop(self) -> bool | None:
        """Whether the workers stop after this batch: ``True`` to be resumed (preemption),
        ``False`` for an early stop a trial asked for, ``None`` to go on. Collective."""
        preempt = self._is_chief() and self.core.preempt.should_preempt()
        votes = self.dist.allgather((preempt, self.ctx.get_stop_requested()))
        if votes[0][0]:
            return True
        return False if any(v[1] for v in votes) else None

    def _report_training(self) -> None:
        gathered = self.dist.allgather((self._period_metrics, self._period_records))
        every = [m for per_rank, _ in gathered for m in per_rank]
        self.records_trained += sum(n for _, n in gathered)
        self._period_records = 0
        metrics = reduce_batches(every, Reducer.AVG) if every else {}
        for r in self.ctx.reducers:
            if r.for_training:
                metrics.update(r.result(self.dist.allgather(r.reducer.per_slot_reduce())))
                r.reducer.reset()
        if self._is_chief():
            self.core.train.report_training_metrics(self.batches_trained, metrics)
        self._callbacks("on_training_workload_end", metrics, self._period_metrics)
        self._period_metrics = []

    def _next_event(self, target: int) -> int:
        """The batch after which the next epoch ends, a period falls due or ``target`` is
        reached: the first that :meth:`_at_event` has anything to do for."""
        done = self.batches_trained
        events = [target]
        for every in (self.epoch_len, self._report_every, self._validate_every,
                      self._checkpoint_every):
            if every > 0:
                events.append((done // every + 1) * every)
        return min(events)

    def _at_event(self, target: int) -> bool:
        """End the epoch (callbacks, LR schedulers), and report, validate and checkpoint
        when due. Returns whether a boundary (one of those three) was reached."""
        done = self.batches_trained
        if done % self.epoch_len == 0:
            epoch = done // self.epoch_len - 1
            self._callbacks("on_training_epoch_end", epoch)
            for sched in self.ctx.lr_schedulers:
                if sched.due(_EVERY_EPOCH, epoch + 1):
                    sched.step()
        at_end = done == target
        every = self._validate_every
        validate = not at_end and every > 0 and done % every == 0
        every = self._checkpoint_every
        checkpoint = not at_end and every > 0 and done % every == 0
        every = self._report_every
        report = at_end or (every > 0 and done % every == 0)
        if not (validate or checkpoint or report):
            return False
        # As Determined: a window of training metrics ends at any boundary.
        self._report_training()
        if self._is_chief() and target:
            self.core.train.report_progress(min(1.0, done / target))
        if validate:
            self.validate()
        if checkpoint:
            self.checkpoint()
        return True

    def train_to(self, batches: Iterator[Any], target: int) -> None:
        """Train until ``target`` batches have been trained.

        A single worker checks for a stop (a preemption, or the trial's request) after
        every batch; several agree on it at each boundary, as Determined's do, to keep
        collectives off the per-batch path.

        Raises:
            _Stop: The workers agreed to stop before ``target``.
        """
        # What runs for every batch is inline here, where the rest waits for the next event:
        # on a small model each call per batch costs more than its own time (measured by
        # bench/pytorch_throughput.py).
        ctx = self.ctx
        single = self.dist.size == 1
        should_preempt = self.core.preempt.should_preempt
        batch_length = self.trial.get_batch_length
        auto_to_device = ctx.experimental._auto_to_device
        next_event = self._next_event(target)
        while self.batches_trained < target:
            done = self.batches_trained
            epoch, in_epoch = divmod(done, self.epoch_len)
            ctx._epoch, ctx._batch = epoch, done
            if in_epoch == 0 or not self._started_epoch:
                self._callbacks("on_training_epoch_start", epoch)
                self._started_epoch = True
            batch = next(batches)
            if auto_to_device:
                batch = to_device(batch, ctx.device, ctx._warned_types)
            self._period_records += batch_length(batch)
            out = self.trial.train_batch(batch, epoch, done)
            self._period_metrics.append(plain_metrics(out, "train_batch()"))
            if ctx._stepped_scalers:
                ctx._end_batch()
            self.batches_trained = done = done + 1
            # Read as Determined's loop reads them: the properties would cost a call each.
            for sched in ctx.lr_schedulers:
                if sched._step_mode is _EVERY_BATCH and done % sched._frequency == 0:
                    sched.step()
            boundary = False
            if done == next_event:
                boundary = self._at_event(target)
                next_event = self._next_event(target)
            if single:
                if should_preempt():
                    raise _Stop(preempted=True)
                if ctx._stop_requested:
                    raise _Stop(preempted=False)
            elif boundary:
                decision = self._agree_to_stop()
                if decision is not None:
                    raise _Stop(preempted=decision)
            if self.test_mode:
                return

    _started_epoch = False

    def run(self, lengths: Iterator[tuple[int, SearcherOperation | None]],
            latest_checkpoint: str | None, first_batch: int = 0) -> bool:
        """Train to each length in turn (in batches; with its searcher operation, if any),
        validating at each; checkpoint at the end. Returns whether the trial was preempted
        (it checkpointed to be resumed)."""
        if not self.ctx.models:
            raise ValueError("Must have at least one model. This might be caused by not "
                             "wrapping your model with context.wrap_model().")
        if not self.ctx.optimizers:
            raise ValueError("Must have at least one optimizer. This might be caused by not "
                             "wrapping your optimizer with context.wrap_optimizer().")
        self._callbacks("on_trial_startup", first_batch, latest_checkpoint)
        try:
            self._build_loaders()
            if latest_checkpoint:
                self.restore(latest_checkpoint)
            return self._run(lengths)
        finally:
            self._callbacks("on_trial_shutdown")

    def _run(self, lengths: Iterator[tuple[int, SearcherOperation | None]]) -> bool:
        self.ctx._initial_batch = self.batches_trained
        batches = training_batches(self.train_data, self.batches_trained, self.dist.size,
                                   self.dist.rank, self.seed)
        self._callbacks("on_training_start")
        for model in self.ctx.models:
            model.train()
        if self.periods.step_zero_validation and self.batches_trained == 0:
            self.validate()
        started = time.monotonic()
        for target, op in lengths:
            try:
                self.train_to(batches, target)
            except _Stop as stop:
                self.checkpoint()
                if not stop.preempted and self._is_chief():
                    self.core.train.report_early_exit(EarlyExitReason.USER_REQUESTED_STOP)
                return stop.preempted
            if self.last_validation != self.batches_trained:
                self.validate()
            if op is not None and self._is_chief():
                assert self.last_metrics is not None
                op.report_completed(self.searcher_value(self.last_metrics))
            if self.test_mode:
                break
        self.checkpoint()
        logger.info("trained %d batches in %.1f s", self.batches_trained,
                    time.monotonic() - started)
        return False
