"""``det.pytorch.init()`` and the ``Trainer`` (Determined 0.38's way to run a PyTorchTrial).

::

    with det.pytorch.init() as train_context:
        trial = MyTrial(train_context)
        det.pytorch.Trainer(trial, train_context).fit(max_length=det.pytorch.Epoch(5))

On the cluster, hyperparameters, the config, the seed and the checkpoint to resume from come
from the trial; several slots need the torch launcher (``python3 -m
determined.launch.torch_distributed``), which starts one process per slot.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed

from hpcdet import core
from hpcdet.core import DistributedContext, PreemptMode, SearcherOperation
from hpcdet.pytorch._context import PyTorchTrialContext
from hpcdet.pytorch._loop import Loop
from hpcdet.pytorch._state import seed_everything
from hpcdet.pytorch._trial import PyTorchTrial
from hpcdet.pytorch._units import UNITS, Batch, Periods, Searcher, TrainUnit, from_config

logger = logging.getLogger("hpcdet.pytorch")

def _distributed(info: core.ClusterInfo | None) -> DistributedContext | None:
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # started by torchrun, one of several
        return DistributedContext.from_torch_distributed()
    if info is not None and (len(info.slot_ids) > 1 or len(info.container_addrs) > 1):
        slots = len(info.slot_ids) * len(info.container_addrs)
        raise RuntimeError(
            f"this trial has {slots} slots, so a PyTorchTrial needs one process per slot: "
            "start it with the torch launcher, entrypoint: python3 -m "
            "determined.launch.torch_distributed python3 train.py (or name the trial class, "
            "entrypoint: model_def:MyTrial)"
        )
    return None


def _device(dist: DistributedContext) -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", dist.local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def _aggregation(exp_conf: dict[str, Any]) -> tuple[int, bool]:
    opt = exp_conf.get("optimizations") or {}
    freq = opt.get("aggregation_frequency", 1)
    if not isinstance(freq, int) or isinstance(freq, bool) or freq < 1:
        raise ValueError(f"optimizations.aggregation_frequency must be a positive integer, "
                         f"not {freq!r}")
    return freq, bool(opt.get("average_aggregated_gradients", True))


@contextlib.contextmanager
def init(
    *,
    hparams: dict[str, Any] | None = None,
    exp_conf: dict[str, Any] | None = None,
    distributed: DistributedContext | None = None,
    aggregation_frequency: int = 1,
    enable_tensorboard_logging: bool = True,
) -> Iterator[PyTorchTrialContext]:
    """The context a ``PyTorchTrial`` is built with, for ``Trainer``; use it in ``with``.

    Seeds Python's, numpy's and torch's generators with the trial seed and, with several
    workers, starts ``torch.distributed`` (NCCL on GPUs, else gloo).
    """
    info = core.get_cluster_info()
    trial_id = experiment_id = None
    if info is not None and info.task_type == "TRIAL":
        if exp_conf is not None:
            logger.warning("det.pytorch.init(): on the cluster the config comes from the "
                           "trial; the exp_conf given is not used")
        hparams = dict(info.trial.hparams if hparams is None else hparams)
        exp_conf = dict(info.trial._config)
        seed = info.trial.trial_seed
        trial_id, experiment_id = info.trial.trial_id, info.trial.experiment_id
    else:
        hparams, exp_conf = dict(hparams or {}), dict(exp_conf or {})
        seed = int((exp_conf.get("reproducibility") or {}).get("experiment_seed") or 0)
    dist = distributed or _distributed(info)
    started_group = False
    if dist is not None and dist.size > 1 and not torch.distributed.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        torch.distributed.init_process_group(backend=backend)
        started_group = True
    freq, average = _aggregation(exp_conf)
    if aggregation_frequency != 1:
        freq = aggregation_frequency
    seed_everything(seed)
    try:
        with core.init(distributed=dist, preempt_mode=PreemptMode.ChiefOnly) as core_context:
            context = PyTorchTrialContext(
                core_context,
                hparams=hparams,
                exp_conf=exp_conf,
                trial_seed=seed,
                trial_id=trial_id,
                experiment_id=experiment_id,
                device=_device(core_context.distributed),
                aggregation_frequency=freq,
                average_aggregated_gradients=average,
                enable_tensorboard_logging=enable_tensorboard_logging,
            )
            yield context
            if context._tensorboard_writer is not None:
                context._tensorboard_writer.close()
    finally:
        if started_group:
            torch.distributed.destroy_process_group()


def _unit(value: TrainUnit | None, name: str) -> TrainUnit | None:
    if value is not None and not isinstance(value, TrainUnit):
        raise TypeError(f"{name} must be det.pytorch.Batch(n) or det.pytorch.Epoch(n), not "
                        f"{value!r}")
    return value


class Trainer:
    """Runs a ``PyTorchTrial`` with the context from :func:`init`."""

    def __init__(self, trial: PyTorchTrial, context: PyTorchTrialContext) -> None:
        if not isinstance(trial, PyTorchTrial):
            raise TypeError(f"Trainer takes a PyTorchTrial, not {type(trial).__name__}")
        self._trial = trial
        self._context = context

    def configure_profiler(self, *args: Any, **kwargs: Any) -> None:
        """Accepted; hpcdet has no profiler (logged)."""
        logger.info("hpcdet has no profiler; configure_profiler() does nothing")

    def fit(
        self,
        checkpoint_period: TrainUnit | None = None,
        validation_period: TrainUnit | None = None,
        max_length: TrainUnit | None = None,
        reporting_period: TrainUnit | None = None,
        checkpoint_policy: str | None = None,
        latest_checkpoint: str | None = None,
        step_zero_validation: bool | None = None,
        test_mode: bool = False,
        profiling_enabled: bool = False,
    ) -> None:
        """Train to ``max_length``, validating every ``validation_period`` and at the end,
        checkpointing every ``checkpoint_period``, at the end and when preempted.

        On the cluster, what is not given comes from the config (``min_validation_period``,
        ``min_checkpoint_period``, ``scheduling_unit``, ``checkpoint_policy``,
        ``perform_initial_validation``), the length from ``searcher.max_length`` through the
        searcher's operations, and the checkpoint to resume from from the trial.

        Raises:
            ValueError: No length is known.
        """
        ctx = self._context
        info = core.get_cluster_info()
        on_cluster = info is not None and info.task_type == "TRIAL"
        conf = ctx.get_experiment_config() if on_cluster else {}
        searcher_conf = dict(conf.get("searcher") or {})
        if profiling_enabled:
            logger.warning("hpcdet has no profiler; profiling_enabled is not applied")
        if on_cluster and test_mode:
            raise ValueError("test_mode is only supported in local training mode.")
        policy = checkpoint_policy or conf.get("checkpoint_policy") or "best"
        if not on_cluster and policy == "best":
            logger.warning("checkpoint_policy='best' is not supported in local training mode. "
                           "Falling back to 'all'.")
            policy = "all"
        periods = Periods(
            reporting=_unit(reporting_period, "reporting_period")
            or Batch(int(conf.get("scheduling_unit") or 100)),
            validation=_unit(validation_period, "validation_period")
            or from_config(conf.get("min_validation_period")),
            checkpoint=_unit(checkpoint_period, "checkpoint_period")
            or from_config(conf.get("min_checkpoint_period")),
            checkpoint_policy=policy,
            step_zero_validation=bool(step_zero_validation if step_zero_validation is not None
                                      else conf.get("perform_initial_validation", False)),
        )
        time_metric = searcher_conf.get("time_metric")
        searcher = Searcher(
            metric=searcher_conf.get("metric"),
            smaller_is_better=bool(searcher_conf.get("smaller_is_better", True)),
            time_metric=time_metric if time_metric in UNITS else None,
        )
        loop = Loop(self._trial, ctx, periods, searcher, test_mode=test_mode)
        length = _unit(max_length, "max_length")
        if length is not None:
            lengths = fixed_length(loop, length)
        elif on_cluster and searcher_conf.get("max_length") is not None:
            # 0.37 configs: the searcher's operations say how far (ASHA's rungs among them).
            unit = from_config(searcher_conf["max_length"])
            lengths = lengths_from_ops(loop, iter(ctx._core.searcher.operations()), unit)
        elif on_cluster and time_metric in UNITS and searcher_conf.get("max_time"):
            lengths = fixed_length(loop, UNITS[time_metric](int(searcher_conf["max_time"])))
        elif test_mode:
            lengths = fixed_length(loop, Batch(1))
        elif not on_cluster:
            raise ValueError("max_length must be defined in local training mode: pass e.g. "
                             "fit(max_length=det.pytorch.Epoch(1))")
        else:
            raise ValueError(
                "fit() needs a training length: pass max_length=det.pytorch.Batch(n) or "
                "Epoch(n), or set searcher.max_length, or searcher.max_time with "
                "time_metric batches, records or epochs"
            )
        first_batch = 0
        if on_cluster:
            assert info is not None
            first_batch = info.trial._steps_completed
            if latest_checkpoint is None:
                latest_checkpoint = info.latest_checkpoint
        loop.run(lengths, latest_checkpoint, first_batch)


def lengths_from_ops(loop: Loop, ops: Iterator[SearcherOperation], unit: TrainUnit | None
                     ) -> Iterator[tuple[int, SearcherOperation | None]]:
    """Targets in batches from the searcher's operations (lengths in ``unit``'s kind)."""
    kind = type(unit) if unit is not None else Batch
    for op in ops:
        yield loop.to_batches(kind(op.length)), op


def fixed_length(loop: Loop, length: TrainUnit) -> Iterator[tuple[int, SearcherOperation | None]]:
    yield loop.to_batches(length), None
