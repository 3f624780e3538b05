"""``det.pytorch.PyTorchCallback``: code the trial's loop runs at points of its life."""

from __future__ import annotations

from typing import Any


class PyTorchCallback:
    """Override the hooks you need; ``build_callbacks()`` returns them by name. The name keys
    the callback's ``state_dict()`` in the checkpoint (under ``callbacks``)."""

    def on_trial_startup(self, first_batch_idx: int, checkpoint_uuid: str | None) -> None:
        """Once per process, before training; ``first_batch_idx`` is where training resumes."""

    def on_trial_shutdown(self) -> None:
        """Once per process, when the loop ends (also by an exception)."""

    def on_training_start(self) -> None:
        """Before the first training batch of this process."""

    def on_training_epoch_start(self, epoch_idx: int) -> None:
        """Before the first batch of each epoch (also of an epoch resumed midway)."""

    def on_training_epoch_end(self, epoch_idx: int) -> None:
        """After the last batch of each epoch."""

    def on_training_workload_end(
        self, avg_metrics: dict[str, Any], batch_metrics: list[dict[str, Any]]
    ) -> None:
        """After each reporting period, with its averaged and its per-batch metrics."""

    def on_validation_start(self) -> None:
        """Before each validation."""

    def on_validation_end(self, metrics: dict[str, Any]) -> None:
        """After each validation, with its metrics."""

    def on_validation_epoch_start(self) -> None:
        """Deprecated in Determined; called with :meth:`on_validation_start`."""

    def on_validation_epoch_end(self, outputs: list[Any]) -> None:
        """Deprecated in Determined; called after validation with each batch's metrics."""

    def on_checkpoint_load_start(self, checkpoint: dict[str, Any]) -> None:
        """Before a checkpoint's state is loaded, with the loaded ``state-dict.pth``."""

    def on_checkpoint_save_start(self, checkpoint: dict[str, Any]) -> None:
        """Before ``state-dict.pth`` is written; the callback may add to ``checkpoint``."""

    def on_checkpoint_write_end(self, checkpoint_dir: str) -> None:
        """After the files are written, before they are reported (chief only)."""

    def on_checkpoint_upload_end(self, uuid: str) -> None:
        """After the checkpoint is stored (chief only)."""

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        """Deprecated in Determined: :meth:`on_checkpoint_write_end`."""

    def state_dict(self) -> dict[str, Any]:
        """What to keep in checkpoints."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
