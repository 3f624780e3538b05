"""Retention: the GC policy over ended trials' checkpoints."""

from __future__ import annotations

from pathlib import Path

from hpcdet.daemon.ingestion import Ingestion
from hpcdet.store.entries import TrialStateChanged
from tests.unit.daemon.services.support import World


def test_the_gc_policy_keeps_the_best_and_deletes_the_rest(tmp_path: Path) -> None:
    w = World(tmp_path)
    storage = {"type": "shared_fs", "host_path": str(tmp_path / "ckpts"),
               "save_trial_best": 1, "save_trial_latest": 0, "save_experiment_best": 0}
    w.experiment(1, checkpoint_storage=storage)
    w.trial(1, 1)
    run_dir = w.run(1, 1, job_id="101")
    events = []
    for steps, loss in ((1, 0.9), (2, 0.1), (3, 0.5)):
        (tmp_path / "ckpts" / f"c{steps}").mkdir(parents=True)
        events += [("metrics", {"group": "validation", "steps_completed": steps,
                                "metrics": {"loss": loss}}),
                   ("checkpoint", {"uuid": f"c{steps}", "steps_completed": steps})]
    w.report(run_dir, *events)
    Ingestion(w.store, w.paths, w.configs, w.search, w.guard()).ingest(w.store.runs()[0])
    trial = w.store.trial(1)  # a batch of validations and checkpoints: both kept
    assert (trial.best_validation, trial.latest_checkpoint, trial.steps_completed) == (
        0.1, "c3", 3)
    retention = w.retention()
    retention.collect(w.store.experiment(1))
    assert len(w.store.checkpoints(exp_id=1)) == 3  # the trial still runs
    w.journal.record(1, TrialStateChanged(trial_id=1, state="COMPLETED"))
    retention.collect(w.store.experiment(1))
    assert [c.uuid for c in w.store.checkpoints(exp_id=1)] == ["c2"]
    assert sorted(p.name for p in (tmp_path / "ckpts").iterdir()) == ["c2"]
