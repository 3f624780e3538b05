"""The SDK's checkpoint listings (issue 37): ``list_checkpoints`` gives every checkpoint, as
Determined's does, best first by the searcher metric and those without it last."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcdet import client, sdk_source
from hpcdet.paths import StatePaths
from tests.unit.store.store_support import LOSS_SEARCHER, Journaled, write_events

# Trial 1 of experiment 1: checkpoints at steps 1..6; the loss was validated at steps 1..3 only.
LOSSES = {1: 0.9, 2: 0.2, 3: 0.5}


@pytest.fixture
def journaled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Journaled]:
    paths = StatePaths(tmp_path / "state")
    j = Journaled(tmp_path)
    j.experiment(1)
    j.trial(1, 1)
    j.run(1, 1, job_id="101")
    events = tmp_path / "events.jsonl"
    for steps in range(1, 7):
        if steps in LOSSES:
            write_events(events, ("metrics", {"group": "validation", "steps_completed": steps,
                                              "metrics": {"loss": LOSSES[steps]}}))
        write_events(events, ("checkpoint", {"uuid": f"c{steps}", "steps_completed": steps,
                                             "resources": {"a": 1}}))
    j.store.ingest_events(1, 1, events, LOSS_SEARCHER)
    monkeypatch.setenv("HPCDET_HOME", str(paths.root))
    monkeypatch.setitem(sdk_source._stores, paths.root, j.store)  # the SDK reads this database
    yield j


def test_list_checkpoints_gives_all_best_first_and_those_without_the_metric_last(
    journaled: Journaled
) -> None:
    expected = ["c2", "c3", "c1", "c6", "c5", "c4"]
    trial = client.get_trial(1)
    assert [c.uuid for c in trial.list_checkpoints()] == expected
    assert [c.uuid for c in trial.list_checkpoints(max_results=4)] == expected[:4]
    assert [c.uuid for c in client.get_experiment(1).list_checkpoints()] == expected
    # The best ones are still those with the metric.
    assert trial.top_checkpoint().uuid == "c2"
    assert [c.uuid for c in client.get_experiment(1).top_n_checkpoints(5)] == expected[:3]
