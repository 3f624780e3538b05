"""Privacy on a shared machine, on the local backend (issue 9, items 1 and 2)."""

from __future__ import annotations

import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from hpcdet.rundir.spec import CLUSTER_INFO_ENV
from tests import scenarios
from tests.support import (
    Hpcdet,
    copy_examples,
    ensure_user,
    require_root,
)

USER_A, USER_B = "hpcdet-pa", "hpcdet-pb"
GROUP = "hpcdet-pg"


def test_everything_private_under_umask_022(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    scenarios.private_under_umask_022(local_hpcdet, tmp_path)


def _root_or_skip() -> None:
    require_root("the two-user test creates accounts: run it as root")


def test_shared_with_group_readable_by_it_only() -> None:
    """A real member of the group the state is shared with reads the run tree, and cannot
    open the daemon's database, locks or local jobs, nor block the daemon (issue 37)."""
    _root_or_skip()
    ensure_user(USER_B)
    subprocess.run(["groupadd", "-f", GROUP], check=True, capture_output=True)
    subprocess.run(["usermod", "-aG", GROUP, USER_B], check=True, capture_output=True)
    tmp = Path(tempfile.mkdtemp(prefix="hpcdet-test-", dir="/tmp"))
    tmp.chmod(0o755)  # the member can reach the state directory
    h = Hpcdet(tmp / "owner", "local")
    h.root.chmod(0o755)
    try:
        scenarios.shared_with_group(h, tmp, group=GROUP, member=USER_B)
    finally:
        h.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_another_user_reads_nothing_and_plants_nothing(user_python: str) -> None:
    _root_or_skip()
    for name in (USER_A, USER_B):
        ensure_user(name)
    tmp = Path(tempfile.mkdtemp(prefix="hpcdet-test-", dir="/tmp"))
    tmp.chmod(0o755)
    try:
        a = Hpcdet(tmp / USER_A, "local", user=USER_A, python=user_python)
        scenarios.two_users(a, USER_B, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_an_unreadable_run_directory_stalls_only_its_experiment(user_python: str) -> None:
    """Issue 37 as the tester did it: chmod 000 on one run's directory, under a daemon that
    runs as an unprivileged user (root's would read it all the same)."""
    _root_or_skip()
    ensure_user(USER_A)
    tmp = Path(tempfile.mkdtemp(prefix="hpcdet-test-", dir="/tmp"))
    tmp.chmod(0o755)
    a = Hpcdet(tmp / USER_A, "local", user=USER_A, python=user_python)
    try:
        scenarios.unreadable_run_is_its_experiments_fault(a, a.mkdir(tmp / "work"))
    finally:
        a.stop()


def test_paths_another_user_owns_or_can_write_are_refused_at_create(
        local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    """A checkpoint storage another user can swap checkpoints in, and a template_dir of
    another user (its batch script would run as this one), stop `experiment create` with the
    field, the owner or mode, and the fix (issue 37)."""
    _root_or_skip()
    ensure_user(USER_B)
    h = local_hpcdet
    ctx = copy_examples(tmp_path / "ctx")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    scratch.chmod(0o777)
    config = tmp_path / "exp.yaml"
    config.write_text((ctx / "0_start.yaml").read_text()
                      + f"checkpoint_storage: {{type: shared_fs, host_path: {scratch}}}\n")

    def refused(*needles: str) -> None:
        p = h.run("experiment", "create", str(config), str(ctx), check=False)
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stdout + p.stderr
        for needle in needles:
            assert needle in p.stderr, p.stderr

    refused("checkpoint_storage.host_path", "(mode 0777)", f"chmod go-w {scratch}")
    scratch.chmod(0o755)
    shutil.chown(scratch, USER_B)
    refused("checkpoint_storage.host_path", f"{scratch} is a directory owned by user {USER_B}")
    shutil.chown(scratch, "root")

    marker = tmp_path / "template-ran"
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "local.sh.j2").write_text(f"id > {marker}\n")
    for path in (templates, templates / "local.sh.j2"):
        shutil.chown(path, USER_B)
    with open(h.root / "cluster.yaml", "a") as f:
        f.write(f"template_dir: {templates}\n")
    h.stop()  # the daemon reads the cluster config at start
    refused("template_dir", f"{templates} is a directory owned by user {USER_B}")
    assert not marker.exists()
    assert h.run("experiment", "list").stdout.count("core-api") == 0  # nothing was created


def test_a_squatted_deepspeed_hostfile_is_not_used(user_python: str) -> None:
    """Another user puts a hostfile (or the directory hpcdet keeps it in) in /tmp first: the
    deepspeed launcher of this user never uses it (issue 37 item 6)."""
    _root_or_skip()
    from tests.unit.launch.launch_support import write_info

    for name in (USER_A, USER_B):
        ensure_user(name)
    tmp = Path(tempfile.mkdtemp(prefix="hpcdet-test-", dir="/tmp"))
    try:
        tmp.chmod(0o755)
        shared_tmp = tmp / "tmp"
        shared_tmp.mkdir(mode=0o1777)
        shared_tmp.chmod(0o1777)
        info = write_info(tmp)
        for path in (tmp / "nodes", info):
            path.chmod(0o755 if path.is_dir() else 0o644)
        bin_dir = tmp / "bin"
        bin_dir.mkdir(mode=0o755)
        fake = bin_dir / "deepspeed"  # prints the hostfile it is given (-H) and whose it is
        fake.write_text('#!/bin/sh\ncat "$2"; stat -c "owner %U" "$2"\n')
        fake.chmod(0o755)
        squat = scenarios._as_user(  # the name before issue 37, then hpcdet's directory
            USER_B, 'printf "evil slots=64\\n" > "$1/hostfile-7.1.txt"; chmod 644 "$1"/*',
            str(shared_tmp))
        assert squat.returncode == 0, squat.stderr
        victim = pwd.getpwnam(USER_A).pw_uid

        def launch() -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["runuser", "-u", USER_A, "--", "env", "-i", f"PATH={bin_dir}:/usr/bin:/bin",
                 f"TMPDIR={shared_tmp}", f"{CLUSTER_INFO_ENV}={info}", user_python, "-I",
                 "-m", "hpcdet.launch.deepspeed", "python3", "t.py"],
                capture_output=True, text=True, timeout=120, check=False, cwd=tmp)

        ran = launch()
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert ran.stdout.splitlines() == ["localhost slots=2", f"owner {USER_A}"], ran.stdout
        shutil.rmtree(shared_tmp / f"hpcdet-{victim}")
        planted = scenarios._as_user(USER_B, 'mkdir -m 777 "$1"', str(shared_tmp /
                                                                        f"hpcdet-{victim}"))
        assert planted.returncode == 0, planted.stderr
        ran = launch()
        assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
        assert f"is a directory owned by user {USER_B}" in ran.stderr, ran.stderr
        assert "evil" not in ran.stdout
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
