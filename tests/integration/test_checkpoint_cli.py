"""`hpcdet checkpoint list --best`, `download` and `delete`, on a real local-backend state."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import Hpcdet

# x at each checkpoint step; larger is better: 20 (9) > 50 (7) > 30 (5) > 10 (3) > 40 (1).
VALUES = {10: 3, 20: 9, 30: 5, 40: 1, 50: 7}

SCRIPT = f"""
import determined as det

with det.core.init() as core_context:
    for steps, x in {VALUES!r}.items():
        with core_context.checkpoint.store_path({{"steps_completed": steps}}) as (path, _):
            (path / "state").write_text(f"{{x}},{{steps}}")
        core_context.train.report_validation_metrics(
            steps_completed=steps, metrics={{"x": x, "steps": steps}}
        )
"""

CONFIG = """
name: checkpoint-cli
entrypoint: python3 validate.py
searcher:
  name: single
  metric: x
  smaller_is_better: false
max_restarts: 0
checkpoint_storage:
  type: shared_fs
  host_path: {storage}
  save_trial_best: 10  # the checkpoint GC keeps all five
"""


@dataclass
class Finished:
    h: Hpcdet
    exp: int
    by_step: dict[int, str]  # steps_completed -> checkpoint uuid
    tmp: Path


def _run_experiment(tmp: Path) -> Finished:
    h = Hpcdet(tmp / "user", "local")
    ctx = tmp / "ctx"
    ctx.mkdir()
    (ctx / "validate.py").write_text(SCRIPT)
    storage = tmp / "storage"
    (ctx / "config.yaml").write_text(CONFIG.format(storage=storage))
    try:
        exp = h.create(ctx / "config.yaml", ctx, "-f")
        assert h.describe(exp)["experiment"]["state"] == "COMPLETED", h.daemon_log()[-3000:]
    except BaseException:
        h.stop()
        raise
    by_step = {}
    for d in storage.iterdir():
        by_step[json.loads((d / "metadata.json").read_text())["steps_completed"]] = d.name
    return Finished(h, exp, by_step, tmp)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Finished]:
    """One finished experiment that the tests below only read."""
    done = _run_experiment(tmp_path_factory.mktemp("ckpt"))
    yield done
    done.h.stop()


def _rows_with(out: str, uuids: dict[int, str]) -> list[int]:
    """The steps of the checkpoints in ``out``, in the order they appear."""
    found = [(out.index(u), step) for step, u in uuids.items() if u in out]
    return [step for _, step in sorted(found)]


def test_list_shows_every_checkpoint_with_its_metric(finished: Finished) -> None:
    out = finished.h.run("checkpoint", "list", str(finished.exp)).stdout
    assert "Validation Metric" in out and "Checkpoint storage:" in out
    assert _rows_with(out, finished.by_step) == [10, 20, 30, 40, 50]
    row = next(line for line in out.splitlines() if finished.by_step[20] in line)
    assert " 9.0 " in row


def test_best_lists_the_best_by_the_searcher_metric_first(finished: Finished) -> None:
    one = finished.h.run("checkpoint", "list", str(finished.exp), "--best", "1").stdout
    assert _rows_with(one, finished.by_step) == [20]
    three = finished.h.run("checkpoint", "list", str(finished.exp), "--best", "3").stdout
    assert _rows_with(three, finished.by_step) == [20, 50, 30]


def test_download_copies_the_checkpoint_and_describes_it(finished: Finished) -> None:
    uuid = finished.by_step[20]
    dest = finished.tmp / "dl"
    out = finished.h.run("checkpoint", "download", uuid, "-o", str(dest)).stdout
    assert (dest / "state").read_text() == "9,20"
    assert json.loads((dest / "metadata.json").read_text()) == {"steps_completed": 20}
    lines = out.splitlines()
    assert lines[:2] == ["Local checkpoint path:", str(dest)]
    for column in ("Experiment ID", "Trial ID", "Steps Completed", "Report Time",
                   "Checkpoint UUID", "Validation Metrics", "Metadata"):
        assert column in out
    row = next(line for line in lines if uuid in line)
    assert '{"x": 9, "steps": 20}' in row
    assert '{"steps_completed": 20}' in row


def test_download_quiet_prints_only_the_default_path(finished: Finished) -> None:
    uuid = finished.by_step[50]
    cwd = finished.tmp / "work"
    cwd.mkdir()
    p = subprocess.run(
        [sys.executable, "-m", "hpcdet.cli.main", "checkpoint", "download", uuid, "-q"],
        env=finished.h.env(), cwd=cwd, capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"checkpoints/{uuid}\n"
    assert (cwd / "checkpoints" / uuid / "state").read_text() == "7,50"


def test_download_of_an_unknown_checkpoint_says_so(finished: Finished) -> None:
    p = finished.h.run("checkpoint", "download", "no-such-uuid", check=False)
    assert p.returncode == 1
    assert "Error: checkpoint no-such-uuid not found" in p.stderr
    assert "Traceback" not in p.stderr


def test_delete_has_the_daemon_delete_the_files(tmp_path: Path) -> None:
    done = _run_experiment(tmp_path)
    try:
        uuid = done.by_step[40]
        out = done.h.run("checkpoint", "delete", uuid, "--yes").stdout
        assert out == f"Deleted checkpoint {uuid}\n"
        assert not (tmp_path / "storage" / uuid).exists()
        listing = done.h.run("checkpoint", "list", str(done.exp)).stdout
        assert _rows_with(listing, done.by_step) == [10, 20, 30, 50]
        again = done.h.run("checkpoint", "delete", uuid, "--yes", check=False)
        assert again.returncode == 1 and "not found" in again.stderr
        download = done.h.run("checkpoint", "download", uuid, check=False)
        assert download.returncode == 1 and "Traceback" not in download.stderr
    finally:
        done.h.stop()
