"""``determined.keras``: Determined's TensorFlow Keras API, which hpcdet does not offer. The
module imports (every module of the trial's tree does), and any name taken from it raises an
ImportError that says what to use instead."""

from __future__ import annotations

from ._refused import refusing

# Determined's names, each answered by __getattr__.
_NAMES = ("DeterminedCallback", "TFKerasTrial", "TFKerasTrialContext", "TensorBoard",
          "callbacks", "load_model_from_checkpoint_path")
__all__ = list(_NAMES)

MESSAGE = (
    "hpcdet has no determined.keras (TFKerasTrial, DeterminedCallback): hpcdet offers no "
    "TensorFlow Keras trial API. Train Keras from a Core API script instead (`with "
    "det.core.init() as core:` report with core.train.report_training_metrics() and "
    "report_validation_metrics(), checkpoint with core.checkpoint.store_path())"
)


__getattr__ = refusing(MESSAGE)
