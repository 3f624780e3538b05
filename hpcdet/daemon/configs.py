"""Experiment configs as the daemon uses them: parsed once per process and stored config
(``ExperimentRecord.config``, cached by the store)."""

from __future__ import annotations

from hpcdet.config import ExperimentConfig
from hpcdet.records import ExperimentRecord as Experiment


class Configs:
    def get(self, exp: Experiment) -> ExperimentConfig:
        return exp.config

    def forget(self, exp_id: int) -> None:
        """The stored config changed (a queue update, a continue with overrides): the store's
        cache already tells by the stored text."""
