"""Issue 43: a Determined script runs off the cluster through `hpcdet local-run`, in the
user's own environment (a venv without hpcdet or Determined), against the Core API's
off-cluster dummies, as it would with Determined installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import EXAMPLES, Hpcdet

# Determined's dummies, as this script sees them: one rank, one operation of length 1,
# checkpoints in a local directory that restore_path reads back, no preemption.
DUMMIES = """
import json, logging, os
import determined as det
import user_helper  # from the user's own PYTHONPATH

logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
assert det.get_cluster_info() is None
with det.core.init() as core:
    ops = []
    for op in core.searcher.operations():
        ops.append(op.length)
        core.train.report_training_metrics(steps_completed=op.length, metrics={"loss": 0.5})
        core.train.report_validation_metrics(steps_completed=op.length, metrics={"acc": 0.9})
        op.report_completed(0.9)
    with core.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
        (path / "state").write_text("42")
    with core.checkpoint.restore_path(uuid) as path:
        restored = (path / "state").read_text()
    print("RESULT " + json.dumps({
        "rank": core.distributed.rank, "size": core.distributed.size, "ops": ops,
        "restored": restored, "preempt": core.preempt.should_preempt(),
        "helper": user_helper.VALUE, "determined": det.__file__,
        "pythonpath": os.environ["PYTHONPATH"].split(os.pathsep),
        "uuid": uuid,
    }))
"""


@pytest.fixture(scope="module")
def user_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The user's own Python: a venv of the interpreter under hpcdet's, with neither hpcdet
    nor Determined in it."""
    venv = tmp_path_factory.mktemp("user") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python3")
    missing = subprocess.run([python, "-c", "import hpcdet"], capture_output=True, cwd="/",
                             check=False)
    assert missing.returncode != 0, "the user's venv must not see hpcdet"
    return python


@pytest.fixture
def hpcdet(tmp_path: Path) -> Hpcdet:
    lib = tmp_path / "userlib"
    lib.mkdir()
    (lib / "user_helper.py").write_text("VALUE = 'mine'\n")
    other = tmp_path / "otherlib"
    other.mkdir()
    return Hpcdet(tmp_path / "h", "local", extra_env={
        "PYTHONPATH": os.pathsep.join([str(lib), str(other)]),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    })


def test_the_core_api_tutorial_runs_off_the_cluster(hpcdet: Hpcdet, user_python: str) -> None:
    p = hpcdet.run("local-run", "--", user_python, str(EXAMPLES / "1_metrics.py"))
    out = p.stdout + p.stderr
    for steps in range(10, 101, 10):
        assert f"report_training_metrics(steps_completed={steps}, metrics={{'x': {steps}}})" in out
    assert "report_validation_metrics(steps_completed=100, metrics={'x': 100})" in out


def test_the_dummies_behave_as_determined_s(
    hpcdet: Hpcdet, user_python: str, tmp_path: Path
) -> None:
    script = tmp_path / "train.py"
    script.write_text(DUMMIES)
    shim = hpcdet.run("shim-path").stdout.strip()
    # A trial's variable left in the shell must not put the script "on the cluster".
    hpcdet.extra_env["HPCDET_CLUSTER_INFO"] = str(tmp_path / "no-such-record.json")
    p = hpcdet.run("local-run", "--", user_python, str(script))
    out = p.stdout + p.stderr
    result = json.loads(next(line[7:] for line in p.stdout.splitlines()
                             if line.startswith("RESULT ")))
    assert result["rank"] == 0 and result["size"] == 1
    assert result["ops"] == [1]
    assert result["restored"] == "42" and result["preempt"] is False
    assert result["determined"].startswith(shim + os.sep)
    # The shim first, then the user's entries in their order.
    user_entries = hpcdet.extra_env["PYTHONPATH"].split(os.pathsep)
    assert result["pythonpath"] == [shim, *user_entries]
    assert result["helper"] == "mine"
    storage = tmp_path / "data" / "hpcdet" / "checkpoints"
    assert [p.name for p in storage.iterdir()] == [result["uuid"]]
    assert "report_training_metrics(steps_completed=1, metrics={'loss': 0.5})" in out
    assert "report_validation_metrics(steps_completed=1, metrics={'acc': 0.9})" in out


def test_the_exit_code_and_the_user_s_arguments_come_through(
    hpcdet: Hpcdet, user_python: str
) -> None:
    # `-c` after local-run is the user's, never hpcdet's choice of a cluster.
    p = hpcdet.run("local-run", user_python, "-c", "import sys; sys.exit(len(sys.argv) + 6)",
                   "-h", check=False)
    assert p.returncode == 8, p.stderr
    p = hpcdet.run("local-run", "--", "no-such-program-here", check=False)
    assert p.returncode == 127
    assert "cannot run 'no-such-program-here'" in p.stderr


def test_shim_path_is_what_to_export(hpcdet: Hpcdet, user_python: str) -> None:
    shim = hpcdet.run("shim-path").stdout.strip()
    env = dict(hpcdet.env(), PYTHONPATH=shim)
    p = subprocess.run([user_python, "-c", "import determined as det; print(det.core.init)"],
                       env=env, capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    assert hpcdet.run("shim-path").stdout.strip() == shim
