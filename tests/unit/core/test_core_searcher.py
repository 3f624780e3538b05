"""core_context.searcher: operations from searcher.max_length and their reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hpcdet import core
from hpcdet.core._events import RunEvents
from hpcdet.core._searcher import configured_length
from tests.unit.core.core_fakes import make_run


@pytest.fixture
def trial_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    def make(searcher: dict[str, Any]) -> Any:
        run = make_run(tmp_path, config={"searcher": searcher})
        monkeypatch.setenv("HPCDET_CLUSTER_INFO", str(run.info_path))
        return run

    return make


def test_enum_values_are_determined_s() -> None:
    assert core.SearcherMode.WorkersAskChief.value == "WORKERS_ASK_CHIEF"
    assert core.SearcherMode.ChiefOnly.value == "CHEIF_ONLY"


@pytest.mark.parametrize(
    ("searcher", "expected"),
    [
        ({"max_length": 100}, (100, None)),
        ({"max_length": {"batches": 30}}, (30, core.Unit.BATCHES)),
        ({"max_length": {"epochs": 2}}, (2, core.Unit.EPOCHS)),
        ({"max_length": 5, "unit": "records"}, (5, core.Unit.RECORDS)),
        ({"name": "single"}, (None, None)),
    ],
)
def test_configured_length(searcher: dict[str, Any], expected: Any) -> None:
    assert configured_length(searcher) == expected


@pytest.mark.parametrize("bad", [{"minutes": 3}, {"batches": 1, "epochs": 1}, "100", True])
def test_configured_length_refuses_other_shapes(bad: Any) -> None:
    with pytest.raises(ValueError, match="searcher.max_length must be"):
        configured_length({"max_length": bad})


def test_one_operation_of_max_length(trial_with: Any) -> None:
    run = trial_with({"name": "single", "metric": "x", "max_length": {"batches": 20}})
    with core.init() as ctx:
        assert ctx.searcher.get_configured_units() == core.Unit.BATCHES
        ops = list(_complete_all(ctx, metric=0.5))
    assert [op.length for op in ops] == [20]
    assert [(b["length"], b["metric"]) for b in run.bodies("searcher_completed")] == [(20, 0.5)]
    assert [b["length"] for b in run.bodies("searcher_progress")] == [10.0]


def _complete_all(ctx: core.Context, metric: Any) -> Any:
    for op in ctx.searcher.operations():
        op.report_progress(op.length / 2)
        op.report_completed(metric)
        yield op


def test_operation_must_be_completed(trial_with: Any) -> None:
    trial_with({"max_length": 10})
    with core.init() as ctx:
        ops = ctx.searcher.operations()
        next(ops)
        with pytest.raises(RuntimeError) as err:
            next(ops)
    assert str(err.value) == "you must call op.report_completed() on each operation"


def test_operation_completed_once(trial_with: Any) -> None:
    trial_with({"max_length": 10})
    with core.init() as ctx:
        op = next(ctx.searcher.operations())
        with pytest.raises(TypeError, match="takes a number or a dict"):
            op.report_completed("high")
        op.report_completed({"x": 1.0})
        with pytest.raises(RuntimeError) as err:
            op.report_completed(1.0)
        assert str(err.value) == "you may only call op.report_completed() once"
        op.report_progress(10)
        with pytest.raises(RuntimeError, match="after op.report_completed"):
            op.report_progress(5)
        # The one operation is used up: a second iteration yields nothing.
        assert list(ctx.searcher.operations()) == []


def test_no_max_length_explains_what_is_needed(trial_with: Any) -> None:
    trial_with({"name": "adaptive_asha", "time_metric": "batches", "max_time": 100})
    with core.init() as ctx:
        assert isinstance(ctx.searcher, core.SearcherContextMissing)
        with pytest.raises(ValueError, match="needs `searcher.max_length`"):
            ctx.searcher.operations()


class _Lengths:
    """An operation source as the daemon will feed one: several lengths in turn."""

    def __init__(self, *lengths: int) -> None:
        self._lengths = list(lengths)

    def next_length(self) -> int | None:
        return self._lengths.pop(0) if self._lengths else None


def test_several_operations_from_another_source(tmp_path: Path) -> None:
    emitted: list[tuple[str, dict[str, Any]]] = []

    class Recorder(RunEvents):
        def emit(self, type_: str, body: dict[str, Any], *, flush: bool = False) -> None:
            emitted.append((type_, body))

    searcher = core.SearcherContext(
        core.DummyDistributedContext(), Recorder(None), _Lengths(10, 40, 160)
    )
    lengths = []
    for op in searcher.operations():
        lengths.append(op.length)
        op.report_completed(float(op.length))
    assert lengths == [10, 40, 160]
    assert [b["length"] for _, b in emitted] == [10, 40, 160]


def test_chief_only_mode_refuses_workers() -> None:
    dist = core.DistributedContext(
        rank=1, size=2, local_rank=1, local_size=2, cross_rank=0, cross_size=1
    )
    searcher = core.SearcherContext(dist, RunEvents(None), _Lengths(1))
    with pytest.raises(RuntimeError) as err:
        searcher.operations(core.SearcherMode.ChiefOnly)
    assert str(err.value) == (
        "you cannot call searcher.operations(searcher_mode=ChiefOnly) from a non-chief worker."
    )


def test_off_cluster_one_operation_of_length_one(off_cluster: Path) -> None:
    with core.init() as ctx:
        ops = list(_complete_all(ctx, metric=1.0))
        assert [op.length for op in ops] == [1]
        assert ctx.searcher.get_configured_units() == core.Unit.EPOCHS
