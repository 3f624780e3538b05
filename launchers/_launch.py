"""What the distributed launchers share: their command line, the node layout, one child.

Every launcher takes ``[OVERRIDES... --] SCRIPT...``: arguments before the first ``--`` go to
the underlying tool (torchrun, the MPI step, deepspeed) after hpcdet's own, so a later flag
overrides an earlier one; the rest is the script each worker runs under ``wrap_rank``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from hpcdet.errors import UsageError
from hpcdet.private import hpcdet_command
from hpcdet.rundir.spec import CLUSTER_INFO_ENV, ClusterInfoRecord

FORWARDED_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2")
WRAP_RANK_MODULE = "hpcdet.launch.wrap_rank"


class LaunchError(RuntimeError):
    """The launcher cannot run here; the message says why and what to do."""


def split_overrides(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split ``[OVERRIDES... --] SCRIPT...`` into (overrides, script).

    Only the first ``--`` separates, so a script may contain ``--`` itself when overrides
    (or a bare leading ``--``) come first.

    Raises:
        UsageError: The script is empty; ``-h``/``--help`` as the first argument raise it
            with an empty message.
    """
    args = list(argv)
    if args[:1] in (["-h"], ["--help"]):
        raise UsageError("")
    if "--" in args:
        cut = args.index("--")
        overrides, script = args[:cut], args[cut + 1 :]
    else:
        overrides, script = [], args
    if not script:
        raise UsageError("empty script is not allowed")
    return overrides, script


TRIAL_HARNESS = "hpcdet.pytorch.harness"


def trial_class(script: Sequence[str]) -> str | None:
    """The ``module:Class`` of a script given as ``--trial module:Class`` (Determined's
    trial classes), or ``None`` for a plain script.

    Raises:
        UsageError: ``--trial`` without exactly one class after it.
    """
    if script[:1] == ["--trial"]:
        rest = list(script[1:])
    elif script and script[0].startswith("--trial="):
        rest = [script[0].partition("=")[2], *script[1:]]
    else:
        return None
    if len(rest) != 1 or ":" not in rest[0]:
        raise UsageError("--trial takes one trial class, e.g. --trial model_def:MyTrial")
    return rest[0]


def trial_script(python: str, script: Sequence[str], launcher: str) -> list[str]:
    """The script a worker runs: ``script`` itself, or for ``--trial module:Class`` the
    PyTorchTrial harness (the torch launcher's only; others refuse it).

    Raises:
        UsageError: ``--trial`` to a launcher other than ``torch_distributed``.
    """
    spec = trial_class(script)
    if spec is None:
        return list(script)
    if launcher != "torch_distributed":
        raise UsageError(
            f"--trial is for PyTorchTrial classes, which run under "
            f"hpcdet.launch.torch_distributed, not {launcher}; use "
            f"python3 -m hpcdet.launch.torch_distributed --trial {spec}"
        )
    # Not isolated (-I): the trial side comes from PYTHONPATH, as for the trial's own script.
    return [python, "-m", TRIAL_HARNESS, spec]


def wrap_rank_command(python: str, rank_spec: str, script: Sequence[str]) -> list[str]:
    """``SCRIPT`` under wrap_rank, so each output line is tagged with the worker's rank."""
    return [*hpcdet_command(WRAP_RANK_MODULE, python), rank_spec, "--", *script]


@dataclass(frozen=True)
class NodeLayout:
    """Where this node stands in the trial's allocation (from the harness's cluster info).

    Attributes:
        addrs: Every node's address, in node-rank order; ``addrs[0]`` is the chief's.
        node_rank: This node's index in ``addrs`` (Determined's ``container_rank``).
        slots_per_node: Slots of this node (``len(slot_ids)``).
        allocation_id: The run's allocation id, unique per trial run.
        run_dir: The run directory on the shared file system.
    """

    addrs: tuple[str, ...]
    node_rank: int
    slots_per_node: int
    allocation_id: str
    run_dir: str

    @property
    def num_nodes(self) -> int:
        """Number of nodes in the allocation."""
        return len(self.addrs)

    @property
    def chief_ip(self) -> str:
        """The chief node's address."""
        return self.addrs[0]

    @classmethod
    def from_record(cls, record: ClusterInfoRecord) -> NodeLayout:
        """The layout described by a harness-written cluster info record."""
        return cls(
            addrs=tuple(record.container_addrs),
            node_rank=record.container_rank,
            slots_per_node=len(record.slot_ids),
            allocation_id=record.allocation_id,
            run_dir=str(record.spec.get("run_dir", "")),
        )


def load_layout(env: Mapping[str, str], launcher: str) -> NodeLayout:
    """The layout of the trial this process runs in.

    Raises:
        LaunchError: Not inside a trial (no cluster info), or the record is unreadable.
    """
    path = env.get(CLUSTER_INFO_ENV)
    if not path:
        raise LaunchError(
            f"{launcher} runs inside an hpcdet trial: put it in the experiment's entrypoint "
            f"({CLUSTER_INFO_ENV} is not set, so this is not a trial)"
        )
    try:
        return NodeLayout.from_record(ClusterInfoRecord.load(Path(path)))
    except (OSError, TypeError, ValueError) as e:
        raise LaunchError(f"cannot read the cluster info {path}: {e}") from e


def exit_code(returncode: int) -> int:
    """A child's return code as a shell would report it (128 + N if killed by signal N)."""
    return 128 - returncode if returncode < 0 else returncode


class ForwardedSignals:
    """While active, SIGINT/SIGTERM/SIGHUP/SIGUSR1/SIGUSR2 go on to the adopted child.

    Enter it before starting the child: a signal can then never kill this process alone and
    orphan the child; one that arrives before ``adopt`` is delivered once the child exists.
    """

    def __init__(self) -> None:
        self._child: subprocess.Popen[bytes] | None = None
        self._early: list[int] = []
        self._previous: dict[int, Any] = {}
        self.received: set[int] = set()

    def _forward(self, signum: int, _frame: FrameType | None) -> None:
        self.received.add(signum)
        if self._child is not None:
            self._child.send_signal(signum)
        else:
            self._early.append(signum)

    def __enter__(self) -> ForwardedSignals:
        for name in FORWARDED_SIGNALS:
            sig = getattr(signal, name, None)
            if sig is not None:
                self._previous[sig] = signal.signal(sig, self._forward)
        return self

    def adopt(self, child: subprocess.Popen[bytes]) -> None:
        self._child = child
        for signum in self._early:
            child.send_signal(signum)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def run_forwarding_signals(cmd: Sequence[str], env: Mapping[str, str],
                           signals: ForwardedSignals | None = None) -> int:
    """Run ``cmd``, pass SIGINT/SIGTERM/SIGHUP/SIGUSR1/SIGUSR2 on to it; its exit code.
    ``signals``: the forwarder to use, to learn afterwards which signals came."""
    with signals or ForwardedSignals() as forwarding:
        try:
            proc = subprocess.Popen(list(cmd), env=dict(env))
        except OSError as e:
            print(f"cannot run {cmd[0]!r}: {e}", file=sys.stderr)
            return 127
        forwarding.adopt(proc)
        return exit_code(proc.wait())


# A directory where wrap_rank writes each worker's exit code (a file named by its rank), for
# a launcher that must know them past a process manager that reports only its own.
RANK_EXITS_ENV = "HPCDET_RANK_EXITS"


def report_usage(usage: str, error: UsageError) -> int:
    """Print the usage (and the error, if any) to stderr; the exit code for it."""
    if not str(error):
        print(usage, file=sys.stderr)
        return 0
    print(f"{usage}\nerror: {error}", file=sys.stderr)
    return 1


def merged_env(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``base`` with ``extra`` on top."""
    env = dict(base)
    env.update(extra)
    return env
