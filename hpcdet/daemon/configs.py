"""Experiment configs as the daemon uses them: validated once per daemon and experiment."""

from __future__ import annotations

import json

from hpcdet.config import ExperimentConfig
from hpcdet.store.models import Experiment


class Configs:
    def __init__(self) -> None:
        self._by_id: dict[int, ExperimentConfig] = {}

    def get(self, exp: Experiment) -> ExperimentConfig:
        cfg = self._by_id.get(exp.id)
        if cfg is None:
            cfg = self._by_id[exp.id] = ExperimentConfig.from_dict(json.loads(exp.config_json))
        return cfg

    def forget(self, exp_id: int) -> None:
        """The stored config changed (a queue update, a continue with overrides)."""
        self._by_id.pop(exp_id, None)
