"""A step the chief node starts on every node, and the other nodes' part in it.

Some tools start all of a trial's workers from one node: the batch system's MPI step (the MPI
launcher) and deepspeed's pdsh runner. The harness still runs the entrypoint, hence the
launcher, on every node, so the launchers of the other nodes ("peers") publish what their
node's workers need and then wait until the chief's step has ended. They must not exit earlier:
each harness deletes its node's working directory (the copy of the context the workers run in)
as soon as its entrypoint exits, and an early exit would also end the harness step on that node
while its workers still run.

A step started from the chief inherits the chief's working directory and environment, which
are wrong on the other nodes: working directories are node-local temporary directories, and
``HPCDET_CLUSTER_INFO`` names each node's own cluster info (``container_rank`` differs). So
every worker starts as ``python -m hpcdet.launch.node_step --node-var VAR [--set NAME=VALUE]...
[--copy NAME=FROM]... STEP_DIR -- CMD...``, which finds its node from ``$VAR`` (the MPI step's
node variable, ``CROSS_RANK`` under deepspeed), enters that node's published directory and
variables, sets ``NAME`` to ``VALUE`` and to ``$FROM`` (e.g. torch's ``RANK`` from Slurm's
``SLURM_PROCID``), and execs CMD. The values travel on the command line, so they reach a rank
that re-enters an image (:mod:`hpcdet.launch.host_step`), where only some variables pass.

Files in ``STEP_DIR = RUN_DIR/launch/<launcher>-<n>/`` (``n`` counts a node's launches, so an
entrypoint that launches twice uses two directories on every node):

* ``claim-<rank>``: node ``rank`` took this directory for its ``n``-th launch.
* ``node-<rank>.json``: that node's working directory and node-local variables.
* ``exit.json``: the exit code of the chief's step, written when the step has ended.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpcdet.private import hpcdet_command
from hpcdet.rundir.atomic import read_json, write_atomic
from hpcdet.rundir.spec import CLUSTER_INFO_ENV

from ._launch import NodeLayout

USAGE = ("usage: python3 -m hpcdet.launch.node_step --node-var VAR [--set NAME=VALUE]... "
         "[--copy NAME=FROM]... STEP_DIR -- CMD...")
MODULE = "hpcdet.launch.node_step"
# The variables the harness sets differently on each node.
NODE_VARS = (CLUSTER_INFO_ENV, "DET_AGENT_ID")
NODES_TIMEOUT = 300.0
EXIT_FILE = "exit.json"


@dataclass(frozen=True)
class NodeEntry:
    """What a worker on one node enters before it runs.

    Attributes:
        cwd: The node's working directory (the harness's copy of the context).
        env: Node-local variables that override the ones the step inherited.
    """

    cwd: str
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def here(cls, cwd: str, env: Mapping[str, str]) -> NodeEntry:
        """This node's entry: ``cwd`` and the :data:`NODE_VARS` set in ``env``."""
        return cls(cwd=cwd, env={k: env[k] for k in NODE_VARS if k in env})


def claim_step_dir(run_dir: Path, launcher: str, node_rank: int) -> Path:
    """The step directory of this node's next launch with ``launcher``.

    Every node calls this once per launch, in the same order, so the ``n``-th launch of each
    node gets the same directory without any coordination.
    """
    base = run_dir / "launch"
    for n in itertools.count():
        step_dir = base / f"{launcher}-{n}"
        step_dir.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(step_dir / f"claim-{node_rank}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            continue
        os.close(fd)
        return step_dir
    raise AssertionError("unreachable")


def publish(step_dir: Path, node_rank: int, entry: NodeEntry) -> None:
    """Make this node's entry visible to the step's workers."""
    write_atomic(step_dir / f"node-{node_rank}.json", asdict(entry))


def load_entry(step_dir: Path, node_rank: int) -> NodeEntry | None:
    """Node ``node_rank``'s published entry, or ``None`` before it is published."""
    data = read_json(step_dir / f"node-{node_rank}.json")
    if data is None:
        return None
    return NodeEntry(cwd=str(data["cwd"]), env={str(k): str(v) for k, v in data["env"].items()})


def wait_for_nodes(
    step_dir: Path, num_nodes: int, timeout: float = NODES_TIMEOUT, poll: float = 0.2
) -> list[NodeEntry]:
    """Every node's entry, in rank order, once all are published.

    Raises:
        TimeoutError: Some nodes did not publish within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        entries = [load_entry(step_dir, r) for r in range(num_nodes)]
        if all(e is not None for e in entries):
            return [e for e in entries if e is not None]
        if time.monotonic() > deadline:
            missing = ", ".join(str(r) for r, e in enumerate(entries) if e is None)
            raise TimeoutError(
                f"nodes {missing} did not join the launch in {step_dir} within {timeout:.0f} s; "
                "every node's entrypoint must run the same launcher"
            )
        time.sleep(poll)


def finish(step_dir: Path, code: int) -> None:
    """Record the step's exit code; the peers stop waiting."""
    write_atomic(step_dir / EXIT_FILE, {"exit_code": code})


def wait_for_finish(step_dir: Path, poll: float = 0.5) -> int:
    """Block until the chief records the step's end; its exit code."""
    while True:
        data = read_json(step_dir / EXIT_FILE)
        if data is not None:
            return int(data["exit_code"])
        time.sleep(poll)


def enter_command(
    python: str,
    node_var: str,
    step_dir: Path | str,
    cmd: Sequence[str],
    set_vars: Mapping[str, str] | None = None,
    copy_vars: Mapping[str, str] | None = None,
) -> list[str]:
    """``cmd`` prefixed so that it runs in its node's directory and variables, with
    ``set_vars`` (name: value) and ``copy_vars`` (name: the variable it takes the value of)."""
    options = [f"--set={k}={v}" for k, v in (set_vars or {}).items()]
    options += [f"--copy={k}={v}" for k, v in (copy_vars or {}).items()]
    return [*hpcdet_command(MODULE, python), "--node-var", node_var, *options, str(step_dir),
            "--", *cmd]


Runner = Callable[[Sequence[str], Mapping[str, str]], int]


def run_step(
    layout: NodeLayout,
    step_dir: Path,
    entry: NodeEntry,
    cmd: Sequence[str],
    env: Mapping[str, str],
    runner: Runner,
    log: Callable[[str], None] = lambda _msg: None,
) -> int:
    """This node's part of a step: the chief runs ``cmd``, the peers wait for it to end.

    Every node first publishes ``entry``. The chief waits until all nodes have published,
    runs ``cmd`` with ``runner`` and records its exit code (also when it fails to start),
    which is what it returns. Peers return 0 once the step has ended: the chief reports the
    step's result, and a peer exiting non-zero would only repeat it.
    """
    publish(step_dir, layout.node_rank, entry)
    if layout.node_rank != 0:
        log(f"node {layout.node_rank} waits for the chief's step ({step_dir})")
        wait_for_finish(step_dir)
        return 0
    code = 1
    try:
        wait_for_nodes(step_dir, layout.num_nodes)
        code = runner(cmd, env)
    finally:
        finish(step_dir, code)
    return code


@dataclass(frozen=True)
class StepArgs:
    """node_step's command line (see :data:`USAGE`)."""

    node_var: str
    step_dir: Path
    cmd: list[str]
    set_vars: dict[str, str] = field(default_factory=dict)
    copy_vars: dict[str, str] = field(default_factory=dict)

    def env(self, base: Mapping[str, str], entry: NodeEntry) -> dict[str, str]:
        """``base`` with the node's variables, then the set and the copied ones, on top."""
        env = {**base, **entry.env, **self.set_vars}
        env.update({k: base.get(v, "") for k, v in self.copy_vars.items()})
        return env


def parse_args(argv: Sequence[str]) -> StepArgs:
    """Parse ``--node-var VAR [--set N=V]... [--copy N=FROM]... STEP_DIR -- CMD...``.

    Raises:
        ValueError: The command line does not match :data:`USAGE`.
    """
    args = list(argv)
    if len(args) < 2 or args[0] != "--node-var":
        raise ValueError("expected --node-var VAR ... STEP_DIR -- CMD...")
    node_var, rest = args[1], args[2:]
    found: dict[str, dict[str, str]] = {"--set": {}, "--copy": {}}
    while rest and rest[0].startswith("--") and rest[0] != "--":
        option, _, pair = rest.pop(0).partition("=")
        name, eq, value = pair.partition("=")
        if option not in found or not name or not eq:
            raise ValueError(f"expected --set=NAME=VALUE or --copy=NAME=FROM, not {option}")
        found[option][name] = value
    if len(rest) < 3 or rest[1] != "--":
        raise ValueError("expected STEP_DIR -- CMD... after the options")
    return StepArgs(node_var, Path(rest[0]), rest[2:], found["--set"], found["--copy"])


def main(argv: Sequence[str] | None = None) -> int:
    """Enter this node's directory and variables, then exec CMD (returns only on error)."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except ValueError as e:
        print(f"{USAGE}\nerror: {e}", file=sys.stderr)
        return 2
    value = os.environ.get(args.node_var, "")
    if not value.isdigit():
        print(f"node_step: ${args.node_var} is {value!r}, not a node rank", file=sys.stderr)
        return 1
    entry = load_entry(args.step_dir, int(value))
    if entry is None:
        print(f"node_step: node {value} has not published its entry in {args.step_dir}",
              file=sys.stderr)
        return 1
    env = args.env(os.environ, entry)
    try:
        os.chdir(entry.cwd)
    except OSError as e:
        print(f"node_step: cannot enter {entry.cwd}: {e}", file=sys.stderr)
        return 1
    try:
        os.execvpe(args.cmd[0], args.cmd, env)
    except OSError as e:
        print(f"node_step: cannot run {args.cmd[0]!r}: {e}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main())
