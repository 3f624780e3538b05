"""A job state the backend cannot name (``JobState.UNKNOWN``: a word of a newer Slurm, a
garbled line) says nothing about the run: it keeps its last known state and stays live, so its
end is still seen."""

from __future__ import annotations

from pathlib import Path

from hpcdet.states import RunState
from tests.unit.daemon.fake_local import FakeLocal, asha_config, create, drive, new_daemon


def test_a_job_in_a_state_the_backend_cannot_name_stays_live(tmp_path: Path) -> None:
    cluster = FakeLocal()
    daemon = new_daemon(tmp_path, cluster)
    daemon.reconcile()
    exp_id = create(daemon, asha_config(max_trials=1, max_concurrent_trials=1))
    daemon.tick()
    cluster.step()  # the job starts
    daemon.tick()
    [job] = cluster.live()
    job.state = "SOMETHING_NEW"  # parsed as JobState.UNKNOWN
    for _ in range(3):
        daemon.tick()
    [run] = daemon.store.runs(live_only=True)
    assert run.state == RunState.RUNNING
    job.state = "RUNNING"
    drive(daemon, cluster)
    assert daemon.store.experiment(exp_id).state == "COMPLETED"
