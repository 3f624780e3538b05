"""Keys of Determined's experiment config that hpcdet accepts, so that Determined configs load
unchanged, but does not apply. Nothing is ignored silently: `not_applied` names each one a
config sets, with why, and `hpcdet experiment create` prints them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_NO_CONTAINER = ("hpcdet runs containers with Apptainer, Singularity, Podman or Enroot, which"
                 " take no such setting")
_NO_IMAGE = ("it applies to a trial run in environment.image, and the config names no image; "
             "the trial runs in your own environment and sees the nodes' paths as they are")
_TRIAL_API = ("it is read by Determined's Trial APIs (PyTorchTrial), which hpcdet does not have"
              " yet; the Core API ignores it, as Determined's does")
_NOT_KEPT = "hpcdet keeps no such setting"

# (path, why) for every key accepted and not applied.
NOT_APPLIED: tuple[tuple[str, str], ...] = (
    ("environment.add_capabilities", _NO_CONTAINER),
    ("environment.drop_capabilities", _NO_CONTAINER),
    ("environment.pod_spec", "it is for Kubernetes"),
    ("environment.ports", "hpcdet proxies no ports to trials"),
    ("environment.proxy_ports", "hpcdet proxies no ports to trials"),
    ("resources.shm_size", _NO_CONTAINER + "; the nodes' /dev/shm is used"),
    ("resources.devices", _NO_CONTAINER),
    ("resources.agent_label", "there are no Determined agents; choose nodes with"
     " resources.resource_pool or slurm.partition / pbs.queue"),
    ("resources.max_slots", "the search's concurrency is searcher.max_concurrent_trials"),
    ("resources.is_single_node", "set slurm.slots_per_node / pbs.slots_per_node to the trial's"
     " slots to keep it on one node"),
    ("resources.native_parallel", "it was removed from Determined"),
    ("min_validation_period", _TRIAL_API),
    ("min_checkpoint_period", _TRIAL_API),
    ("records_per_epoch", _TRIAL_API),
    ("perform_initial_validation", _TRIAL_API),
    ("optimizations", _TRIAL_API),
    ("profiling", "hpcdet has no profiler"),
    ("tensorboard_storage", "TensorBoard files stay where the trial writes them"),
    ("log_policies", _NOT_KEPT),
    ("retention_policy", _NOT_KEPT),
    ("integrations", _NOT_KEPT),
    ("security", _NOT_KEPT),
    ("data_layer", _NOT_KEPT),
)


def _value(raw: Mapping[str, Any], path: str) -> Any:
    value: Any = raw
    for key in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _set(value: Any) -> bool:
    """Whether a value says anything (the defaults are empty, None or False)."""
    if isinstance(value, Mapping):
        return any(_set(v) for v in value.values())
    return value not in (None, False, "", [], ())


# Applied inside an image only.
IMAGE_ONLY = ("environment.force_pull_image", "environment.registry_auth", "bind_mounts")


def not_applied(raw: Mapping[str, Any]) -> list[str]:
    """One line per key the config (``ExperimentConfig.raw``) sets that hpcdet does not apply."""
    keys = list(NOT_APPLIED)
    if not _set(_value(raw, "environment.image")):
        keys += [(path, _NO_IMAGE) for path in IMAGE_ONLY]
    return [f"{path} is accepted but not applied: {why}"
            for path, why in keys if _set(_value(raw, path))]


BATCH_SECTIONS = ("slurm", "pbs")


def other_sections(raw: Mapping[str, Any], section: str, backend: str) -> list[str]:
    """A line for each batch-system section the config sets other than ``section``, the one
    the ``backend`` in use reads."""
    return [f"{name}: is accepted but not applied: the backend in use is {backend}"
            for name in BATCH_SECTIONS if name != section and _set(raw.get(name))]
