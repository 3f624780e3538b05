"""A step that starts outside the trial's image, and its ranks, which start inside it again.

Inside an image the MPI launcher cannot start the batch system's step itself: the step's tool
and its configuration belong to the host, not to the image. So the launcher asks the harness of
its node, which runs on the host, through files in the step directory
(``RUN_DIR/launch/<launcher>-<n>/``, see :mod:`hpcdet.launch.node_step`):

* ``host-step.json``: launcher -> harness, the command to run and what to add to the
  harness's environment for it;
* ``host-step.signal``: launcher -> harness, signal numbers to pass on, one per line;
* ``host-step.exit``: harness -> launcher, the step's exit code.

The step starts each rank on the host as ``python -I -m hpcdet.launch.host_step RUN_DIR
--node-var VAR -- CMD...``, which re-enters its node's image as that node's harness ran the
entrypoint (``RUN_DIR/nodes/<rank>.container.json``) and execs CMD there, with the variables
the step gave the rank (its rank, the MPI process manager's).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcdet.containers import (
    RUNTIME_ENV_PREFIXES,
    WORKDIR,
    ContainerSpec,
    exec_argv,
    passed_names,
    with_trialside,
)
from hpcdet.rundir.atomic import read_json, write_atomic

REQUEST, SIGNALS, EXIT = "host-step.json", "host-step.signal", "host-step.exit"
# Set in the trial's environment inside an image: the host command that starts a rank.
PREFIX_ENV = "HPCDET_RANK_PREFIX"
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
USAGE = "usage: python3 -m hpcdet.launch.host_step RUN_DIR --node-var VAR -- CMD..."


def container_record(run_dir: Path, node_rank: int) -> Path:
    return run_dir / "nodes" / f"{node_rank}.container.json"


def rank_prefix(run_dir: Path | str, node_var: str, prefix: Sequence[str]) -> list[str]:
    """What goes before a rank's command so that it starts in its node's image."""
    return [*prefix, str(run_dir), "--node-var", node_var, "--"]


# ------------------------------------------------------------- inside: the launcher's side


def ask_host(step_dir: Path, node_rank: int, cmd: Sequence[str],
             extra_env: Mapping[str, str], poll: float = 0.2) -> int:
    """Run ``cmd`` on the host through this node's harness; its exit code. Signals this
    process gets go on to the step."""
    def forward(signum: int, _frame: object) -> None:
        with open(step_dir / SIGNALS, "a") as f:
            f.write(f"{signum}\n")

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        write_atomic(step_dir / REQUEST, {"node_rank": node_rank, "argv": list(cmd),
                                          "env": dict(extra_env)})
        while (done := read_json(step_dir / EXIT)) is None:
            time.sleep(poll)
        return int(done["exit_code"])
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


# --------------------------------------------------------------- outside: the harness's side


class HostSteps:
    """The harness's service: runs the steps its node's launcher asks for (see the module
    docstring) until ``stop``; their output goes to ``write``."""

    def __init__(self, run_dir: Path, node_rank: int, env: Mapping[str, str],
                 write: Callable[[str], None], poll: float = 0.3) -> None:
        self.run_dir = run_dir
        self.node_rank = node_rank
        self.env = dict(env)
        self.write = write
        self.poll = poll
        self._stop = threading.Event()
        self._served: set[Path] = set()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> HostSteps:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll):
            for request in sorted(self.run_dir.glob(f"launch/*/{REQUEST}")):
                if request in self._served:
                    continue
                try:
                    asked = read_json(request)
                except (OSError, ValueError):
                    continue  # being written (or unreadable): looked at again next round
                if not isinstance(asked, dict) or asked.get("node_rank") != self.node_rank:
                    continue
                self._served.add(request)
                if not (isinstance(asked.get("argv"), list) and asked["argv"]
                        and isinstance(asked.get("env"), dict)):
                    # A launcher's request hpcdet did not write: answered, never the end of
                    # the service that the node's other steps need.
                    self.write(f"[hpcdet] a step request without argv and env: {request}")
                    write_atomic(request.parent / EXIT, {"exit_code": 127})
                    continue
                self._run(request.parent, asked)

    def _run(self, step_dir: Path, asked: dict[str, Any]) -> None:
        code = 127
        try:
            proc = subprocess.Popen(asked["argv"], env={**self.env, **asked["env"]},
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as e:
            self.write(f"[hpcdet] cannot start the step {asked['argv'][0]!r}: {e.strerror}")
        else:
            pump = threading.Thread(target=self._pump, args=(proc,), daemon=True)
            pump.start()
            sent = 0
            while proc.poll() is None:
                sent = self._pass_signals(step_dir, proc, sent)
                time.sleep(self.poll)
            pump.join(timeout=5)
            code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        write_atomic(step_dir / EXIT, {"exit_code": code})

    def _pump(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            self.write(raw.decode(errors="replace").rstrip("\n"))

    @staticmethod
    def _pass_signals(step_dir: Path, proc: subprocess.Popen[bytes], sent: int) -> int:
        try:
            lines = (step_dir / SIGNALS).read_text().split()
        except OSError:
            return sent
        for signum in lines[sent:]:
            proc.send_signal(int(signum))
        return len(lines)


# --------------------------------------------------------------------- a rank, on the host


def rank_command(record: Mapping[str, Any], env: Mapping[str, str],
                 cmd: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run a rank's ``cmd`` in its node's image."""
    spec = ContainerSpec.from_dict(record["spec"])
    # What the step passed on of the chief's own container launch is not this rank's.
    merged = {k: v for k, v in {**env, **record["env"]}.items()
              if not k.startswith(RUNTIME_ENV_PREFIXES)}
    names = passed_names(merged, extra=list(record["env"]))
    argv, extra = exec_argv(spec, WORKDIR, names, merged, with_trialside(cmd),
                            user=(os.geteuid(), os.getegid()))
    return argv, {**merged, **extra}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 5 or args[1] != "--node-var" or args[3] != "--":
        print(USAGE, file=sys.stderr)
        return 2
    run_dir, node_var, cmd = Path(args[0]), args[2], args[4:]
    node = os.environ.get(node_var, "")
    record = read_json(container_record(run_dir, int(node))) if node.isdigit() else None
    if record is None:
        print(f"host_step: no container record for node {node!r} (${node_var}) in {run_dir}",
              file=sys.stderr)
        return 1
    command, env = rank_command(record, os.environ, cmd)
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    sys.exit(main())
