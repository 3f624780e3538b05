"""The `det` commands a researcher types every day (issue 14), through hpcdet's CLI on the
local backend: aliases and global options, experiment list/config/wait/archive/label/set/
delete, and trial kill."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.scenarios import FIXTURES, _first_checkpoint_seen, max_slots
from tests.support import Hpcdet


def _experiment(h: Hpcdet, tmp: Path, name: str, steps: int, labels: str = "[]") -> int:
    ctx = tmp / f"ctx-{name}"
    ctx.mkdir()
    (ctx / "long.py").write_text((FIXTURES / "long_training.py").read_text())
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(f"name: {name}\nentrypoint: python3 long.py\nlabels: {labels}\n"
                   "searcher: {name: single, metric: x, max_length: 1}\nmax_restarts: 0\n"
                   f"environment:\n  environment_variables: [STEPS={steps}]\n")
    return h.create(cfg, ctx)


def test_global_options_and_one_letter_aliases(local_hpcdet: Hpcdet) -> None:
    h = local_hpcdet
    version = h.run("--version").stdout
    assert version.startswith("hpcdet ") and "Determined 0.38.0 API" in version
    assert h.run("version").stdout == version
    assert h.run("-v").stdout == version
    assert "Usage:" in h.run("-h").stdout
    for alias, group in (("e", "experiment"), ("t", "trial"), ("c", "checkpoint"),
                         ("j", "job")):
        short, long = h.run(alias, "-h").stdout, h.run(group, "--help").stdout
        assert f" {alias} [OPTIONS]" in short and f" {group} [OPTIONS]" in long
        # the same group: the same text after the usage line, whose padding differs
        assert short.split("\n", 2)[2] == long.split("\n", 2)[2]
    assert h.run("e", "ls", "--json").stdout.strip() == "[]"


def test_an_experiment_is_listed_labelled_renamed_archived_and_deleted(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    h = local_hpcdet
    done = _experiment(h, tmp_path, "short", 2, labels="[base]")
    running = _experiment(h, tmp_path, "long", 600)

    # wait: 0 for a completed experiment (silent, as det's), 1 for one that ends otherwise
    assert h.run("e", "wait", str(done), "--polling-interval", "0.2").stdout == ""
    h.wait_for("a first checkpoint", lambda: _first_checkpoint_seen(h, running))
    uuid = h.describe(running)["trials"][0]["latest_checkpoint"]
    assert len(list(h.root.rglob(uuid))) == 1
    assert h.run("trial", "kill", str(h.describe(running)["trials"][0]["id"])).stdout.startswith(
        "Killed trial")
    waited = h.run("e", "wait", str(running), "--polling-interval", "0.2", check=False)
    assert waited.returncode == 1 and "ended as CANCELED" in waited.stderr
    assert h.describe(running)["trials"][0]["end_reason"] == "canceled by the user"

    assert "name: short" in h.run("e", "config", str(done)).stdout
    h.run("e", "label", "add", str(done), "keep")
    h.run("e", "label", "add", str(done), "keep")  # once only
    h.run("e", "label", "remove", str(done), "base")
    h.run("e", "set", "name", str(done), "renamed")
    h.run("e", "set", "description", str(done), "the baseline")
    listed = json.loads(h.run("e", "list", "--json").stdout)
    assert [(e["id"], e["name"], e["labels"], e["description"]) for e in listed] == [
        (done, "renamed", ["keep"], "the baseline"), (running, "long", [], "")]
    assert [e["id"] for e in json.loads(h.run("e", "list", "--json", "--label", "keep").stdout)
            ] == [done]
    assert [e["id"] for e in json.loads(
        h.run("e", "list", "--json", "--offset", "1", "--limit", "1").stdout)] == [running]
    text = h.run("e", "describe", str(done)).stdout
    assert "description: the baseline" in text and "labels: keep" in text

    h.run("e", "archive", str(done))
    assert [e["id"] for e in json.loads(h.run("e", "list", "--json").stdout)] == [running]
    assert [e["archived"] for e in json.loads(h.run("e", "list", "--all", "--json").stdout)
            ] == [True, False]
    h.run("e", "unarchive", str(done))

    assert h.run("e", "delete", str(running), "--yes").stdout.strip() == \
        f"Deleted experiment {running}"
    assert [e["id"] for e in json.loads(h.run("e", "list", "--json").stdout)] == [done]
    gone = h.run("e", "describe", str(running), check=False)
    assert gone.returncode == 1 and "Traceback" not in gone.stderr
    assert not (h.state / "runs" / f"exp-{running}").exists()
    assert list(h.root.rglob(uuid)) == []  # its checkpoints went with it
    # A deleted experiment's id is not given again.
    assert _experiment(h, tmp_path, "after", 2) == running + 1


def test_what_cannot_be_done_is_refused_with_the_reason(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    h = local_hpcdet
    running = _experiment(h, tmp_path, "long", 600)
    for args, said in (
        (("e", "archive", str(running)), "only a finished experiment can be archived"),
        (("e", "delete", str(running), "--yes"), "only a finished experiment can be deleted"),
        (("e", "set", "name", str(running), " "), "an experiment's name cannot be empty"),
        (("t", "logs", "1", "--head", "1", "--tail", "1"), "--head cannot be combined"),
        (("t", "logs", "1", "--level", "LOUD"), "--level must be one of"),
    ):
        p = h.run(*args, check=False)
        assert p.returncode != 0 and said in p.stderr, (args, p.stderr)
        assert "Traceback" not in p.stderr
    h.run("e", "kill", str(running))


# Three checkpoints, each with a validation; the best loss is at the second.
CHECKPOINTS = '''
import logging, pathlib
import determined as det
logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
with det.core.init() as core_context:
    for step, loss in ((1, 0.5), (2, 0.1), (3, 0.3)):
        logging.warning("step %d", step)
        core_context.train.report_validation_metrics(steps_completed=step,
                                                     metrics={"loss": loss, "acc": 1 - loss})
        with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
            (path / "step").write_text(str(step))
'''


def test_checkpoints_and_logs_from_the_experiment_trial_and_checkpoint_commands(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    h = local_hpcdet
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "ckpt.py").write_text(CHECKPOINTS)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("name: ckpts\nentrypoint: python3 ckpt.py\n"
                   "searcher: {name: single, metric: loss, max_length: 3}\n"
                   "checkpoint_storage: {save_trial_best: 5, save_trial_latest: 5}\n")
    exp = h.create(cfg, ctx)
    h.run("e", "wait", str(exp), "--polling-interval", "0.2")
    trial = h.describe(exp)["trials"][0]["id"]
    listed = list(csv.DictReader(h.run("e", "lc", str(exp), "--csv").stdout.splitlines()))
    by_step = {int(row["Steps Completed"]): row["UUID"] for row in listed}
    assert sorted(by_step) == [1, 2, 3], by_step
    plain = h.run("e", "lc", str(exp)).stdout  # piped: one line per checkpoint, whole uuids
    assert all(uuid in plain for uuid in by_step.values())

    lt = h.run("e", "lt", str(exp), "--csv").stdout.splitlines()
    assert lt[0] == "Trial ID,State,H-Params,Started,Ended,# of Batches"
    assert lt[1].startswith(f"{trial},COMPLETED,") and lt[1].endswith(",3")

    def downloaded(*args: str) -> str:
        path = Path(h.run(*args, "-q").stdout.strip())
        if not path.is_absolute():
            path = Path.cwd() / path
        return (path / "step").read_text()

    out = tmp_path / "out"
    assert downloaded("t", "download", str(trial), "--best", "-o", str(out / "b")) == "2"
    assert downloaded("t", "download", str(trial), "--latest", "-o", str(out / "l")) == "3"
    assert downloaded("t", "download", str(trial), "--uuid", by_step[1], "-o",
                      str(out / "u")) == "1"
    assert downloaded("t", "download", str(trial), "--best", "--sort-by", "acc",
                      "--smaller-is-better", "false", "-o", str(out / "a")) == "2"
    h.run("e", "download", str(exp), "--top-n", "2", "-o", str(out / "top"), "-q")
    assert sorted(p.name for p in (out / "top").iterdir()) == sorted([by_step[2], by_step[3]])
    assert downloaded("c", "download", by_step[3], "--mode", "direct", "-o",
                      str(out / "c")) == "3"
    master = h.run("c", "download", by_step[3], "--mode", "master", check=False)
    assert master.returncode != 0 and "does not have" in master.stderr

    described = json.loads(h.run("c", "describe", by_step[2], "--json").stdout)
    assert (described["trial_id"], described["steps_completed"]) == (trial, 2)
    assert described["validation_metrics"] == {"loss": 0.1, "acc": 0.9}
    h.run("c", "delete", f"{by_step[1]},{by_step[3]}", "--yes")
    assert json.loads(h.run("c", "describe", by_step[1], "--json").stdout)["state"] == "DELETED"
    assert not (out / "top" / by_step[3] / "missing").exists()

    # describe of several experiments: Determined's three sheets
    other = h.create(cfg, ctx)
    h.run("e", "wait", str(other), "--polling-interval", "0.2")
    sheets = h.run("e", "describe", f"{exp},{other}", "--csv", "--metrics").stdout
    assert sheets.startswith("Experiments:\nExperiment ID,State,") and "\nTrials:\n" in sheets
    assert "Metric: loss" in sheets and sheets.count("\nWorkloads:\n") == 1
    h.run("e", "describe", f"{exp},{other}", "--outdir", str(tmp_path / "sheets"))
    trials_csv = (tmp_path / "sheets" / "trials.csv").read_text().splitlines()
    assert len(trials_csv) == 3 and trials_csv[0].startswith("Trial ID,Experiment ID,State")
    assert len(json.loads(h.run("e", "describe", f"{exp},{other}", "--json").stdout)) == 2
    assert "Workloads" in h.run("e", "describe", str(exp), "--metrics").stdout
    # a GC policy tightened afterwards deletes what it no longer keeps: the best (step 2)
    # and the latest (step 3) stay of the other experiment's three
    h.run("e", "set", "gc-policy", str(other), "--save-experiment-best", "0",
          "--save-trial-best", "1", "--save-trial-latest", "1", "--yes")
    kept = h.run("e", "lc", str(other), "--csv").stdout.splitlines()[1:]
    assert sorted(int(line.split(",")[1]) for line in kept) == [2, 3]

    logs = h.run("e", "logs", str(exp), "--level", "WARNING", "--json").stdout.splitlines()
    assert [json.loads(line)["message"].split(": ")[-1] for line in logs] == [
        "step 1", "step 2", "step 3"]
    assert h.run("t", "logs", str(trial), "--tail", "1").stdout.count("\n") == 1


def test_submit_and_the_create_flags_paused_include_and_test(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    h = local_hpcdet
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    # The script needs a file the context lacks; --include brings it.
    (ctx / "train.py").write_text(
        "import pathlib\nimport determined as det\n"
        "x = int(pathlib.Path('extra.txt').read_text())\n"
        "with det.core.init() as core_context:\n"
        "    core_context.train.report_validation_metrics(steps_completed=1, metrics={'x': x})\n")
    extra = tmp_path / "shared" / "extra.txt"
    extra.parent.mkdir()
    extra.write_text("42")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("name: flags\nentrypoint: python3 train.py\nmax_restarts: 3\n"
                   "searcher: {name: random, metric: x, max_trials: 2, max_length: {batches: 9}}\n"
                   "hyperparameters: {lr: {type: double, minval: 0.1, maxval: 1}}\n")

    tested = h.run("e", "create", str(cfg), str(ctx), "--test", "-i", str(extra))
    assert "Model definition test succeeded!" in tested.stdout
    test_exp = int(tested.stdout.split("Created test experiment ")[1].split()[0])
    d = h.describe(test_exp)
    assert (d["experiment"]["name"], d["config"]["searcher"]["name"],
            d["config"]["searcher"]["max_length"], d["config"]["max_restarts"]) == (
        "flags (test)", "single", {"batches": 1}, 0)
    assert len(d["trials"]) == 1 and d["experiment"]["state"] == "COMPLETED"

    paused = h.create(cfg, ctx, "--paused", "--include", str(extra))
    d = h.describe(paused)
    assert d["experiment"]["state"] == "PAUSED" and d["runs"] == []
    assert {t["state"] for t in d["trials"]} == {"PAUSED"}
    h.run("e", "activate", str(paused))
    assert h.wait_state(paused, {"COMPLETED", "ERROR"})["experiment"]["state"] == "COMPLETED"
    assert {r["metrics"]["x"] for t in h.describe(paused)["trials"]
            for r in h.metrics(t["id"])} == {42}

    clash = h.run("e", "create", str(cfg), str(ctx), "-i", str(ctx / "train.py"), check=False)
    assert clash.returncode == 1 and "already has train.py" in clash.stderr

    # What the size of a file does not bound (issue 37): refused by name, no traceback, and the
    # experiments already there untouched.
    before = h.run("e", "list", "--all", "--json").stdout
    huge = tmp_path / "weights.pt"
    with huge.open("wb") as f:
        f.truncate(120_000_000)  # sparse: costs no disk
    for extra, why in [(["-i", str(huge)], "holds more than the 95 MB limit of files (at "
                                           "least 120.0 MB). The biggest files:\n"
                                           "     120.0 MB  weights.pt"),
                       ([], "'pagemap' in the context directory")]:
        if not extra:
            (ctx / "pagemap").symlink_to("/proc/self/pagemap")
        refused = h.run("e", "create", str(cfg), str(ctx), *extra, check=False)
        assert refused.returncode == 1 and why in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr + refused.stdout
    (ctx / "pagemap").unlink()
    assert h.run("e", "list", "--all", "--json").stdout == before
    assert not list((h.state / "requests").glob("*.context"))

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "train.py").write_text((ctx / "train.py").read_text())
    (tmp_path / "sub" / "extra.txt").write_text("7")
    (tmp_path / "sub" / "cfg.yaml").write_text(cfg.read_text())
    said = h.run("submit", str(tmp_path / "sub" / "cfg.yaml")).stdout
    exp = int(said.split("Created experiment ")[1].split()[0])
    assert f"hpcdet experiment logs {exp} -f" in said and f"experiment wait {exp}" in said
    h.run("e", "wait", str(exp), "--polling-interval", "0.2")


def test_max_slots_caps_the_trials_running_at_once(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    most, _ = max_slots(local_hpcdet, tmp_path, cap=1, trials=3)
    assert most == 1
