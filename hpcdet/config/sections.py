"""The ``resources``, ``checkpoint_storage``, ``environment`` and ``bind_mounts`` sections."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from hpcdet.config.directives import problem as directive_problem
from hpcdet.config.hpc import Directive
from hpcdet.config.schema import (
    At,
    Bool,
    Custom,
    Int,
    Number,
    Opaque,
    Spec,
    Str,
    StrList,
    Walltime,
    check_mapping,
    did_you_mean,
    is_int,
    is_int64,
    show,
)
from hpcdet.containers import PROPAGATIONS

# ---------------------------------------------------------------------------------- resources

_MEMORY_SIZE = re.compile(r"^([0-9]*[.])?[0-9]+ ?(([kmgtpKMGTP]([iI]?[bB])?)|[bB])?$")


def _shm_size(value: Any, at: At) -> Any:
    if value is None or (is_int64(value) and value >= 0):
        return value
    if isinstance(value, str) and _MEMORY_SIZE.match(value):
        return value
    at.error(f"must be a memory size such as 4096 or '4G', got {show(value)}")
    return None


_PACKING_SPECS: dict[str, Spec] = {
    "slots": Int(None, minimum=1),
    "walltime": Walltime(None),
    "allocations": Int(1, minimum=1),
}


def _packing(value: Any, at: At) -> dict[str, Any] | None:
    """hpcdet's own: the trials run inside ``allocations`` pilot jobs of ``slots`` slots for
    ``walltime`` each, one trial after another (hpcdet.launch.pilot)."""
    if value is None:
        return None
    out = check_mapping(value, at, _PACKING_SPECS, required={
        "slots": "the slots each allocation holds, e.g. slots: 4 (a node's GPUs or CPUs)",
        "walltime": "how long each allocation runs, e.g. walltime: '2:00:00'"})
    return out


RESOURCES_SPECS: dict[str, Spec] = {
    "slots_per_trial": Int(1, minimum=0),
    # An unmapped pool name is the Slurm partition itself.
    "resource_pool": Directive("names", ""),
    "priority": Int(None, minimum=1, maximum=99),
    "weight": Number(1, minimum=0),
    "max_slots": Int(None, minimum=0),
    "shm_size": Custom(_shm_size),
    "is_single_node": Bool(False),
    "devices": Opaque([], kind=list),
    "agent_label": Str(None),
    "native_parallel": Bool(False),
    "packing": Custom(_packing),
}
_RESOURCES_REMOVED = {
    "slots": 'additionalProperties "slots" not allowed; use resources.slots_per_trial'
    " (the number of GPUs, or CPU slots, each trial gets)",
}


def check_resources(value: Any, at: At) -> dict[str, Any]:
    return check_mapping(value, at, RESOURCES_SPECS, removed=_RESOURCES_REMOVED)


@dataclass(frozen=True)
class ResourcesConfig:
    """``priority`` None means the pool's default (42); ``weight`` is stored but not applied."""

    slots_per_trial: int = 1
    resource_pool: str = ""
    priority: int | None = None
    weight: float = 1
    max_slots: int | None = None
    shm_size: int | str | None = None
    is_single_node: bool = False
    devices: list[Any] = field(default_factory=list)
    # {slots, walltime, allocations} when trials run packed into pilot allocations.
    packing: dict[str, Any] | None = None

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> ResourcesConfig:
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__})


# ------------------------------------------------------------------------- checkpoint_storage

_STORAGE_COMMON: dict[str, Spec] = {
    "type": Str(),
    "save_experiment_best": Int(0, minimum=0),
    "save_trial_best": Int(1, minimum=0),
    "save_trial_latest": Int(1, minimum=0),
}
_STORAGE_SPECS: dict[str, dict[str, Spec]] = {
    "shared_fs": {
        **_STORAGE_COMMON,
        "host_path": Str(None),
        "storage_path": Str(None),
        "propagation": Str("rprivate"),
        "container_path": Str(None),
        "checkpoint_path": Str(None),
        "tensorboard_path": Str(None),
    },
    "directory": {**_STORAGE_COMMON, "container_path": Str(None)},
}
_UNSUPPORTED_STORAGE = ("s3", "gcs", "azure")


def check_checkpoint_storage(value: Any, at: At) -> dict[str, Any] | None:
    """``None`` when absent: the daemon puts checkpoints under its state directory."""
    if value is None:
        return None
    if not isinstance(value, dict):
        at.error(f"must be a mapping, e.g. {{type: shared_fs, host_path: /scratch/me}}; got"
                 f" {show(value)}")
        return None
    kind = value.get("type")
    if kind is None:
        # As several of Determined's examples write it: only the GC settings, over the
        # default storage (the cluster's, in Determined; the daemon's state directory here).
        gc_only = {k: v for k, v in _STORAGE_COMMON.items() if k != "type"}
        for key in value:
            if key not in _STORAGE_COMMON:
                (at / key).error("needs the storage's type: without one, checkpoint_storage may"
                                 f" only set {', '.join(gc_only)}; add type: shared_fs")
        return check_mapping({k: v for k, v in value.items() if k in gc_only}, at, gc_only)
    if kind in _UNSUPPORTED_STORAGE:
        (at / "type").error(
            f"{kind} checkpoint storage is not supported on hpcdet yet; use type: shared_fs with"
            " a host_path on a filesystem every compute node mounts"
        )
        return None
    if not isinstance(kind, str) or kind not in _STORAGE_SPECS:
        (at / "type").error(
            f"must be shared_fs or directory, got {show(kind)};"
            " e.g. {type: shared_fs, host_path: /scratch/me/checkpoints}"
        )
        return None
    out = check_mapping(value, at, _STORAGE_SPECS[str(kind)])
    if kind == "shared_fs":
        _check_shared_fs(out, at)
    else:
        _check_absolute(out["container_path"], at / "container_path", "/scratch/me/checkpoints")
    return out


def _check_absolute(path: str | None, at: At, example: str) -> None:
    if path is None:
        at.error(f"is required: an absolute path, e.g. {example}")
    elif not posixpath.isabs(path):
        at.error(f"must be an absolute path, got {path!r}")


def _check_shared_fs(out: dict[str, Any], at: At) -> None:
    host, storage = out["host_path"], out["storage_path"]
    _check_absolute(host, at / "host_path", "/scratch/me")
    if storage is None or host is None or not posixpath.isabs(host):
        return
    inside = posixpath.normpath(posixpath.join(host, storage))
    root = posixpath.normpath(host)
    if inside != root and not inside.startswith(root.rstrip("/") + "/"):
        (at / "storage_path").error(
            "storage_path must either be a relative directory or a subdirectory of host_path;"
            f" got {storage!r} with host_path {host!r}"
        )


@dataclass(frozen=True)
class CheckpointStorageConfig:
    type: str | None  # None: GC settings alone, over the default storage
    host_path: str | None = None
    storage_path: str | None = None
    container_path: str | None = None
    propagation: str = "rprivate"
    save_experiment_best: int = 0
    save_trial_best: int = 1
    save_trial_latest: int = 1

    @property
    def is_default(self) -> bool:
        """Only GC settings were given: the checkpoints go to the default storage."""
        return self.type is None

    @property
    def root(self) -> str:
        """The directory checkpoints are written into."""
        if self.type == "directory":
            return str(self.container_path)
        return posixpath.normpath(posixpath.join(str(self.host_path), self.storage_path or ""))

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> CheckpointStorageConfig:
        return cls(**{k: raw.get(k, default) for k, default in _STORAGE_DEFAULTS.items()})


_STORAGE_DEFAULTS: dict[str, Any] = {
    "type": None, "host_path": None, "storage_path": None, "container_path": None,
    "propagation": "rprivate", "save_experiment_best": 0, "save_trial_best": 1,
    "save_trial_latest": 1,
}

# -------------------------------------------------------------------------------- environment

DEVICES = ("cpu", "cuda", "rocm")
# Determined's other name for cuda (official examples such as iris_tf_keras use it).
_GPU_ALIAS = "gpu"


def _gpu_is_cuda(value: dict[str, Any], at: At) -> dict[str, Any]:
    """A per-device map with Determined's ``gpu`` key read as ``cuda``."""
    if _GPU_ALIAS not in value:
        return value
    value = dict(value)
    gpu = value.pop(_GPU_ALIAS)
    if value.get("cuda") not in (None, gpu):
        (at / _GPU_ALIAS).error("gpu is Determined's other name for cuda, and both are set to"
                                " different values; keep one of them")
    value["cuda"] = gpu
    return value


def _image(value: Any, at: At) -> dict[str, str | None] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return dict.fromkeys(DEVICES, value)
    if isinstance(value, dict):
        value = _gpu_is_cuda(value, at)
        specs: dict[str, Spec] = {d: Str(None) for d in DEVICES}
        per_device = check_mapping(value, at, specs)
        return {d: per_device[d] for d in DEVICES}
    at.error(f"must be an image name or {{cpu: ..., cuda: ..., rocm: ...}}, got {show(value)}")
    return None


def _variable_list(value: Any, at: At) -> list[str]:
    if not isinstance(value, list):
        at.error(f"must be a list of 'NAME=value' strings, got {show(value)}")
        return []
    good: list[str] = []
    for i, item in enumerate(value):
        name = item.partition("=")[0] if isinstance(item, str) else ""
        if not isinstance(item, str) or "=" not in item or not name.strip():
            (at / i).error(f"must be 'NAME=value', e.g. 'OMP_NUM_THREADS=4'; got {show(item)}")
        elif (said := directive_problem(name, "variable")) is not None:
            # The batch script exports it: the name is a shell word of its own.
            (at / i).error(f"the variable name {name!r} {said}")
        else:
            good.append(item)
    return good


def _environment_variables(value: Any, at: At) -> dict[str, list[str]]:
    if value is None:
        return {d: [] for d in DEVICES}
    if isinstance(value, dict):
        value = _gpu_is_cuda(value, at)
        for key in value:
            if key not in DEVICES:
                (at / key).error(f"unknown key; {did_you_mean(key, DEVICES)}")
        return {d: _variable_list(value.get(d) or [], at / d) for d in DEVICES}
    variables = _variable_list(value, at)
    return {d: list(variables) for d in DEVICES}


def _ports(value: Any, at: At) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        at.error(f"must be a mapping of names to port numbers, got {show(value)}")
        return {}
    for name, port in value.items():
        if not (is_int(port) and 1 <= port <= 65535):
            (at / name).error(f"must be a port number between 1 and 65535, got {show(port)}")
    return dict(value)


# Docker's AuthConfig, as Determined takes it.
_REGISTRY_AUTH_SPECS: dict[str, Spec] = {
    k: Str(None) for k in ("username", "password", "auth", "email", "serveraddress",
                           "identitytoken", "registrytoken")
}


def _registry_auth(value: Any, at: At) -> dict[str, Any] | None:
    if value is None:
        return None
    checked = check_mapping(value, at, _REGISTRY_AUTH_SPECS)
    return {k: v for k, v in checked.items() if v is not None} if checked else None


def _python(value: Any, at: At) -> str | None:
    if value is None or (isinstance(value, str) and value.strip()):
        return value
    at.error(f"must be the path of a Python interpreter, e.g. /opt/venvs/train/bin/python3; "
             f"got {show(value)}")
    return None


ENVIRONMENT_SPECS: dict[str, Spec] = {
    "image": Custom(_image),
    "environment_variables": Custom(_environment_variables),
    "force_pull_image": Bool(False),
    "registry_auth": Custom(_registry_auth),
    "ports": Custom(_ports),
    "proxy_ports": Opaque([], kind=list),
    "pod_spec": Opaque(None),
    "add_capabilities": StrList([]),
    "drop_capabilities": StrList([]),
    # hpcdet's own: the interpreter trials run with when there is no image (default: the
    # python3 on PATH where the experiment was created).
    "python": Custom(_python),
}


def check_environment(value: Any, at: At) -> dict[str, Any]:
    return check_mapping(value, at, ENVIRONMENT_SPECS)


@dataclass(frozen=True)
class EnvironmentConfig:
    """The container image and variables for the trial's device type.

    ``device`` is ``cuda`` when trials get slots (hpcdet cannot tell GPU from CPU partitions at
    load time), else ``cpu``; ``images`` and ``variables_by_device`` keep every flavour.
    """

    image: str | None = None
    variables: dict[str, str] = field(default_factory=dict)
    images: dict[str, str | None] = field(default_factory=dict)
    variables_by_device: dict[str, dict[str, str]] = field(default_factory=dict)
    force_pull_image: bool = False
    registry_auth: dict[str, Any] = field(default_factory=dict)
    python: str | None = None

    @property
    def has_image(self) -> bool:
        """Whether trials run in an image (on any device: see ``image_for``)."""
        return any(self.images.values())

    def image_for(self, device: str) -> str | None:
        """The image of a trial on ``device`` (cpu, cuda, rocm); with none of its kind, another
        kind's (a CUDA image runs on CPU nodes too), so that a config naming any image always
        runs in one."""
        order = [device, "cuda", "rocm", "cpu"]
        return next((self.images[d] for d in order if self.images.get(d)), None)

    @classmethod
    def from_raw(cls, raw: dict[str, Any], device: str) -> EnvironmentConfig:
        images = raw["image"] or dict.fromkeys(DEVICES)
        order = [device, "cuda", "cpu", "rocm"]
        image = next((images[d] for d in order if images.get(d)), None)
        by_device = {
            d: dict(v.split("=", 1) for v in raw["environment_variables"][d]) for d in DEVICES
        }
        return cls(
            image=image,
            variables=dict(by_device[device]),
            images=dict(images),
            variables_by_device=by_device,
            force_pull_image=raw["force_pull_image"],
            registry_auth=dict(raw["registry_auth"] or {}),
            python=raw.get("python"),
        )


# -------------------------------------------------------------------------------- bind_mounts


def _container_path(value: Any, at: At) -> Any:
    if value is None:
        at.error("is required: where the directory appears inside the trial, e.g. /data")
    elif not isinstance(value, str):
        at.error(f"must be a string, got {show(value)}")
    elif value.strip() == ".":
        at.error('container_path must not be "."; mount into a subdirectory such as ./data')
    else:
        return value
    return None


def _host_path(value: Any, at: At) -> Any:
    if isinstance(value, str) and posixpath.isabs(value):
        return value
    if value is None:
        at.error("is required: an absolute path on the shared filesystem, e.g. /scratch/data")
    else:
        at.error(f"host_path must be an absolute path, got {show(value)}")
    return None


BIND_MOUNT_SPECS: dict[str, Spec] = {
    "host_path": Custom(_host_path),
    "container_path": Custom(_container_path),
    "read_only": Bool(False),
    "propagation": Str("rprivate", choices=PROPAGATIONS),
}


def check_bind_mounts(value: Any, at: At) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        at.error(f"must be a list of {{host_path, container_path}} mappings, got {show(value)}")
        return []
    return [check_mapping(item, at / i, BIND_MOUNT_SPECS) for i, item in enumerate(value)]


@dataclass(frozen=True)
class BindMount:
    host_path: str
    container_path: str
    read_only: bool = False
    propagation: str = "rprivate"

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> BindMount:
        return cls(**raw)


# ------------------------------------------------------------------------------ integrations


def _webhook_ids(value: Any, at: At) -> list[int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(is_int(v) and v > 0 for v in value):
        at.error(f"must be a list of webhook ids (`hpcdet webhook list`), got {show(value)}")
        return None
    return list(value)


_WEBHOOKS_SPECS: dict[str, Spec] = {
    "webhook_id": Custom(_webhook_ids),
    "webhook_name": StrList(None),
    "exclude": Bool(False),
}


def _webhooks(value: Any, at: At) -> dict[str, Any] | None:
    return None if value is None else check_mapping(value, at, _WEBHOOKS_SPECS)


_INTEGRATIONS_SPECS: dict[str, Spec] = {"webhooks": Custom(_webhooks), "pachyderm": Opaque(None)}


def check_integrations(value: Any, at: At) -> dict[str, Any] | None:
    """Determined's ``integrations``: ``webhooks`` names the webhooks of mode SPECIFIC (and
    those an alert goes to) this experiment's events are sent to, or excludes it from all
    (``hpcdet.notify``); ``pachyderm`` is kept, not applied."""
    return None if value is None else check_mapping(value, at, _INTEGRATIONS_SPECS)
