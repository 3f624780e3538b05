"""Where an experiment's TensorBoard files are, as `hpcdet tensorboard` serves them."""

from __future__ import annotations

from pathlib import Path

from hpcdet.errors import NotFoundError
from hpcdet.paths import StatePaths
from hpcdet.rundir.layout import tensorboard_dir
from hpcdet.rundir.spec import CLUSTER_ID
from hpcdet.store.queries import Queries


def tensorboard_logdirs(store: Queries, paths: StatePaths, exp_ids: list[int]) -> dict[str, Path]:
    """TensorBoard's run names (``exp-N``) to the experiments' TensorBoard directories, each
    holding ``trial/<id>/`` per trial that wrote any.

    Raises:
        NotFoundError: an experiment is unknown, or none of its trials wrote TensorBoard files.
    """
    found = {}
    for exp_id in exp_ids:
        exp = store.experiment(exp_id)
        storage = exp.config.checkpoint_dir(
            paths.default_checkpoints())
        where = tensorboard_dir(storage, CLUSTER_ID, exp_id)
        if not any(where.glob("trial/*/*")):
            raise NotFoundError(
                f"experiment {exp_id} has no TensorBoard files under {where}: its trials write "
                "them with core_context.train.get_tensorboard_path() or the PyTorch API's "
                "context.get_tensorboard_writer()")
        found[f"exp-{exp_id}"] = where
    return found
