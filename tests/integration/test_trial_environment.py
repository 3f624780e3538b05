"""What Determined scripts read and call inside a trial (issue 14): the DET_* variables, the
metric group constants, det.__version__, alert, set_metadata, set_status and batch_metrics,
on the local backend through the CLI; and a checkpoint_storage of GC settings alone."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import Hpcdet

# Written as a Determined user writes it: the config from DET_EXPERIMENT_CONFIG (as a
# Determined HPC test fixture does), the group names from determined.common.util.
SCRIPT = '''
import json, os
import determined as det
from determined.common import util as det_util
from packaging.version import Version

config = json.loads(os.environ["DET_EXPERIMENT_CONFIG"])
assert config["name"] == "det-env", config
assert Version(det.__version__) >= Version("0.38"), det.__version__
for key in ("DET_TRIAL_ID", "DET_EXPERIMENT_ID", "DET_TRIAL_SEED", "DET_HPARAMS", "DET_USER",
            "DET_CLUSTER_ID", "DET_RESOURCES_TYPE", "DET_RESOURCES_ID", "DET_CONTAINER_ID",
            "DET_STEPS_COMPLETED", "DET_WORKDIR"):
    assert os.environ.get(key), key
assert os.path.samefile(os.environ["DET_WORKDIR"], os.getcwd())

with det.core.init() as core_context:
    assert core_context.train.get_metadata() == {}
    core_context.train.set_metadata({"dataset": {"name": "digits"}, "epochs": 1})
    core_context.train.set_metadata({"dataset": {"rows": 1797}})
    assert core_context.train.get_metadata() == {
        "dataset": {"name": "digits", "rows": 1797}, "epochs": 1}
    core_context.train.set_status("warming up")
    core_context.alert(title="loss spike", description="loss 9.5 at batch 3", level="warning")
    core_context.train.report_training_metrics(
        steps_completed=2, metrics={"loss": 1.5},
        batch_metrics=[{"loss": 2.0}, {"loss": 1.0}])
    core_context.train._report_trial_metrics(
        group=det_util._LEGACY_VALIDATION, total_batches=2, metrics={"x": 2})
    core_context.train.report_metrics(det_util._INFERENCE, 2, {"latency": 0.5})
    core_context.train.set_status("done")
'''


def test_a_determined_script_reads_and_reports_what_it_would_on_determined(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    h = local_hpcdet
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text(SCRIPT)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("name: det-env\nentrypoint: python3 train.py\n"
                   "searcher: {name: single, metric: x, max_length: 2}\nmax_restarts: 0\n"
                   # GC settings alone, as several official examples write them
                   "checkpoint_storage: {save_trial_best: 3}\n")
    exp = h.create(cfg, ctx)
    d = h.wait_state(exp, {"COMPLETED", "ERROR"})
    trial = d["trials"][0]["id"]
    assert d["experiment"]["state"] == "COMPLETED", h.run("trial", "logs", str(trial)).stdout
    storage = d["config"]["checkpoint_storage"]
    assert (storage["type"], storage["save_trial_best"]) == ("shared_fs", 3), storage

    shown = json.loads(h.run("trial", "describe", str(trial), "--json", "--metrics").stdout)
    assert shown["status"] == "done"
    assert shown["metadata"] == {"dataset": {"name": "digits", "rows": 1797}, "epochs": 1}
    assert [(a["level"], a["title"], a["description"]) for a in shown["alerts"]] == [
        ("warn", "loss spike", "loss 9.5 at batch 3")]
    by_group = {m["group"]: m for m in shown["metrics"]}
    assert by_group["training"]["batch_metrics"] == [{"loss": 2.0}, {"loss": 1.0}]
    assert by_group["validation"]["metrics"] == {"x": 2}
    assert by_group["inference"]["metrics"] == {"latency": 0.5}

    sheet = h.run("trial", "describe", str(trial), "--csv", "--metrics").stdout
    assert sheet.startswith("Trial ID,Experiment ID,State,Status,") and ",done," in sheet
    assert "\nGroup,Steps Completed,Run,Reported," in sheet
    text = h.run("trial", "describe", str(trial)).stdout
    assert "loss spike" in text and "digits" in text and "done" in text
    assert "done" in h.run("experiment", "describe", str(exp)).stdout
    logs = h.run("trial", "logs", str(trial)).stdout
    assert "alert: loss spike: loss 9.5 at batch 3" in logs
