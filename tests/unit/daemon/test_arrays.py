from __future__ import annotations

from pathlib import Path

from hpcdet.daemon.arrays import Chunk, next_chunk, owner, tasks_waiting
from hpcdet.schedulers.pbs import PbsScheduler
from hpcdet.schedulers.slurm import SlurmScheduler
from hpcdet.states import JobState


def test_one_array_when_the_site_allows() -> None:
    assert next_chunk(200, 0, False, 1001, None) == Chunk(0, 200)
    assert next_chunk(200, 200, False, 1001, None) is None


def test_max_array_size_splits_by_request_range() -> None:
    chunks = []
    covered = 0
    while (c := next_chunk(120, covered, False, 50, None)) is not None:
        chunks.append(c)
        covered += c.count
    assert chunks == [Chunk(0, 50), Chunk(50, 50), Chunk(100, 20)]


def test_next_array_waits_for_the_previous_to_start_everything() -> None:
    assert next_chunk(120, 50, True, 50, None) is None


def test_submit_limit() -> None:
    assert next_chunk(120, 0, False, 1001, 30) == Chunk(0, 30)
    assert next_chunk(120, 0, False, 1001, 0) is None


def test_owner() -> None:
    chunks = [("10", 0, 50), ("11", 50, 50)]
    assert owner(0, chunks) == ("10", 0)
    assert owner(57, chunks) == ("11", 7)
    assert owner(100, chunks) is None


def test_waiting_tasks_are_told_by_the_backend_s_own_task_ids() -> None:
    # Real OpenPBS 23.06.06: 3[].pbshead running, 3[1]..3[3] queued (issue 39).
    sample = Path(__file__).parents[1] / "schedulers" / "pbs_samples" / "qstat-f-json-t.json"
    pbs = PbsScheduler()
    pbs.user = "pbsuser"
    statuses = pbs.parse_status(sample.read_text())
    pending = [j for j, s in statuses.items() if s.state == JobState.PENDING]
    assert pending == ["3[1].pbshead", "3[2].pbshead", "3[3].pbshead"]
    assert tasks_waiting("3[].pbshead", pending, pbs.array_of)
    assert not tasks_waiting("4[].pbshead", pending, pbs.array_of)
    assert not tasks_waiting("3[].pbshead", ["3[].pbshead"], pbs.array_of)
    slurm = SlurmScheduler()
    assert tasks_waiting("12", ["12_3"], slurm.array_of)
    assert not tasks_waiting("12", ["12", "120_1"], slurm.array_of)
