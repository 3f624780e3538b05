"""One user's hpcdet for a benchmark: a fresh state directory, a cluster config, the real CLI
and the real daemon, and scheduler commands counted on their way to the real executables."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hpcdet.store.queries import Queries

REPO = Path(__file__).resolve().parents[1]
PBS_DOUBLE = REPO / "tests" / "doubles" / "pbs" / "bin"
SCHEDULER_COMMANDS = {
    "slurm": ("sbatch", "squeue", "sacct", "scontrol", "scancel", "sinfo", "sprio"),
    "pbs": ("qsub", "qstat", "qdel", "qalter", "qorder", "qmove", "qhold", "qrls", "qsig",
            "qselect", "pbsnodes", "qmgr"),
}


class Sandbox:
    """A state directory under ``root`` for ``backend`` (slurm, pbs or local).

    With ``count_calls``, every scheduler command goes through a shim that appends its name to
    ``calls.log`` and then runs the real program, so the load the daemon puts on the scheduler
    is counted from outside it.
    """

    def __init__(self, root: Path, backend: str, count_calls: bool = False) -> None:
        self.root = root
        self.backend = backend
        root.mkdir(parents=True, exist_ok=True)
        (root / "cluster.yaml").write_text(f"backend: {backend}\n")
        (root / "site.yaml").write_text("{}\n")
        # The trials' python3 is the one on PATH at create: this interpreter's, with torch.
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        self.extra: dict[str, str] = {}
        if backend == "pbs":
            (root / "pbs").mkdir(exist_ok=True)
            (root / "pbs" / "config.json").write_text('{"acl_roots": ["root"]}\n')
            path = f"{PBS_DOUBLE}{os.pathsep}{path}"
            self.extra["PBS_DOUBLE_HOME"] = str(root / "pbs")
        self.calls_log = root / "calls.log"
        if count_calls:
            path = f"{self._shims(path)}{os.pathsep}{path}"
        self.extra["PATH"] = path

    def _shims(self, path: str) -> Path:
        shims = self.root / "shims"
        shims.mkdir(exist_ok=True)
        for name in SCHEDULER_COMMANDS.get(self.backend, ()):
            real = shutil.which(name, path=path)
            if real is None:
                continue
            shim = shims / name
            shim.write_text(f"#!/bin/sh\necho {name} >> {shlex.quote(str(self.calls_log))}\n"
                            f"exec {shlex.quote(real)} \"$@\"\n")
            shim.chmod(0o755)
        return shims

    @property
    def state(self) -> Path:
        return self.root / "state"

    def env(self) -> dict[str, str]:
        return {**os.environ, "HPCDET_HOME": str(self.state),
                "HPCDET_CLUSTER_CONFIG": str(self.root / "cluster.yaml"),
                "HPCDET_SITE_CONFIG": str(self.root / "site.yaml"), **self.extra}

    def cli(self, *args: str, timeout: float = 600) -> str:
        done = subprocess.run([sys.executable, "-m", "hpcdet.cli.main", *args], env=self.env(),
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"hpcdet {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def create(self, config: str, context: Path | None = None) -> int:
        cfg = self.root / f"cfg-{time.monotonic_ns()}.yaml"
        cfg.write_text(config)
        if context is None:
            context = self.root / "ctx"
            context.mkdir(exist_ok=True)
        out = self.cli("experiment", "create", str(cfg), str(context))
        return int(out.split("Created experiment ")[1].split()[0])

    def wait(self, exp_id: int, timeout: float = 1200) -> None:
        """Until the experiment ends; one that does not complete raises with its logs' end."""
        try:
            self.cli("experiment", "wait", str(exp_id), timeout=timeout)
        except RuntimeError as e:
            logs = subprocess.run([sys.executable, "-m", "hpcdet.cli.main", "experiment", "logs",
                                   str(exp_id)], env=self.env(), capture_output=True, text=True)
            tail = "\n".join((logs.stdout + logs.stderr).splitlines()[-30:])
            raise RuntimeError(f"{e}\n{tail}") from None

    @contextmanager
    def daemon(self) -> Iterator[None]:
        self.cli("daemon", "start")
        try:
            yield
        finally:
            self.cli("daemon", "stop")

    def daemon_pid(self) -> int:
        return int(json.loads((self.state / "daemon.json").read_text())["pid"])

    def daemon_polls(self) -> int:
        """How many times the daemon has asked the scheduler about its jobs."""
        local = Path(json.loads((self.state / "daemon.json").read_text())["local_dir"])
        return int(json.loads((local / "status.json").read_text())["polls"])

    def store(self) -> Queries:
        return Queries(self.state / "hpcdet.db")

    def wait_submitted(self, exp_id: int, trials: int, timeout: float = 600) -> float:
        """Seconds until every trial of the experiment's arrays has its array job id."""
        start = time.perf_counter()
        store = self.store()
        try:
            while True:
                covered = sum(a.count for a in store.arrays(exp_id) if a.job_id)
                if covered >= trials:
                    return time.perf_counter() - start
                if time.perf_counter() - start > timeout:
                    raise RuntimeError(f"only {covered} of {trials} trials submitted in "
                                       f"{timeout:.0f} s")
                # Looked for often: the figure is a few tenths of a second, and a coarser
                # look would add half its interval to it on average.
                time.sleep(0.005)
        finally:
            store.close()

    def calls(self) -> Counter[str]:
        """Scheduler commands run so far, by program (with ``count_calls``)."""
        if not self.calls_log.exists():
            return Counter()
        return Counter(self.calls_log.read_text().split())
