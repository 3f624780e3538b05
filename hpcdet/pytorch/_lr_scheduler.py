"""``det.pytorch.LRScheduler``: a torch LR scheduler and when the trial's loop steps it."""

from __future__ import annotations

import enum
from typing import Any


class LRScheduler:
    """A wrapped ``torch.optim.lr_scheduler`` (``context.wrap_lr_scheduler`` builds it).

    The loop steps it as ``step_mode`` says, every ``frequency`` epochs, batches or optimizer
    steps; with ``MANUAL_STEP`` the trial calls :meth:`step` itself. Its state is saved in
    every checkpoint either way.
    """

    class StepMode(enum.Enum):
        """When the loop steps the scheduler."""

        STEP_EVERY_EPOCH = 1
        STEP_EVERY_BATCH = 2
        MANUAL_STEP = 3
        STEP_EVERY_OPTIMIZER_STEP = 4

    def __init__(self, scheduler: Any, step_mode: StepMode, frequency: int = 1) -> None:
        if not isinstance(step_mode, LRScheduler.StepMode):
            raise TypeError(
                f"step_mode must be a det.pytorch.LRScheduler.StepMode, not {step_mode!r}"
            )
        if not isinstance(frequency, int) or isinstance(frequency, bool) or frequency < 1:
            raise ValueError(f"frequency must be a positive integer, not {frequency!r}")
        self._scheduler = scheduler
        self._step_mode = step_mode
        self._frequency = frequency

    @property
    def scheduler(self) -> Any:
        return self._scheduler

    @property
    def step_mode(self) -> StepMode:
        return self._step_mode

    @property
    def frequency(self) -> int:
        return self._frequency

    def get_last_lr(self) -> list[float]:
        return list(self._scheduler.get_last_lr())

    def step(self, *args: Any, **kwargs: Any) -> None:
        self._scheduler.step(*args, **kwargs)

    def state_dict(self) -> dict[str, Any]:
        return dict(self._scheduler.state_dict())

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._scheduler.load_state_dict(state_dict)

    def due(self, mode: StepMode, count: int) -> bool:
        """Whether the loop steps the scheduler now: at event ``mode`` whose ``count``-th
        occurrence (counting from 1) just happened."""
        return mode == self._step_mode and count % self._frequency == 0
