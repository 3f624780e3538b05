"""``det.pytorch.load_trial_from_checkpoint_path``: a trained trial back from its checkpoint,
for evaluation or inference on the login node or in a notebook."""

from __future__ import annotations

import importlib.util
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

from hpcdet.core._context import _dummy_init
from hpcdet.errors import TrialClassError
from hpcdet.pytorch._context import PyTorchTrialContext
from hpcdet.pytorch._state import CODE_DIR, LOAD_DATA_FILE, STATE_FILES, strip_module_prefix
from hpcdet.pytorch._trial import PyTorchTrial, load_trial_class


def _import_saved_class(path: Path, spec: str) -> type[PyTorchTrial]:
    """The trial class from the checkpoint's code/ copy. Its ``import determined`` gets
    hpcdet's shim unless a real Determined is installed (the shim goes last on the path, so
    it never shadows one)."""
    added = [str(path / CODE_DIR)]
    sys.path.insert(0, added[0])
    if importlib.util.find_spec("determined") is None:
        shim = importlib.util.find_spec("hpcdet.shim")
        assert shim is not None and shim.submodule_search_locations
        added.append(next(iter(shim.submodule_search_locations)))
        sys.path.append(added[1])
    try:
        return load_trial_class(spec)
    finally:
        for entry in added:
            sys.path.remove(entry)


def load_trial_from_checkpoint_path(
    path: str | Path,
    trial_class: type[PyTorchTrial] | None = None,
    trial_kwargs: dict[str, Any] | None = None,
    torch_load_kwargs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> PyTorchTrial:
    """The trial a checkpoint was saved from, built with its hyperparameters and config and
    holding its models' weights (optimizers and the rest are not restored).

    Args:
        path: A checkpoint directory (e.g. from ``hpcdet checkpoint download``).
        trial_class: The class to build; by default the one named in the checkpoint,
            imported from its ``code/`` copy.
        trial_kwargs: Extra keyword arguments for the class.
        torch_load_kwargs: Extra keyword arguments for ``torch.load`` (e.g. ``map_location``).
        **kwargs: Deprecated (as in Determined, with a ``FutureWarning``): ``torch.load``'s
            keyword arguments, for ``torch_load_kwargs``.

    Raises:
        TrialClassError: The checkpoint was not saved by a PyTorchTrial, or its class cannot
            be imported.
        ValueError: Both ``torch_load_kwargs`` and ``**kwargs`` were given.
    """
    if kwargs:
        if torch_load_kwargs:
            raise ValueError("load_trial_from_checkpoint_path() takes torch.load's arguments "
                             "as torch_load_kwargs or as **kwargs, not both")
        warnings.warn("passing torch.load's arguments to load_trial_from_checkpoint_path() "
                      "as **kwargs is deprecated (as in Determined); pass "
                      "torch_load_kwargs={...} instead", FutureWarning, stacklevel=2)
        torch_load_kwargs = kwargs
    path = Path(path)
    load_data_file = path / LOAD_DATA_FILE
    state_file = next((path / n for n in STATE_FILES if (path / n).exists()), None)
    if not load_data_file.exists() or state_file is None:
        raise TrialClassError(f"{path} is not a checkpoint of a PyTorchTrial (it has no "
                              f"{LOAD_DATA_FILE} or {STATE_FILES[0]})")
    load_data = json.loads(load_data_file.read_text())
    if trial_class is None:
        trial_class = _import_saved_class(path, load_data["trial_cls_spec"])
    load_kwargs = {"map_location": "cpu", "weights_only": False, **(torch_load_kwargs or {})}
    state = torch.load(state_file, **load_kwargs)
    context = PyTorchTrialContext(
        _dummy_init(checkpoint_storage=str(path.parent)),
        hparams=dict(load_data.get("hparams") or {}),
        exp_conf=dict(load_data.get("experiment_config") or {}),
        trial_seed=0, trial_id=None, experiment_id=None,
        device=torch.device(load_kwargs["map_location"])
        if isinstance(load_kwargs["map_location"], str) else torch.device("cpu"),
    )
    trial = trial_class(context, **(trial_kwargs or {}))
    models = state.get("models_state_dict", [])
    if len(models) != len(context.models):
        raise TrialClassError(f"the checkpoint holds {len(models)} models, "
                              f"{type(trial).__name__} wrapped {len(context.models)}")
    for model, sd in zip(context.models, models):
        model.load_state_dict(strip_module_prefix(sd))
        model.eval()
    return trial
