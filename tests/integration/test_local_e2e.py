"""The tutorial stages and the daemon's guarantees on the local backend (no Slurm needed)."""

from __future__ import annotations

from pathlib import Path

from tests import scenarios
from tests.support import Hpcdet


def test_stage0(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.stage0(local_hpcdet, tmp_path)


def test_stage1_metrics(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.stage1(local_hpcdet, tmp_path)


def test_stage2_checkpoints(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.stage2(local_hpcdet, tmp_path)


def test_pause_and_activate_resume_from_checkpoint(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.pause_activate(local_hpcdet, tmp_path)


def test_bad_config_reports_everything(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.bad_config(local_hpcdet, tmp_path)


def test_hostile_values_execute_nothing(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.hostile_values(local_hpcdet, tmp_path)


def test_metrics_exact_after_daemon_sigkills(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.metrics_survive_daemon_kills(local_hpcdet, tmp_path)


def test_database_on_local_disk_and_rebuilt_from_run_tree(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    scenarios.rebuild_on_network_fs(local_hpcdet, tmp_path)


def test_cli_on_another_login_node_names_the_daemon_host(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    import json
    import time

    h = local_hpcdet
    h.run("daemon", "start")
    h.stop()
    record = json.loads((h.state / "daemon.json").read_text())
    record.update(host="login2.example", running=True, heartbeat=time.time())
    (h.state / "daemon.json").write_text(json.dumps(record))
    h.extra_env["HPCDET_REQUEST_TIMEOUT"] = "2"
    listed = h.run("experiment", "list", check=False)
    assert listed.returncode == 1 and "login2.example" in listed.stderr
    assert "Traceback" not in listed.stderr
    paused = h.run("experiment", "pause", "1", check=False)
    assert paused.returncode == 1 and "login2.example" in paused.stderr
    # The request waits in the shared state directory for the daemon on login2.
    assert list((h.state / "requests").glob("*.json"))
    started = h.run("daemon", "start", check=False)
    assert started.returncode == 1 and "runs on host login2.example" in started.stderr


def test_cluster_show_prints_settings(local_hpcdet: Hpcdet) -> None:
    shown = local_hpcdet.run("cluster", "show")
    out = shown.stdout
    assert "min_poll_interval" in out and "backend in use: local" in out
    # The cluster config's runtime (apptainer by default), found or not, without a traceback.
    assert "container runtime: apptainer" in out and "Traceback" not in shown.stderr
    (local_hpcdet.root / "cluster.yaml").write_text("backend: local\ncontainer_runtime: enroot\n")
    assert "container runtime: enroot not found on PATH" in local_hpcdet.run(
        "cluster", "show").stdout


def test_startup_hook_and_list_entrypoint(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.startup_hook_and_list_entrypoint(local_hpcdet, tmp_path)


def test_startup_hooks_run_in_bash_and_stop_at_a_failure(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    scenarios.startup_hooks_run_in_bash_and_stop_at_a_failure(local_hpcdet, tmp_path)


def test_kill_running_experiment(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.kill_running_experiment(local_hpcdet, tmp_path)


def test_an_unreadable_run_stalls_only_its_experiment(local_hpcdet: Hpcdet, tmp_path: Path
                                                       ) -> None:
    scenarios.unreadable_run_is_its_experiments_fault(local_hpcdet, tmp_path)


def test_failing_trial_uses_up_max_restarts(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.failing_trial_restarts(local_hpcdet, tmp_path)


def test_asha_v037_on_the_local_backend(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    d = scenarios.asha_v037(local_hpcdet, tmp_path)
    assert d["arrays"] == []


def test_asha_v038_on_the_local_backend(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.asha_v038(local_hpcdet, tmp_path)


def test_job_list_and_update_on_the_local_backend(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    import json

    h = local_hpcdet
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "s.py").write_text("import time\ntime.sleep(600)\n")  # killed at the end
    cfg = tmp_path / "s.yaml"
    cfg.write_text("name: sleeper\nentrypoint: python3 s.py\n"
                   "searcher: {name: single, metric: x, max_length: 1}\n")
    exp = h.create(cfg, ctx)
    h.wait_for("it to run", lambda: json.loads(h.run("job", "list", "--json").stdout)[0][
        "state"] == "SCHEDULED", timeout=30)
    h.run("job", "update", str(exp), "--priority", "50")
    rows = json.loads(h.run("job", "list", "--json").stdout)
    assert [(r["job_id"], r["priority"], r["name"]) for r in rows] == [
        (str(exp), 50, f"sleeper ({exp})")]
    bad = h.run("job", "update", str(exp), "--priority", "0", check=False)
    assert bad.returncode == 1 and "between 1 and 99" in bad.stderr
    missing = h.run("job", "update", "999", "--priority", "5", check=False)
    assert missing.returncode == 1 and "no job '999'" in missing.stderr
    assert "sleeper" in h.run("job", "list").stdout

    weighted = tmp_path / "w.yaml"
    weighted.write_text(cfg.read_text() + "resources: {weight: 3}\n"
                        "bind_mounts: [{host_path: /tmp, container_path: /data}]\n")
    said = h.run("experiment", "create", str(weighted), str(ctx)).stdout
    assert "Warning: resources.weight 3 is stored but not applied" in said
    assert "Warning: bind_mounts is accepted but not applied: it applies to a trial run in" \
        " environment.image" in said, said
    other = int(said.split("Created experiment ")[1].split()[0])
    weight = h.run("job", "update", str(exp), "--weight", "2.5")
    assert "weight 2.5 is stored but not applied" in weight.stdout
    h.run("job", "update-batch", f"{other}.priority=30", f"{exp}.ahead-of={other}")
    rows = {r["job_id"]: r for r in json.loads(h.run("job", "list", "--json").stdout)}
    assert (rows[str(exp)]["priority"], rows[str(exp)]["weight"]) == (30, 2.5)
    assert (rows[str(other)]["priority"], rows[str(other)]["weight"]) == (30, 3)
    for args, said in [
        (("update", str(exp), "--priority", "3", "--weight", "1"), "give exactly one of"),
        (("update-batch", f"{exp}.priority=3", "nonsense"), "formatted as <jobID>.<operation>"),
        (("update-batch", f"{exp}.colour=3"), "formatted as <jobID>.<operation>"),
        (("update-batch", f"{exp}.priority=high"), "priority must be a number"),
        (("update", str(exp), "--ahead-of", str(exp)), "ahead of or behind itself"),
        (("update", str(exp), "--resource-pool", "gpu"), "local backend has one resource pool"),
        # All are checked first: a bad second update leaves the first unapplied.
        (("update-batch", f"{exp}.priority=5", f"{other}.priority=500"), "between 1 and 99"),
    ]:
        bad = h.run("job", *args, check=False)
        assert bad.returncode != 0 and said in bad.stderr + bad.stdout, (args, bad)
        assert "Traceback" not in bad.stderr
    assert json.loads(h.run("job", "list", "--json").stdout)[0]["priority"] == 30
    h.run("experiment", "kill", str(other))
    h.run("experiment", "kill", str(exp))


def test_hooks_cannot_break_hpcdet_over_its_own_environment(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    scenarios.hooks_cannot_break_hpcdet(local_hpcdet, tmp_path)


def test_hooks_cannot_break_hpcdet_from_the_users_environment(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    import subprocess
    import venv

    own = tmp_path / "train-env"
    venv.EnvBuilder(with_pip=True).create(own)
    subprocess.run([own / "bin/python3", "-m", "pip", "--version"], check=True,
                   capture_output=True)
    scenarios.hooks_cannot_break_hpcdet(local_hpcdet, tmp_path / "t", str(own / "bin/python3"))
