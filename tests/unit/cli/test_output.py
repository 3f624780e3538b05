"""User strings reach the terminal as text: never rich markup, never raw control characters
(issue 9, item 4). Through the real CLI commands (in process) over a database holding
experiments with hostile names."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpcdet.cli.common import visible
from hpcdet.cli.main import app
from hpcdet.paths import StatePaths
from hpcdet.store.models import Experiment, Metric, Run, Trial
from hpcdet.store.repository import Store

NAMES = ["[/oops]", "[v2] run", "\x1b[31mred", "a\rb", "rtl \u202eabc", "bell\x07 :x: [bold]b"]
SHOWN = ["[/oops]", "[v2] run", "\\x1b[31mred", "a\\rb", "rtl \\u202eabc",
         "bell\\x07 :x: [bold]b"]
RAW = ("\x1b", "\r", "\x07", "\u202e")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("HPCDET_HOME", str(state))
    store = Store(StatePaths(state).database())
    config = json.dumps({"searcher": {"name": "single", "metric": "loss"}})
    with store.session() as s:
        for i, name in enumerate(NAMES, start=1):
            s.add(Experiment(id=i, name=name, config_json=config, created=time.time(),
                             resource_pool=name, error=f"failed: {name}"))
            s.flush()
            s.add(Trial(id=i, experiment_id=i, hparams_json=json.dumps({name: name}),
                        end_reason=name))
            s.flush()
            s.add(Run(trial_id=i, run_id=1, job_id=f"{i}", reason=name, submitted=time.time()))
            s.add(Metric(trial_id=i, run_id=1, seq=1, group=name, steps_completed=1,
                         last_step=1, metrics_json=json.dumps({name: name}),
                         reported=time.time()))
    store.close()
    return state


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    for raw in RAW:
        assert raw not in result.output, repr(result.output)
    return result.output


def test_experiment_list_shows_every_name_as_text(home: Path) -> None:
    out = cli("experiment", "list")
    for shown in SHOWN:
        assert shown in out, out


def test_experiment_list_csv_neutralises_control_characters(home: Path) -> None:
    rows = list(csv.reader(io.StringIO(cli("experiment", "list", "--csv"))))
    assert [r[2] for r in rows[1:]] == SHOWN
    assert [r[8] for r in rows[1:]] == SHOWN


@pytest.mark.parametrize("exp_id", range(1, len(NAMES) + 1))
def test_describe_shows_the_name_error_and_trials_as_text(home: Path, exp_id: int) -> None:
    out = cli("experiment", "describe", str(exp_id))
    shown = SHOWN[exp_id - 1]
    assert f"Experiment {exp_id}: {shown}" in out
    assert f"error: failed: {shown}" in out
    assert out.count(shown) >= 4, out  # name, error, trial reason, job reason


@pytest.mark.parametrize("exp_id", [1, 3, 4])
def test_trial_metrics_show_metric_names_and_values_as_text(home: Path, exp_id: int) -> None:
    shown = SHOWN[exp_id - 1]
    assert cli("trial", "metrics", str(exp_id)).count(shown) == 3  # group, name, value
    header, row = csv.reader(io.StringIO(cli("trial", "metrics", str(exp_id), "--csv")))
    assert (header[-1], row[0], row[-1]) == (shown, shown, shown)


def test_visible_keeps_text_and_escapes_only_control_characters() -> None:
    assert visible("é [b]x[/b] :smile: \\ tab\there") == "é [b]x[/b] :smile: \\ tab\\there"
    assert visible("two\nlines\ttab\x1b", keep_lines=True) == "two\nlines\ttab\\x1b"
    assert visible("\u2028\x85\u2066\U0001f600") == "\\u2028\\x85\\u2066\U0001f600"
    assert visible(None) == "" and visible(3) == "3"


def test_a_piped_table_is_plain_text_one_line_per_row(home: Path) -> None:
    lines = cli("experiment", "list").splitlines()
    assert [c.strip() for c in lines[0].split(" | ")[:3]] == ["ID", "Owner", "Name"]
    assert set(lines[1]) <= {"-", "+"}
    assert len(lines) == 2 + len(NAMES)  # no wrapping, no box
    assert not any(ch in "".join(lines) for ch in "│┃━─")
    assert lines[2].split(" | ")[2].strip() == "[/oops]"
