"""Experiment and cluster configuration: load, validate (all problems at once), fill defaults."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hpcdet.config.cluster import ClusterConfig, load_cluster_config
    from hpcdet.config.experiment import (
        ExperimentConfig,
        load_experiment_config,
        smoke_config,
    )
    from hpcdet.config.hpc import PbsConfig, SlurmConfig
    from hpcdet.config.schema import format_walltime, parse_walltime
    from hpcdet.config.searcher import SearcherConfig
    from hpcdet.config.sections import (
        BindMount,
        CheckpointStorageConfig,
        EnvironmentConfig,
        ResourcesConfig,
    )

__all__ = [
    "smoke_config",
    "BindMount",
    "CheckpointStorageConfig",
    "ClusterConfig",
    "EnvironmentConfig",
    "ExperimentConfig",
    "PbsConfig",
    "ResourcesConfig",
    "SearcherConfig",
    "SlurmConfig",
    "format_walltime",
    "load_cluster_config",
    "load_experiment_config",
    "parse_walltime",
]

# Where each name lives. They are imported when first asked for, so that a command importing
# one submodule (the ids' limits, the cluster file) does not load every config module and YAML.
_MODULES = {
    "ClusterConfig": "cluster", "load_cluster_config": "cluster",
    "ExperimentConfig": "experiment", "load_experiment_config": "experiment",
    "smoke_config": "experiment", "PbsConfig": "hpc", "SlurmConfig": "hpc",
    "format_walltime": "schema", "parse_walltime": "schema", "SearcherConfig": "searcher",
    "BindMount": "sections", "CheckpointStorageConfig": "sections",
    "EnvironmentConfig": "sections", "ResourcesConfig": "sections",
}

if not TYPE_CHECKING:  # mypy checks the imports above, and no name beyond them

    def __getattr__(name: str) -> Any:
        module = _MODULES.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value
