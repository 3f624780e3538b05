"""Experiment configs: Determined's expconf plus hpcdet's ``slurm:`` and ``pbs:`` sections.

``load_experiment_config`` reads YAML, applies ``--config key=value`` overrides, checks every
field and reports all problems at once in one ``ConfigError``. The result keeps ``raw``, the
whole config with Determined's defaults filled in: trial code sees it as
``info.trial._config``, the daemon stores it, and ``ExperimentConfig.from_dict(raw)`` rebuilds
the same config.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hpcdet.config.hpc import PbsConfig, SlurmConfig, check_pbs, check_slurm
from hpcdet.config.hyperparameters import check_grid_counts, check_hyperparameters
from hpcdet.config.schema import (
    At,
    Bool,
    Custom,
    Int,
    Opaque,
    Problems,
    Spec,
    Str,
    StrList,
    check_mapping,
    show,
)
from hpcdet.config.searcher import SearcherConfig, check_length, check_searcher
from hpcdet.config.sections import (
    BindMount,
    CheckpointStorageConfig,
    EnvironmentConfig,
    ResourcesConfig,
    check_bind_mounts,
    check_checkpoint_storage,
    check_environment,
    check_integrations,
    check_resources,
)
from hpcdet.config.source import apply_overrides, parse_yaml, read_config_file
from hpcdet.errors import ConfigError

DEFAULT_PREEMPTION_TIMEOUT = 3600


# Determined's legacy form, a trial class: "model_def:MNistTrial", "pkg.module:Trial".
_TRIAL_CLASS = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")

# What a trial-class entrypoint runs: the torch launcher, one harness per slot.
TRIAL_CLASS_LAUNCHER = ("python3", "-m", "hpcdet.launch.torch_distributed", "--trial")


def trial_class(entrypoint: Any) -> str | None:
    """The ``module:Class`` an entrypoint names (Determined's legacy trial-class form), or
    ``None`` for a command."""
    if isinstance(entrypoint, str) and _TRIAL_CLASS.fullmatch(entrypoint.strip()):
        return entrypoint.strip()
    return None


def _entrypoint(value: Any, at: At) -> Any:
    if value is None:
        at.error("managed experiments require entrypoint; e.g. entrypoint: python3 train.py")
    elif isinstance(value, str) and value.strip():
        return value
    elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    else:
        at.error(
            "must be a command string (run with sh -c) or a non-empty list of strings,"
            f" got {show(value)}"
        )
    return None


_LENGTH_UNITS = ("batches", "records", "epochs")


def _check_trial_class(raw: dict[str, Any], at: At) -> None:
    """What a trial-class entrypoint needs that a script does not: a batch size the slots
    share, and a training length."""
    gbs = (raw["hyperparameters"] or {}).get("global_batch_size")
    slots = raw["resources"]["slots_per_trial"]
    where = at / "hyperparameters" / "global_batch_size"
    if gbs is None:
        where.error(f"the trial class {trial_class(raw['entrypoint'])} needs the "
                    "hyperparameter global_batch_size (records per batch, over all slots), "
                    "e.g. global_batch_size: 64")
    elif gbs.get("type") == "const":
        value = gbs.get("val")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            where.error(f"must be a positive integer, got {show(value)}")
        elif value % max(slots, 1):
            where.error(f"{value} is not divisible by resources.slots_per_trial ({slots}); "
                        f"each slot trains on global_batch_size / slots records per batch")
    searcher = raw["searcher"]
    if searcher is None:
        return
    timed = searcher.get("time_metric") in _LENGTH_UNITS and searcher.get("max_time")
    if searcher.get("max_length") is None and not timed:
        (at / "searcher").error(
            "a trial class trains for searcher.max_length (e.g. max_length: {epochs: 5}), or "
            "for max_time with time_metric batches, records or epochs; set one of them"
        )


def _period(value: Any, at: At) -> Any:
    if value is None:
        return {"batches": 0}
    if not isinstance(value, dict):
        at.error(f"must be one of {{batches|records|epochs: N}}, e.g. {{batches: 0}}; got"
                 f" {show(value)}")
        return {"batches": 0}
    return check_length(value, at, minimum_units=0) or {"batches": 0}


def _reproducibility(value: Any, at: At) -> dict[str, Any]:
    out = check_mapping(value, at, {"experiment_seed": Int(None, minimum=0)})
    if out["experiment_seed"] is None:
        # Determined seeds from the creation time; stored in raw, so reloads keep the same seed.
        out["experiment_seed"] = int(time.time()) % 2**31
    return out


def _preemption_timeout(value: Any, at: At) -> int:
    checked = Int(DEFAULT_PREEMPTION_TIMEOUT, minimum=1).check(value, at)
    return int(checked)


TOP_SPECS: dict[str, Spec] = {
    "name": Str(None),
    "description": Str(None),
    "labels": StrList([]),
    "data": Opaque({}),
    "workspace": Str(""),
    "project": Str(""),
    "entrypoint": Custom(_entrypoint),
    "hyperparameters": Custom(check_hyperparameters),
    "searcher": Custom(check_searcher),
    "resources": Custom(check_resources),
    "max_restarts": Int(5, minimum=0),
    "checkpoint_storage": Custom(check_checkpoint_storage),
    "min_validation_period": Custom(_period),
    "min_checkpoint_period": Custom(_period),
    "environment": Custom(check_environment),
    "bind_mounts": Custom(check_bind_mounts),
    "reproducibility": Custom(_reproducibility),
    "records_per_epoch": Int(0, minimum=0),
    "preemption_timeout": Custom(_preemption_timeout),
    "perform_initial_validation": Bool(False),
    "scheduling_unit": Int(100, minimum=1),
    "checkpoint_policy": Str("best", choices=("best", "all", "none")),
    "debug": Bool(False),
    "log_policies": Opaque(None, kind=list),
    "retention_policy": Opaque(None),
    "profiling": Opaque({}),
    "optimizations": Opaque({}),
    "tensorboard_storage": Opaque(None),
    "integrations": Custom(check_integrations),
    "security": Opaque(None),
    "internal": Opaque(None),
    "data_layer": Opaque(None),
    "slurm": Custom(check_slurm),
    "pbs": Custom(check_pbs),
}


def validate_experiment(data: Any, problems: Problems) -> dict[str, Any]:
    """The config with every default filled in; problems are added to ``problems``."""
    at = At(problems)
    if data is not None and not isinstance(data, dict):
        at.error(f"the config must be a mapping (name: ..., entrypoint: ...), got {show(data)}")
        data = {}
    data = data or {}
    raw = check_mapping(data, at, TOP_SPECS)
    if raw["name"] is None and not problems:
        # Only a valid config is named: the name hashes the whole document.
        raw["name"] = default_name(data)
    _cross_checks(raw, at)
    return raw


def _cross_checks(raw: dict[str, Any], at: At) -> None:
    if bool(raw["workspace"]) != bool(raw["project"]):
        missing = "project" if raw["workspace"] else "workspace"
        (at / missing).error("workspace and project must both be set or both be left out")
    if trial_class(raw["entrypoint"]):
        _check_trial_class(raw, at)
    searcher = raw["searcher"]
    if searcher is not None and searcher["name"] == "grid":
        check_grid_counts(raw["hyperparameters"], at / "hyperparameters")
    slots = raw["resources"]["slots_per_trial"]
    max_slots = raw["resources"]["max_slots"]
    if max_slots is not None and max_slots < max(slots, 1):
        (at / "resources" / "max_slots").error(
            f"{max_slots} is fewer than one trial's slots (resources.slots_per_trial: {slots}),"
            " so no trial could ever run; raise it or leave it out")
    packing = raw["resources"]["packing"]
    if packing is not None and packing["slots"] is not None and slots > packing["slots"]:
        (at / "resources" / "packing" / "slots").error(
            f"{packing['slots']} is fewer than one trial's slots (resources.slots_per_trial: "
            f"{slots}); an allocation holds one or more whole trials on one node")
    for section in ("slurm", "pbs"):
        per_node = raw[section]["slots_per_node"]
        if per_node and slots > per_node and slots % per_node:
            (at / section / "slots_per_node").error(
                f"resources.slots_per_trial ({slots}) must be a multiple of slots_per_node"
                f" ({per_node}) when a trial spans several nodes"
            )


_ADVERBS = (
    "amply", "boldly", "calmly", "deftly", "eagerly", "fairly", "gladly", "highly",
    "keenly", "lively", "merrily", "neatly", "openly", "quietly", "rarely", "smartly",
)
_ADJECTIVES = (
    "able", "brave", "clever", "daring", "early", "famous", "gentle", "happy",
    "jolly", "kind", "lucky", "modern", "noble", "proud", "quick", "witty",
)
_NOUNS = (
    "badger", "crane", "dolphin", "eagle", "falcon", "gecko", "heron", "ibis",
    "jaguar", "koala", "lemur", "marmot", "newt", "otter", "puffin", "wombat",
)


def default_name(data: dict[str, Any]) -> str:
    """``Experiment (<adverb-adjective-noun>)``, Determined's shape, derived from the config.

    The same config always gets the same name, so tests and re-submissions are stable.
    """
    text = json.dumps(data, sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode()).digest()
    words = (_ADVERBS[digest[0] % 16], _ADJECTIVES[digest[1] % 16], _NOUNS[digest[2] % 16])
    return f"Experiment ({'-'.join(words)})"


@dataclass(frozen=True)
class ExperimentConfig:
    """A validated experiment config. ``raw`` is the source of truth; the rest is derived from it.

    ``hyperparameters`` is the normalised section (every leaf ``{"type": ..., ...}``, nested
    groups as plain mappings); ``experiment_seed`` is filled from the clock when not given.
    """

    name: str
    entrypoint: str | list[str]
    searcher: SearcherConfig
    description: str | None = None
    labels: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    max_restarts: int = 5
    checkpoint_storage: CheckpointStorageConfig | None = None
    environment: EnvironmentConfig = field(default_factory=EnvironmentConfig)
    bind_mounts: list[BindMount] = field(default_factory=list)
    experiment_seed: int = 0
    preemption_timeout: int = DEFAULT_PREEMPTION_TIMEOUT
    records_per_epoch: int = 0
    workspace: str = ""
    project: str = ""
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    pbs: PbsConfig = field(default_factory=PbsConfig)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def trials_at_once(self) -> int | None:
        """resources.max_slots as whole trials at once (None: no cap)."""
        cap = self.resources.max_slots
        return None if cap is None else cap // max(self.resources.slots_per_trial, 1)

    def checkpoint_dir(self, default: Path) -> Path:
        """Where the experiment's checkpoints go (each is ``<dir>/<uuid>``); ``default``, the
        state directory's, when the config names no storage of its own."""
        storage = self.checkpoint_storage
        if storage is None or storage.is_default:
            return default
        if storage.type == "directory" and storage.container_path:
            return Path(storage.container_path)
        base = Path(storage.host_path or default)
        return base / storage.storage_path if storage.storage_path else base

    @property
    def is_trial_class(self) -> bool:
        """Whether the entrypoint names a trial class (the PyTorch API), not a command."""
        return trial_class(self.entrypoint) is not None

    @property
    def command(self) -> str | list[str]:
        """What the harness runs: the entrypoint, or for a trial class the torch launcher
        with ``--trial``."""
        spec = trial_class(self.entrypoint)
        return [*TRIAL_CLASS_LAUNCHER, spec] if spec else self.entrypoint

    def to_dict(self) -> dict[str, Any]:
        """The full config with defaults filled in (a deep copy of ``raw``), JSON-compatible."""
        return copy.deepcopy(self.raw)

    def filled(self, section: str, **values: Any) -> ExperimentConfig:
        """The config with ``values`` set in ``section``, typed and raw alike: hpcdet's fill-ins
        after the one validation of a create (the interpreter chosen, the checkpoint a warm
        start resumes). The keys are the section's own, so no parse is needed again."""
        raw = copy.deepcopy(self.raw)
        raw[section].update(values)
        part = replace(getattr(self, section), **values)
        return replace(self, raw=raw, **{section: part})

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ExperimentConfig:
        """Rebuild from ``to_dict()`` output; raises ``ConfigError`` if it is not a valid config."""
        problems = Problems()
        checked = validate_experiment(copy.deepcopy(raw), problems)
        if problems:
            raise ConfigError(problems.items, source="stored experiment config")
        return cls._from_raw(checked)

    @classmethod
    def _from_raw(cls, raw: dict[str, Any]) -> ExperimentConfig:
        resources = ResourcesConfig.from_raw(raw["resources"])
        storage = raw["checkpoint_storage"]
        device = "cuda" if resources.slots_per_trial > 0 else "cpu"
        return cls(
            name=raw["name"],
            entrypoint=copy.deepcopy(raw["entrypoint"]),
            searcher=SearcherConfig.from_raw(raw["searcher"]),
            description=raw["description"],
            labels=list(raw["labels"]),
            data=copy.deepcopy(raw["data"]),
            hyperparameters=copy.deepcopy(raw["hyperparameters"]),
            resources=resources,
            max_restarts=raw["max_restarts"],
            checkpoint_storage=CheckpointStorageConfig.from_raw(storage) if storage else None,
            environment=EnvironmentConfig.from_raw(raw["environment"], device),
            bind_mounts=[BindMount.from_raw(m) for m in raw["bind_mounts"]],
            experiment_seed=raw["reproducibility"]["experiment_seed"],
            preemption_timeout=raw["preemption_timeout"],
            records_per_epoch=raw["records_per_epoch"],
            workspace=raw["workspace"],
            project=raw["project"],
            slurm=SlurmConfig.from_raw(raw["slurm"]),
            pbs=PbsConfig.from_raw(raw["pbs"]),
            raw=copy.deepcopy(raw),
        )


def load_experiment_config(source: str | Path, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Load and validate an experiment config.

    Args:
        source: a path to a YAML file, or YAML text (a ``str`` containing a newline).
        overrides: ``--config`` values, ``"dotted.key=value"`` with the value parsed as YAML.

    Raises:
        ConfigError: listing every problem found, each with its YAML path and line.
    """
    text, label = _read_source(source)
    parsed = parse_yaml(text)
    problems = Problems(origins=parsed.origins, items=parsed.problems)
    if not parsed.readable:
        raise ConfigError(problems.items, source=label)
    document = parsed.data
    if isinstance(document, dict) or document is None:
        document = document or {}
        apply_overrides(document, overrides, parsed.origins, problems)
    raw = validate_experiment(document, problems)
    if problems:
        raise ConfigError(problems.items, source=label)
    return ExperimentConfig._from_raw(raw)


def _read_source(source: str | Path) -> tuple[str, str]:
    if isinstance(source, str) and "\n" in source:
        return source, "experiment config"
    path = Path(source)
    label = f"experiment config {path}"
    try:
        return read_config_file(path), label
    except FileNotFoundError:
        problem = f"{path}: no such file; pass the path of the experiment's YAML config"
    except IsADirectoryError:
        problem = f"{path}: is a directory; pass the path of the experiment's YAML config"
    except UnicodeDecodeError:
        problem = f"{path}: is not a UTF-8 text file"
    except ValueError as err:
        problem = str(err)
    except OSError as err:
        problem = f"{path}: cannot be read ({err.strerror or err})"
    raise ConfigError([problem], source=label)


def smoke_config(raw: dict[str, Any]) -> dict[str, Any]:
    """`experiment create --test`: one trial, no restarts, trained for one unit of its length
    (a 0.38 ``max_time`` becomes 1 of its ``time_metric``), as a check before the real run."""
    searcher = raw["searcher"]
    length = searcher.get("max_length")
    short: dict[str, Any] = {
        "name": "single", "metric": searcher["metric"],
        "smaller_is_better": searcher.get("smaller_is_better", True),
    }
    if isinstance(length, dict):
        short["max_length"] = dict.fromkeys(length, 1)
    elif length is not None:
        short["max_length"] = 1
    elif searcher.get("max_time") is not None:
        short.update(max_time=1, time_metric=searcher.get("time_metric"))
    return {**raw, "name": f"{raw.get('name') or 'experiment'} (test)", "max_restarts": 0,
            "searcher": short}
