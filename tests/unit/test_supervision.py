"""`hpcdet daemon supervise`: the tables' entries and the job scripts (``hpcdet.supervision``).
Cron itself runs in tests/cluster/test_supervised_daemon.py, the jobs on the real Slurm."""

from __future__ import annotations

import shlex
from pathlib import Path

from hpcdet.config.cluster import ClusterConfig
from hpcdet.supervision import (
    carried_env,
    cron_lines,
    ensure_command,
    job_name,
    scron_lines,
    table_text,
    with_block,
    without_block,
)

ROOT = Path("/home/u/.hpcdet")
ENV = {"PATH": "/opt/slurm/bin:/usr/bin", "HPCDET_HOME": "/home/u/my state",
       "HPCDET_LOCAL_DIR": "/scratch/u", "SECRET": "x", "HOME": "/home/u"}


def test_the_users_other_entries_are_kept_and_ours_replaced_once() -> None:
    mine = "0 3 * * * backup.sh\n"
    first = with_block(mine, ROOT, ["*/5 * * * * one"])
    assert first.startswith(mine) and first.count("one") == 1
    again = with_block(first, ROOT, ["*/2 * * * * two"])
    assert "one" not in again and again.count("two") == 1 and again.startswith(mine)
    other = with_block(again, Path("/elsewhere"), ["*/5 * * * * three"])
    assert without_block(other, ROOT) == mine + with_block("", Path("/elsewhere"),
                                                            ["*/5 * * * * three"])


def test_the_command_carries_where_the_state_is_and_the_path_but_nothing_else() -> None:
    command = ensure_command(ENV)
    words = shlex.split(command)
    assert words[0] == "env" and "HPCDET_HOME=/home/u/my state" in words
    assert "PATH=/opt/slurm/bin:/usr/bin" in words and not any("SECRET" in w for w in words)
    assert words[-2:] == ["daemon", "ensure"]
    # A compute node has a local directory of its own.
    assert "HPCDET_LOCAL_DIR" in carried_env(ENV, True)
    assert "HPCDET_LOCAL_DIR" not in carried_env(ENV, False)
    assert shlex.split(ensure_command(ENV, foreground=True, wait=True))[-2:] == [
        "--foreground", "--wait"]


def test_a_percent_sign_does_not_cut_the_cron_line() -> None:
    [line] = cron_lines(5, "env X=50%off hpcdet", Path("/l/log"))
    assert line == "*/5 * * * * umask 077; env X=50\\%off hpcdet >> /l/log 2>&1"


def test_scrontab_asks_for_one_cpu_for_the_walltime_on_the_configured_partition() -> None:
    cluster = ClusterConfig(backend="slurm", partitions={"default": "long"}, default_pool="default",
                            account="proj1")
    options, line = scron_lines(10, "cmd", job_name(ROOT), 7200, Path("/l/s-%j.out"), cluster)
    assert options.startswith("#SCRON ") and "--time=02:00:00" in options
    assert "--cpus-per-task=1" in options and "--partition=long" in options
    assert "--account=proj1" in options and line == "*/10 * * * * umask 077; cmd"


def test_no_crontab_yet_is_an_empty_one() -> None:
    assert table_text("crontab", "", "no crontab for u\n", 1) == ""
    assert table_text("crontab", "x\n", "", 0) == "x\n"


def test_the_pbs_job_queues_its_successor_after_itself_and_runs_the_daemon_in_place() -> None:
    from hpcdet.schedulers.templating import render

    text = render("supervisor.pbs.j2", {
        "name": "hpcdet-daemon-1", "log_dir": Path("/s/supervise"),
        "script": Path("/s/supervise/daemon-job.pbs.sh"), "walltime": "24:00:00",
        "partition": "workq", "account": None, "qos": None, "python": "/usr/bin/python3",
        "ensure": "env HPCDET_HOME=/s hpcdet daemon ensure --foreground --wait"})
    assert "#PBS -l select=1:ncpus=1\n" in text and "#PBS -q workq\n" in text
    assert 'qsub -W depend="afterany:$PBS_JOBID" /s/supervise/daemon-job.pbs.sh' in text
    assert text.rstrip().endswith(
        "exec env HPCDET_HOME=/s hpcdet daemon ensure --foreground --wait")
