"""``PyTorchTrialContext``: what a ``PyTorchTrial`` uses to build and train its model.

The trial registers its models, optimizers, LR schedulers and scalers through the
``wrap_*`` methods, so that the loop can move them to the device, wrap them for distributed
training, and save and restore them in checkpoints; it trains through :meth:`backward` and
:meth:`step_optimizer`, which apply gradient aggregation, clipping and zeroing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn as nn

from hpcdet.core import Context as CoreContext
from hpcdet.core import DistributedContext
from hpcdet.pytorch._experimental import PyTorchExperimentalContext, amp_dtype
from hpcdet.pytorch._lr_scheduler import LRScheduler
from hpcdet.pytorch._reducer import MetricReducer, WrappedReducer

logger = logging.getLogger("hpcdet.pytorch")
_EVERY_OPTIMIZER_STEP = LRScheduler.StepMode.STEP_EVERY_OPTIMIZER_STEP


def to_device(data: Any, device: torch.device | str, warned: set[type] | None = None) -> Any:
    """``data`` (tensors, and dicts, lists and tuples of them) moved to ``device``; other
    values are returned as they are."""
    # The usual batch, a list or tuple of tensors, takes no call per tensor: this runs every
    # step. .to() returns a tensor already on ``device`` itself, but only after parsing its
    # arguments, which costs more than comparing the devices.
    kind = type(data)
    if kind is list or kind is tuple:
        moved = []
        for v in data:
            if type(v) is not torch.Tensor or v.device != device:
                v = to_device(v, device, warned)
            moved.append(v)
        return moved if kind is list else tuple(moved)
    if kind is torch.Tensor:
        return data if data.device == device else data.to(device)
    if isinstance(data, torch.Tensor):
        return data.to(device)
    if isinstance(data, dict):
        return {k: to_device(v, device, warned) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # a namedtuple
        return type(data)(*(to_device(v, device, warned) for v in data))
    if isinstance(data, (list, tuple)):
        return type(data)(to_device(v, device, warned) for v in data)
    if hasattr(data, "to") and callable(data.to):
        return data.to(device)
    if type(data).__module__ == "numpy" and getattr(getattr(data, "dtype", None), "kind",
                                                    "O") in "fciub":
        return torch.as_tensor(data, device=device)
    if warned is not None and type(data) not in warned and not isinstance(data, (int, float,
                                                                                 str, bool)):
        warned.add(type(data))
        logger.warning("a batch holds a %s, which was not moved to %s", type(data).__name__,
                       device)
    return data


class PyTorchTrialContext:
    """The context of a ``PyTorchTrial``; build it with ``det.pytorch.init()`` (the loop of a
    trial-class entrypoint builds it for you).

    Attributes:
        distributed: The Core API's distributed context (rank, size, collectives).
    """

    def __init__(
        self,
        core_context: CoreContext,
        *,
        hparams: dict[str, Any],
        exp_conf: dict[str, Any],
        trial_seed: int,
        trial_id: int | None,
        experiment_id: int | None,
        device: torch.device,
        aggregation_frequency: int = 1,
        average_aggregated_gradients: bool = True,
        enable_tensorboard_logging: bool = True,
    ) -> None:
        self._core = core_context
        self.distributed: DistributedContext = core_context.distributed
        self._hparams = hparams
        self._exp_conf = exp_conf
        self._trial_seed = trial_seed
        self._trial_id = trial_id
        self._experiment_id = experiment_id
        self.device = device
        self._aggregation_frequency = aggregation_frequency
        self._average_aggregated_gradients = average_aggregated_gradients
        self._enable_tensorboard_logging = enable_tensorboard_logging
        self.models: list[nn.Module] = []
        self.optimizers: list[torch.optim.Optimizer] = []
        self.lr_schedulers: list[LRScheduler] = []
        self.scalers: list[Any] = []
        self.reducers: list[WrappedReducer] = []
        self._stepped_scalers: set[int] = set()
        self._stop_requested = False
        self._epoch = 0
        self._batch = 0
        self._epoch_len: int | None = None
        self._optimizer_steps = 0
        self._tensorboard_writer: Any = None
        self._warned_types: set[type] = set()
        self._warned_batch_size = False
        self._initial_batch = 0
        self._warned_profiler = False
        self.experimental = PyTorchExperimentalContext(self)

    # --- the trial's facts -------------------------------------------------------------

    def get_hparams(self) -> dict[str, Any]:
        """Every hyperparameter of this trial."""
        return self._hparams

    def get_hparam(self, name: str) -> Any:
        """One hyperparameter.

        Raises:
            ValueError: The trial has no hyperparameter ``name``.
        """
        if name not in self._hparams:
            raise ValueError(
                f"Could not find name '{name}' in experiment hyperparameters. Please check your "
                "experiment configuration 'hyperparameters' section."
            )
        return self._hparams[name]

    def get_experiment_config(self) -> dict[str, Any]:
        return self._exp_conf

    def get_data_config(self) -> dict[str, Any]:
        """The config's ``data`` section."""
        return dict(self._exp_conf.get("data") or {})

    def get_trial_id(self) -> int:
        if self._trial_id is None:
            raise ValueError("there is no trial id outside a trial run by hpcdet")
        return self._trial_id

    def get_experiment_id(self) -> int:
        if self._experiment_id is None:
            raise ValueError("there is no experiment id outside a trial run by hpcdet")
        return self._experiment_id

    def get_trial_seed(self) -> int:
        return self._trial_seed

    def get_global_batch_size(self) -> int:
        """The ``global_batch_size`` hyperparameter.

        Raises:
            ValueError: It is missing or not a positive integer.
        """
        value = self._hparams.get("global_batch_size")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(
                "the hyperparameter global_batch_size must be a positive integer, got "
                f"{value!r}; set it in the config's hyperparameters section, e.g. "
                "global_batch_size: 64"
            )
        return value

    def get_per_slot_batch_size(self) -> int:
        """``global_batch_size`` divided among the trial's slots (rounded down, with a
        warning, when it does not divide: as Determined does).

        Raises:
            ValueError: ``global_batch_size`` is smaller than the slot count.
        """
        global_size = self.get_global_batch_size()
        slots = self.distributed.size
        if global_size < slots:
            raise ValueError(
                f"global_batch_size ({global_size}) is smaller than the trial's {slots} slots "
                "(resources.slots_per_trial); each slot needs at least one record per batch"
            )
        if global_size % slots and not self._warned_batch_size:
            self._warned_batch_size = True
            logger.warning(
                "global_batch_size %d is not divisible by the trial's %d slots: each slot "
                "trains on %d records per batch, %d in all", global_size, slots,
                global_size // slots, global_size // slots * slots)
        return global_size // slots

    def get_stop_requested(self) -> bool:
        return self._stop_requested

    def set_stop_requested(self, stop_requested: bool) -> None:
        """Ask the loop to stop after this batch: it validates, checkpoints and reports an
        early exit to the searcher."""
        if not isinstance(stop_requested, bool):
            raise AssertionError("stop_requested must be a boolean")
        if stop_requested:
            logger.info("a stop was requested: the trial stops at the end of this batch")
        self._stop_requested = stop_requested

    def get_enable_tensorboard_logging(self) -> bool:
        return self._enable_tensorboard_logging

    def set_enable_tensorboard_logging(self, enable_tensorboard_logging: bool) -> None:
        """Whether the loop writes the trial's metrics to TensorBoard."""
        if not isinstance(enable_tensorboard_logging, bool):
            raise AssertionError("enable_tensorboard_logging must be a boolean")
        self._enable_tensorboard_logging = enable_tensorboard_logging

    def set_profiler(self, *args: Any, **kwargs: Any) -> None:
        """Accepted so that trials written for Determined run; hpcdet has no profiler and
        runs none (wrap ``train_batch`` in ``torch.profiler.profile`` yourself for traces)."""
        if not self._warned_profiler:
            self._warned_profiler = True
            logger.warning("context.set_profiler(): hpcdet has no profiler; training runs "
                           "unprofiled (use torch.profiler.profile in the trial for traces)")

    def configure_apex_amp(self, *args: Any, **kwargs: Any) -> Any:
        """NVIDIA Apex is not supported (Determined deprecated it).

        Raises:
            NotImplementedError: Always, naming what to use instead.
        """
        raise NotImplementedError(
            "context.configure_apex_amp(): hpcdet does not support NVIDIA Apex; use torch's "
            "own mixed precision: call context.experimental.use_amp() in the trial's "
            "__init__, or run the forward pass under torch.autocast with a GradScaler given "
            "to context.wrap_scaler()"
        )

    def get_tensorboard_path(self) -> Any:
        return self._core.train.get_tensorboard_path()

    def get_tensorboard_writer(self) -> Any:
        """A ``torch.utils.tensorboard.SummaryWriter`` writing where hpcdet keeps the trial's
        TensorBoard files (needs the ``tensorboard`` package in the trial's environment)."""
        if self._tensorboard_writer is None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as e:
                raise ImportError(
                    f"get_tensorboard_writer() needs tensorboard ({e}); pip install tensorboard "
                    "in the trial's environment"
                ) from None
            self._tensorboard_writer = SummaryWriter(str(self.get_tensorboard_path()))
        return self._tensorboard_writer

    # --- position in training (kept by the loop) -----------------------------------------

    def get_initial_batch(self) -> int:
        """The batches already trained when this run started (0, or where it resumed)."""
        return self._initial_batch

    def current_train_epoch(self) -> int:
        return self._epoch

    def current_train_batch(self) -> int:
        """Batches trained before the one being trained (global batches, from 0)."""
        return self._batch

    def _require_epoch_len(self) -> int:
        if self._epoch_len is None:
            raise RuntimeError("the epoch length is known once training has started")
        return self._epoch_len

    def is_epoch_start(self) -> bool:
        return self._batch % self._require_epoch_len() == 0

    def is_epoch_end(self) -> bool:
        return (self._batch + 1) % self._require_epoch_len() == 0

    # --- registering what the loop manages -------------------------------------------------

    def wrap_model(self, model: nn.Module) -> nn.Module:
        """``model`` on the trial's device and, with several workers, in
        ``DistributedDataParallel``; use the returned model for training."""
        if not isinstance(model, nn.Module):
            raise TypeError(f"wrap_model() takes a torch.nn.Module, not {type(model).__name__}")
        model = model.to(self.device)
        wrapped: nn.Module = model
        if self.distributed.size > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            wrapped = _DistributedDataParallel(model, device_ids=ids)
        if self.experimental._auto_amp:
            wrapped = self.autocast_forward_pass(wrapped)
        self.models.append(wrapped)
        return wrapped

    def wrap_optimizer(
        self, optimizer: torch.optim.Optimizer, backward_passes_per_step: int = 1,
        fp16_compression: bool = False, average_aggregated_gradients: bool | None = None,
    ) -> torch.optim.Optimizer:
        """Register ``optimizer`` (returned as it is) to be saved and restored."""
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"wrap_optimizer() takes a torch.optim.Optimizer, not {type(optimizer).__name__}"
            )
        if backward_passes_per_step != 1 or fp16_compression:
            logger.warning("wrap_optimizer(): backward_passes_per_step and fp16_compression "
                           "are Horovod settings and are not applied")
        if average_aggregated_gradients is not None:
            self._average_aggregated_gradients = average_aggregated_gradients
        self.optimizers.append(optimizer)
        return optimizer

    def wrap_lr_scheduler(
        self, lr_scheduler: Any, step_mode: LRScheduler.StepMode, frequency: int = 1
    ) -> Any:
        """Register ``lr_scheduler``; the loop steps it as ``step_mode`` says. Returns it."""
        self.lr_schedulers.append(LRScheduler(lr_scheduler, step_mode, frequency))
        return lr_scheduler

    def wrap_scaler(self, scaler: Any) -> Any:
        """Register a ``torch.cuda.amp.GradScaler`` (or ``torch.amp.GradScaler``) to be
        checkpointed. As in Determined, the trial scales its loss itself
        (``context.backward(scaler.scale(loss))``) and passes the scaler to
        :meth:`step_optimizer`; the loop updates it after each batch it stepped in."""
        self.scalers.append(scaler)
        return scaler

    def wrap_reducer(
        self, reducer: MetricReducer | Callable[[list[Any]], Any], name: str | None = None,
        for_training: bool = True, for_validation: bool = True,
    ) -> MetricReducer:
        """Register a metric reducer; its result is added to the metrics it is for."""
        if not isinstance(reducer, MetricReducer):
            if not callable(reducer) or name is None:
                raise TypeError("wrap_reducer() takes a MetricReducer, or a function with a name")
            reducer = _FunctionReducer(reducer)
        self.reducers.append(WrappedReducer(reducer, name, for_training, for_validation))
        return reducer

    # --- training ---------------------------------------------------------------------------

    def to_device(self, data: Any) -> Any:
        return to_device(data, self.device, self._warned_types)

    def _is_aggregation_step(self) -> bool:
        return (self._batch + 1) % self._aggregation_frequency == 0

    def backward(
        self, loss: torch.Tensor, gradient: torch.Tensor | None = None,
        retain_graph: bool = False, create_graph: bool = False,
    ) -> None:
        """``loss.backward()``, scaled by ``use_amp()``'s scaler; with ``aggregation_frequency``
        above 1, gradients are only synchronised among workers on the last batch of each
        aggregation."""
        amp_scaler = self.experimental._scaler
        if amp_scaler is not None:
            loss = amp_scaler.scale(loss)
        if self.distributed.size == 1 or self._is_aggregation_step():
            loss.backward(gradient=gradient, retain_graph=retain_graph,  # type: ignore[no-untyped-call]
                          create_graph=create_graph)
            return
        with contextlib.ExitStack() as stack:
            for model in self.models:
                if isinstance(model, nn.parallel.DistributedDataParallel):
                    stack.enter_context(model.no_sync())
            loss.backward(gradient=gradient, retain_graph=retain_graph,  # type: ignore[no-untyped-call]
                          create_graph=create_graph)

    def step_optimizer(
        self, optimizer: torch.optim.Optimizer,
        clip_grads: Callable[[Iterator[torch.Tensor]], None] | None = None,
        auto_zero_grads: bool = True, scaler: Any = None,
    ) -> None:
        """Step ``optimizer`` (on the last batch of each aggregation), after ``clip_grads``
        (given the parameters), through ``scaler`` if given (or ``use_amp()``'s); then zero
        its gradients. With ``use_amp()``, gradients are unscaled before ``clip_grads``; a
        scaler of the trial's own is unscaled by the trial, as in Determined.

        Raises:
            ValueError: ``optimizer`` was not wrapped.
        """
        if optimizer not in self.optimizers:  # by identity: optimizers define no __eq__
            raise ValueError("step_optimizer() takes an optimizer returned by wrap_optimizer()")
        if self._aggregation_frequency > 1:
            if not self._is_aggregation_step():
                return
            if self._average_aggregated_gradients:
                for group in optimizer.param_groups:
                    for p in group["params"]:
                        if p.grad is not None:
                            p.grad.div_(self._aggregation_frequency)
        amp_scaler = self.experimental._scaler
        if clip_grads is not None:
            if amp_scaler is not None:
                amp_scaler.unscale_(optimizer)
            clip_grads(p for group in optimizer.param_groups for p in group["params"])
        if scaler is None:
            scaler = amp_scaler
        if scaler is not None:
            scaler.step(optimizer)
            self._stepped_scalers.add(id(scaler))
        else:
            optimizer.step()
        if auto_zero_grads:
            optimizer.zero_grad()
        self._optimizer_steps = steps = self._optimizer_steps + 1
        # Read as Determined's loop reads them: the properties would cost a call per batch.
        for sched in self.lr_schedulers:
            if sched._step_mode is _EVERY_OPTIMIZER_STEP and steps % sched._frequency == 0:
                sched.step()

    def _end_batch(self) -> None:
        for scaler in self.scalers:
            if id(scaler) in self._stepped_scalers:
                scaler.update()
        self._stepped_scalers.clear()

    def autocast_forward_pass(self, to_wrap: nn.Module) -> nn.Module:
        """``to_wrap`` (the same object) with its forward pass under ``torch.autocast`` for
        the device (float16 on a GPU, bfloat16 on a CPU) and its half-precision outputs
        turned back to float32, so that losses are computed outside autocast as Determined's
        ``use_amp()`` has them."""
        forward = to_wrap.forward
        device_type = self.device.type
        dtype = amp_dtype(self.device)

        def autocast_forward(*args: Any, **kwargs: Any) -> Any:
            with torch.autocast(device_type=device_type, dtype=dtype):
                return forward(*args, **kwargs)

        to_wrap.forward = autocast_forward
        warned: set[type] = set()

        def to_float32(module: nn.Module, inputs: Any, output: Any) -> Any:
            return _float32(output, warned)

        to_wrap.register_forward_hook(to_float32)
        return to_wrap


def _float32(output: Any, warned: set[type]) -> Any:
    if isinstance(output, torch.Tensor):
        return output.float() if output.dtype in (torch.float16, torch.bfloat16) else output
    if isinstance(output, dict):
        return {k: _float32(v, warned) for k, v in output.items()}
    if isinstance(output, (list, tuple)) and not hasattr(output, "_fields"):
        return type(output)(_float32(v, warned) for v in output)
    if type(output) not in warned:
        warned.add(type(output))
        logger.warning("use_amp(): a model returned a %s, whose tensors stay in half "
                       "precision", type(output).__name__)
    return output


class _DistributedDataParallel(nn.parallel.DistributedDataParallel):
    """DistributedDataParallel through which the wrapped module's own attributes read (e.g.
    ``self.model.weight`` in a trial written for one worker), as Determined's wrapper does;
    its state dict and its behaviour are DistributedDataParallel's."""

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "module":  # not set yet: looking through it would recurse
                raise
            return getattr(self.module, name)


class _FunctionReducer(MetricReducer):
    """Determined's function form of ``wrap_reducer``: values from ``update()``, reduced
    by ``fn`` over every worker's values."""

    def __init__(self, fn: Callable[[list[Any]], Any]) -> None:
        self._fn = fn
        self._values: list[Any] = []

    def update(self, value: Any) -> None:
        self._values.append(value)

    def reset(self) -> None:
        self._values = []

    def per_slot_reduce(self) -> Any:
        return self._values

    def cross_slot_reduce(self, per_slot_metrics: Any) -> Any:
        return self._fn([v for values in per_slot_metrics for v in values])
