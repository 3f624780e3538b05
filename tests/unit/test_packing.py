"""Packing's pure parts: the config, a packed run's job id, and the pilot's batch scripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcdet.config import load_experiment_config
from hpcdet.config.cluster import ClusterConfig
from hpcdet.daemon.jobspec import pilot_request
from hpcdet.errors import ConfigError
from hpcdet.rundir.layout import packed_id, packed_run, pilot_of
from hpcdet.schedulers import make_scheduler
from hpcdet.schedulers.base import Placement

CONFIG = """name: p
entrypoint: python3 t.py
searcher: {name: random, metric: x, max_trials: 8, max_length: 1}
resources:
  slots_per_trial: 2
  packing: {slots: 4, walltime: "1:00:00", allocations: 3}
"""


def test_packing_is_a_resources_setting_checked_with_its_path() -> None:
    cfg = load_experiment_config(CONFIG)
    assert cfg.resources.packing == {"slots": 4, "walltime": "1:00:00", "allocations": 3}
    with pytest.raises(ConfigError) as e:
        load_experiment_config(CONFIG.replace("slots: 4, walltime: \"1:00:00\"", "slots: 1"))
    text = str(e.value)
    assert "resources.packing.walltime" in text and "resources.packing.slots" in text


def test_a_packed_runs_job_id_names_its_pilot_and_its_run() -> None:
    job = packed_id("1234", 5, 17, 2)
    assert job == "1234+5.17.2"
    assert (pilot_of(job), packed_run(job)) == ("1234", (5, 17, 2))
    assert (pilot_of("1234"), packed_run("1234_5"), packed_run("1+x.y")) == (None, None, None)


@pytest.mark.parametrize("backend", ["slurm", "pbs", "local"])
def test_a_pilot_holds_its_slots_for_its_walltime_and_runs_the_pilot(
        backend: str, tmp_path: Path) -> None:
    cfg = load_experiment_config(CONFIG)
    scheduler = make_scheduler(backend, {"jobs_dir": str(tmp_path)})
    job = pilot_request(3, 1, tmp_path / "pilot-1", cfg, ClusterConfig(backend=backend),
                        scheduler.options(cfg), Placement(1, 2, False), 0)
    assert (job.num_nodes, job.slots_per_node, job.walltime_seconds, job.pilot) == (
        1, 4, 3600, True)
    script = scheduler.render_script(job)
    assert "hpcdet.launch.pilot" in script and "hpcdet.launch.harness" not in script
    assert f"{tmp_path}/pilot-1" in script
    assert f" 4 {job.deadline_after} &" in script and job.deadline_after == 3600 - 120
    if backend == "slurm":
        assert "#SBATCH --cpus-per-task=4" in script and "#SBATCH --time=0-01:00:00" in script
    if backend == "pbs":
        assert "ncpus=4" in script and "walltime=01:00:00" in script
