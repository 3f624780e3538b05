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
_TRIAL_API = ("it is read by the PyTorch API (a trial-class entrypoint, or det.pytorch.Trainer "
              "in the script); a Core API script ignores it, as Determined's does")
_RECORDS_PER_EPOCH = ("epochs are counted from the training data loader's length, as in "
                      "Determined since 0.21")
# optimizations keys det.pytorch applies; the others are Horovod's or Apex's.
OPTIMIZATIONS_APPLIED = ("aggregation_frequency", "average_aggregated_gradients")
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
    ("resources.is_single_node", "set slurm.slots_per_node / pbs.slots_per_node to the trial's"
     " slots to keep it on one node"),
    ("resources.native_parallel", "it was removed from Determined"),
    ("records_per_epoch", _RECORDS_PER_EPOCH),
    ("profiling", "hpcdet has no profiler"),
    ("tensorboard_storage", "TensorBoard files stay where the trial writes them"),
    ("log_policies", _NOT_KEPT),
    ("retention_policy", _NOT_KEPT),
    ("integrations.pachyderm", _NOT_KEPT),
    ("security", _NOT_KEPT),
    ("data_layer", _NOT_KEPT),
    ("workspace", "hpcdet has no workspaces or projects; it is stored with the experiment, and"
     " nothing lists, filters or groups by it"),
    ("project", "hpcdet has no workspaces or projects; it is stored with the experiment, and"
     " nothing lists, filters or groups by it"),
    ("checkpoint_storage.container_path", "a trial in an image sees host_path at its own path"),
    ("checkpoint_storage.propagation", "a trial in an image sees host_path at its own path"),
    ("checkpoint_storage.checkpoint_path", "checkpoints go to host_path/storage_path"),
    ("checkpoint_storage.tensorboard_path", "TensorBoard files stay where the trial writes"
     " them"),
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


# Defaults the config is filled with that are not the user's words.
_DEFAULTS = {"checkpoint_storage.propagation": "rprivate"}


# Applied inside an image only.
IMAGE_ONLY = ("environment.force_pull_image", "environment.registry_auth", "bind_mounts")


# Applied by the PyTorch API only (hpcdet.pytorch's Trainer reads them from the config).
TRIAL_API_ONLY = ("min_validation_period", "min_checkpoint_period", "perform_initial_validation",
                  "scheduling_unit")


def _optimizations(raw: Mapping[str, Any], trial_api: bool) -> list[tuple[str, str]]:
    section = raw.get("optimizations") or {}
    if not isinstance(section, Mapping):
        return []
    return [(f"optimizations.{key}", _TRIAL_API if key in OPTIMIZATIONS_APPLIED
             else "hpcdet's PyTorch API trains with torch's DistributedDataParallel, without "
             "Horovod or Apex") for key in section
            if not (trial_api and key in OPTIMIZATIONS_APPLIED)]


def not_applied(raw: Mapping[str, Any], trial_api: bool = False) -> list[str]:
    """One line per key the config (``ExperimentConfig.raw``) sets that hpcdet does not apply;
    ``trial_api``: the entrypoint is a trial class, which applies the PyTorch API's keys."""
    keys = list(NOT_APPLIED) + _optimizations(raw, trial_api)
    if not trial_api:
        keys += [(path, _TRIAL_API) for path in TRIAL_API_ONLY
                 if not (path == "scheduling_unit" and raw.get(path) == 100)]
        keys.append(("debug", "it turns on debug logging in the harness of a trial-class"
                     " entrypoint; a script sets its own logging, as under Determined"))
    if not _set(_value(raw, "environment.image")):
        keys += [(path, _NO_IMAGE) for path in IMAGE_ONLY]
    return [f"{path} is accepted but not applied: {why}"
            for path, why in keys
            if _set(_value(raw, path)) and _value(raw, path) != _DEFAULTS.get(path)]


BATCH_SECTIONS = ("slurm", "pbs")


def other_sections(raw: Mapping[str, Any], section: str, backend: str) -> list[str]:
    """A line for each batch-system section the config sets other than ``section``, the one
    the ``backend`` in use reads."""
    return [f"{name}: is accepted but not applied: the backend in use is {backend}"
            for name in BATCH_SECTIONS if name != section and _set(raw.get(name))]
