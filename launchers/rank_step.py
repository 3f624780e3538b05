"""One step of ranks over all of the trial's nodes, started by the chief node's launcher.

The MPI launcher starts its ranks this way wherever the batch system starts such a step
(``hpcdet.node_env.MpiStep``), and torch_distributed its workers on Slurm. Every node's launcher
calls :func:`run_rank_step`; the chief starts the step once all nodes have published their
entry, the others wait for its end (:mod:`hpcdet.launch.node_step`). Each rank runs
``<node_step> [<wrap_rank> RANK_VARS --] SCRIPT...``; in an image the step starts on the host,
through the harness, and each rank enters the image again (:mod:`hpcdet.launch.host_step`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpcdet.node_env import MpiStep

from ._launch import LaunchError, NodeLayout, run_forwarding_signals, wrap_rank_command
from .host_step import PREFIX_ENV, ask_host, rank_prefix
from .node_step import NodeEntry, Runner, claim_step_dir, enter_command, run_step


@dataclass(frozen=True)
class Ranks:
    """What every rank of the step runs, and the variables it gets.

    Attributes:
        script: The rank's command; it runs under wrap_rank, which tags its output.
        rank_vars: Where wrap_rank finds the rank (first found wins).
        set_vars: Variables every rank gets (they reach a rank inside an image too).
        copy_vars: Variables a rank takes from another of its own (name: from).
    """

    script: Sequence[str]
    rank_vars: str
    set_vars: Mapping[str, str] = field(default_factory=dict)
    copy_vars: Mapping[str, str] = field(default_factory=dict)


def build_step_command(
    step: MpiStep,
    *,
    num_nodes: int,
    procs_per_node: int,
    step_dir: Path | str,
    ranks: Ranks,
    overrides: Sequence[str] = (),
    python: str = "python3",
    rank_prefix: Sequence[str] = (),
    cpus_per_rank: int = 1,
) -> list[str]:
    """The chief's command: one step with ``procs_per_node`` ranks on every node.

    Args:
        step: How the batch system starts a step over the job's nodes.
        num_nodes: Nodes in the allocation.
        procs_per_node: Ranks per node (the node's slots).
        step_dir: The launch's directory (see :mod:`hpcdet.launch.node_step`).
        ranks: What each rank runs.
        overrides: options of the step's tool placed after hpcdet's, so they win.
        python: The interpreter that runs node_step and wrap_rank.
        rank_prefix: What starts each rank (in the trial's image: ``hpcdet.launch.host_step``).
        cpus_per_rank: CPUs each rank gets.
    """
    each = enter_command(python, step.node_var, step_dir,
                         wrap_rank_command(python, ranks.rank_vars, ranks.script),
                         ranks.set_vars, ranks.copy_vars)
    return step.command(num_nodes, procs_per_node, overrides, [*rank_prefix, *each],
                        cpus_per_rank)


def run_rank_step(
    layout: NodeLayout,
    step: MpiStep,
    launcher: str,
    ranks: Ranks,
    *,
    overrides: Sequence[str],
    env: Mapping[str, str],
    host_env: Mapping[str, str],
    python: str,
    cwd: str,
    log: Callable[[str], None],
) -> int:
    """This node's part of the step (see the module docstring); the step's exit code.

    Args:
        layout: This node's place in the trial.
        step: How the batch system starts the step.
        launcher: The launcher's name; it names the step directory.
        ranks: What each rank runs.
        overrides: Options for the step's tool, placed after hpcdet's.
        env: The launcher's environment with the launcher's variables added.
        host_env: The launcher's variables alone, for a step started on the host.
        python: The interpreter that runs node_step and wrap_rank.
        cwd: This node's working directory, where its ranks run.
        log: Where the launcher's own messages go.

    Raises:
        LaunchError: The step's tool is not on PATH on the chief node.
        TimeoutError: Some nodes did not join the step.
    """
    on_host = env.get(PREFIX_ENV)
    if layout.node_rank == 0 and not on_host and shutil.which(step.tool) is None:
        raise LaunchError(f"{step.tool} is not on PATH on the chief node")
    step_dir = claim_step_dir(Path(layout.run_dir), launcher, layout.node_rank)
    prefix = rank_prefix(layout.run_dir, step.node_var, json.loads(on_host)) if on_host else []
    cmd = build_step_command(
        step, num_nodes=layout.num_nodes, procs_per_node=layout.slots_per_node,
        step_dir=step_dir, ranks=ranks, overrides=overrides, python=python,
        rank_prefix=prefix, cpus_per_rank=step.cpus_per_rank(env, layout.slots_per_node),
    )
    runner: Runner = run_forwarding_signals
    if on_host:
        def runner(cmd: Sequence[str], _env: Mapping[str, str]) -> int:
            return ask_host(step_dir, layout.node_rank, cmd, host_env)
    return run_step(layout, step_dir, NodeEntry.here(cwd, env), cmd, env, runner, log)
