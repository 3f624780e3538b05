"""Every string a user can set, set to shell metacharacters and line breaks: the config is
refused with hpcdet's error naming the field, or the batch scripts render and, run by bash,
execute no injected command (issue 9, acceptance).

The scripts run for real with bash; only ``srun`` (a stub that runs its command) and the
harness (a stub that records its environment and exits) stand in. The entrypoint is not run:
it is a shell command of the user's by definition (as in Determined), not a value to quote.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpcdet.config import ClusterConfig, load_cluster_config, load_experiment_config
from hpcdet.config import cluster as cluster_module
from hpcdet.config.experiment import ExperimentConfig
from hpcdet.daemon.jobspec import array_request, job_request, run_spec
from hpcdet.errors import ConfigError
from hpcdet.paths import StatePaths
from hpcdet.schedulers.base import ArraySpec, JobRequest, Placement, Scheduler
from hpcdet.schedulers.local import LocalScheduler
from hpcdet.schedulers.slurm import SlurmScheduler

MARK = "@MARK@"  # replaced by the marker file's path
PAYLOADS = [
    f"$(touch {MARK})",
    f"`touch {MARK}`",
    f"'; touch {MARK}; '",
    f"\"; touch {MARK}; \"",
    f"x; touch {MARK}",
    f"x | touch {MARK}",
    f"x && touch {MARK}",
    f"x\ntouch {MARK}\n#",
    f"x\rtouch {MARK}",
    f"x\n#SBATCH --wrap='touch {MARK}'",
    f"a b\\ $HOME ${{IFS}}touch${{IFS}}{MARK} # \u202e\x1b[31m",
]
BASE: dict[str, Any] = {
    "name": "sweep", "entrypoint": "python3 train.py",
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
    "hyperparameters": {"lr": 0.1}, "environment": {"environment_variables": ["OK=1"]},
    "resources": {"slots_per_trial": 2}, "slurm": {}, "pbs": {},
}


def _at(*keys: Any) -> Callable[[dict[str, Any], str], None]:
    def put(doc: dict[str, Any], value: str) -> None:
        for key in keys[:-1]:
            doc = doc.setdefault(key, {})
        doc[keys[-1]] = value
    return put




EXPERIMENT_FIELDS: dict[str, Callable[[dict[str, Any], str], None]] = {
    "name": _at("name"),
    "description": _at("description"),
    "labels": lambda d, v: d.__setitem__("labels", [v]),
    "entrypoint": _at("entrypoint"),
    "hyperparameters name": lambda d, v: d.__setitem__("hyperparameters", {v: 1}),
    "hyperparameters value": _at("hyperparameters", "lr"),
    "environment_variables name": lambda d, v: d["environment"]["environment_variables"].append(
        f"{v}=1"),
    "environment_variables value": lambda d, v: d["environment"]["environment_variables"].append(
        f"SWEEP={v}"),
    "environment.image": _at("environment", "image"),
    "slurm.partition": _at("slurm", "partition"),
    "slurm.account": _at("slurm", "account"),
    "slurm.qos": _at("slurm", "qos"),
    "slurm.gpu_type": _at("slurm", "gpu_type"),
    "slurm.sbatch_args": lambda d, v: d["slurm"].__setitem__("sbatch_args", [v]),
    "slurm.sbatch_args value": lambda d, v: d["slurm"].__setitem__(
        "sbatch_args", [f"--comment={v}"]),
    "pbs.queue": _at("pbs", "queue"),
    "pbs.account": _at("pbs", "account"),
    "pbs.pbsbatch_args": lambda d, v: d["pbs"].__setitem__("pbsbatch_args", [f"-l {v}"]),
    "resources.resource_pool": _at("resources", "resource_pool"),
    "checkpoint_storage.host_path": lambda d, v: d.__setitem__(
        "checkpoint_storage", {"type": "shared_fs", "host_path": f"/tmp/ck {v}"}),
    "checkpoint_storage.storage_path": lambda d, v: d.__setitem__(
        "checkpoint_storage", {"type": "shared_fs", "host_path": "/tmp", "storage_path": v}),
    "bind_mounts": lambda d, v: d.__setitem__(
        "bind_mounts", [{"host_path": f"/{v}", "container_path": v}]),
    "data": _at("data", "x"),
}
CLUSTER_FIELDS = ("account", "qos", "gpu_type", "default_pool", "partitions")


@pytest.fixture(autouse=True)
def no_system_site_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_module, "DEFAULT_SITE_PATH", tmp_path / "etc" / "cluster.yaml")


def _experiment(doc: dict[str, Any]) -> ExperimentConfig:
    return load_experiment_config(yaml.safe_dump(doc))


def _cluster(tmp_path: Path, doc: dict[str, Any]) -> ClusterConfig:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_cluster_config(user_path=path, env={"HOME": str(tmp_path)})


def _accepted(load: Callable[[], object], field: str) -> bool:
    """Whether hpcdet takes the value; a refusal must be its own error naming the field."""
    try:
        load()
    except ConfigError as e:
        assert any(field.split(" ")[0].split(".")[-1] in p for p in e.problems), e.problems
        return False
    return True


def _stubs(tmp_path: Path) -> tuple[Path, str]:
    """A bin directory with an ``srun`` that runs its command, and a fake harness."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text('#!/bin/sh\nwhile [ "${1#--}" != "$1" ]; do shift; done\nexec "$@"\n')
    harness = bin_dir / "python"
    # Called as: python -I -m hpcdet.launch.harness RUN_DIR (the run directory comes last)
    harness.write_text('#!/bin/sh\nfor last; do :; done\n'
                       'printf %s "${SWEEP-unset}" > "$last/harness-ran"\n')
    for stub in (srun, harness):
        stub.chmod(0o755)
    return bin_dir, str(harness)


def _run(script: str, run_dir: Path, bin_dir: Path) -> None:
    path = run_dir / "job.sh"
    path.write_text(script)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": "7", "SLURM_ARRAY_TASK_ID": "0",
           "HPCDET_LOCAL_JOB_ID": "7", "HOME": str(run_dir)}
    done = subprocess.run(["bash", str(path)], env=env, cwd=run_dir, capture_output=True,
                          text=True, timeout=20)
    assert done.returncode == 0, done.stderr
    # The whole script ran: the harness started and the exit record was written.
    assert json.loads((run_dir / "exit.json").read_text())["exit_code"] == 0, done.stderr


def _scripts(
    cfg: ExperimentConfig, cluster: ClusterConfig, root: Path, python: str
) -> list[tuple[Scheduler, JobRequest, Path]]:
    paths = StatePaths(root)
    trial = {"id": 2, "trial_seed": 1, "hparams": cfg.hyperparameters}
    options = SlurmScheduler().options(cfg)
    spec = run_spec(cfg, paths, 1, trial, 1, options, Placement(1, 1), cluster)
    run_dir = Path(spec.run_dir)
    array_dir = paths.experiment(1) / "array"
    for d in (run_dir, array_dir):
        d.mkdir(parents=True, exist_ok=True)
    (array_dir / "slot-3").write_text(str(run_dir))
    # The daemon hands variables to the harness in the run spec; the script's own exports
    # (a site template may use them) get them too, to run their quoting.
    stub = {"python": python, "environment": dict(cfg.environment.variables)}
    gpus = Placement(1, 1, gpus=True)
    single = dataclasses.replace(job_request(spec, cfg, cluster, options, gpus, 5), **stub)
    array = dataclasses.replace(
        array_request(1, 0, array_dir, ArraySpec(4, 3, 2), cfg, cluster, options,
                      Placement(1, 1), 0),
        **stub)
    local = LocalScheduler({"jobs_dir": str(root / "jobs")})
    return [(SlurmScheduler(), single, run_dir), (SlurmScheduler(), array, run_dir),
            (local, single, run_dir)]


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_no_user_string_runs_a_command(tmp_path: Path, payload: str) -> None:
    marker = tmp_path / "owned"
    value = payload.replace(MARK, str(marker))
    bin_dir, python = _stubs(tmp_path)
    # Each field on its own: refused, or taken into the one config that sets all of them.
    doc, cluster_doc = copy.deepcopy(BASE), {}
    for field, put in EXPERIMENT_FIELDS.items():
        trial_doc = copy.deepcopy(doc)
        put(trial_doc, value)
        if _accepted(functools.partial(_experiment, trial_doc), field):
            doc = trial_doc
    for key in CLUSTER_FIELDS:
        candidate = {**cluster_doc, key: {"gpu": value} if key == "partitions" else value}
        if _accepted(functools.partial(_cluster, tmp_path, candidate), key):
            cluster_doc = candidate
    cfg, cluster = _experiment(doc), _cluster(tmp_path, cluster_doc)
    root = tmp_path / f"state {value}"  # a state directory named after the payload
    if not _accepted(lambda: [s.render_script(j) for s, j, _ in _scripts(cfg, cluster, root,
                                                                          python)], "run"):
        root = tmp_path / "state"
    for scheduler, job, run_dir in _scripts(cfg, cluster, root, python):
        (run_dir / "exit.json").unlink(missing_ok=True)
        _run(scheduler.render_script(job), run_dir, bin_dir)
        ran_with = (run_dir / "harness-ran").read_bytes().decode()
        assert ran_with == (value if "SWEEP" in cfg.environment.variables else "unset")
        assert not marker.exists(), f"{scheduler.name} ran an injected command"
