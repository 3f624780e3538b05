"""``determined.keras``: Determined's TensorFlow Keras API, which hpcdet does not offer.
Importing it raises an ImportError that says what to use instead."""

from __future__ import annotations

MESSAGE = (
    "hpcdet has no determined.keras (TFKerasTrial, DeterminedCallback): hpcdet offers no "
    "TensorFlow Keras trial API. Train Keras from a Core API script instead (`with "
    "det.core.init() as core:` report with core.train.report_training_metrics() and "
    "report_validation_metrics(), checkpoint with core.checkpoint.store_path())"
)

raise ImportError(MESSAGE)
