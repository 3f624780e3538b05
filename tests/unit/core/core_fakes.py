"""A fake run directory, laid out as the daemon and the harness would, for Core API tests."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import hpcdet
from hpcdet.rundir.events import Event, read_events
from hpcdet.rundir.spec import CLUSTER_INFO_ENV, ClusterInfoRecord, RunSpec

SHIM_DIR = Path(hpcdet.__file__).parent / "shim"
TUTORIAL_DIR = Path(__file__).parents[3] / "examples" / "core_api"

# Runs a script unchanged but with time.sleep() 100x faster: the tutorials sleep 0.1 s per
# batch, 10 s a run, which is their "training" and not what the tests check.
_FAST_RUNNER = """
import runpy, sys, time
_sleep = time.sleep
time.sleep = lambda s: _sleep(s / 100)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@dataclass
class FakeRun:
    """One run directory with job.json and a cluster info record, plus the env to use it."""

    root: Path
    spec: RunSpec
    info_path: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return Path(self.spec.run_dir)

    @property
    def checkpoint_dir(self) -> Path:
        return Path(self.spec.checkpoint_dir)

    def events(self) -> list[Event]:
        return read_events(self.run_dir / "events.jsonl", 0)

    def bodies(self, type_: str) -> list[dict[str, Any]]:
        return [e.body for e in self.events() if e.type == type_]

    def next_run(self, **changes: Any) -> FakeRun:
        """The trial's next run (resumption), e.g. ``next_run(latest_checkpoint=uuid)``."""
        return make_run(
            self.root, run_id=self.spec.run_id + 1, trial_id=self.spec.trial_id,
            checkpoint_dir=self.checkpoint_dir, config=self.spec.config,
            hparams=self.spec.hparams, **changes,
        )

    def run_script(self, name: str, fast: bool = True) -> subprocess.CompletedProcess[str]:
        script = str(TUTORIAL_DIR / name)
        argv = [sys.executable, "-c", _FAST_RUNNER, script] if fast else [sys.executable, script]
        return subprocess.run(
            argv, env=self.env, cwd=self.root, capture_output=True, text=True, timeout=120
        )


def make_run(
    root: Path,
    *,
    run_id: int = 1,
    trial_id: int = 7,
    checkpoint_dir: Path | None = None,
    config: dict[str, Any] | None = None,
    hparams: dict[str, Any] | None = None,
    slot_ids: list[int] | None = None,
    addrs: list[str] | None = None,
    task_type: str = "TRIAL",
    **spec_fields: Any,
) -> FakeRun:
    run_dir = root / "trials" / str(trial_id) / f"run-{run_id}"
    run_dir.mkdir(parents=True)
    spec = RunSpec(
        experiment_id=3, trial_id=trial_id, run_id=run_id, trial_seed=42,
        hparams=hparams if hparams is not None else {"increment_by": 2},
        config=config if config is not None else {"searcher": {"name": "single", "metric": "x"}},
        entrypoint="python3 script.py", context_dir=str(root / "context"),
        run_dir=str(run_dir), checkpoint_dir=str(checkpoint_dir or root / "checkpoints"),
        **spec_fields,
    )
    spec.save(run_dir)
    record = ClusterInfoRecord(
        spec=asdict(spec), container_addrs=addrs or ["127.0.0.1"], container_rank=0,
        slot_ids=slot_ids if slot_ids is not None else [0], agent_id="node0",
        allocation_id=f"{trial_id}.{run_id}", task_id=f"3.{trial_id}", task_type=task_type,
    )
    info_path = run_dir / "nodes" / "0.json"
    record.save(info_path)
    env = {k: v for k, v in os.environ.items() if k != CLUSTER_INFO_ENV}
    env.update({CLUSTER_INFO_ENV: str(info_path), "PYTHONPATH": str(SHIM_DIR)})
    return FakeRun(root=root, spec=spec, info_path=info_path, env=env)
