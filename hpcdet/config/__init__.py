"""Experiment and cluster configuration: load, validate (all problems at once), fill defaults."""

from __future__ import annotations

from hpcdet.config.cluster import ClusterConfig, load_cluster_config
from hpcdet.config.experiment import ExperimentConfig, load_experiment_config, smoke_config
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
