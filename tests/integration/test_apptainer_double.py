"""Tests of apptainerdouble, the Apptainer/SingularityCE test double in tests/doubles/apptainer.

They run the real executables in tests/doubles/apptainer/bin with subprocess, each test with its
own registry directory and invocation log.  The filesystem-view tests need root and
`unshare --mount`: without them they skip, except under CI=true, where they fail (CI runs the
tests as root).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

BIN = Path(__file__).resolve().parents[1] / "doubles" / "apptainer" / "bin"
REPO = Path(__file__).resolve().parents[2]
KEPT = {"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "run", "sbin",
        "sys", "usr", "var"}
DENIED = ("FATAL:   While making image from oci registry: error fetching image to cache: "
          "failed to get checksum for docker://x/y:1: reading manifest 1 in docker.io/x/y: "
          "requested access to the resource is denied")


class Double:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.registry = root / "registry"
        self.registry.mkdir()
        self.log = root / "invocations.log"
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("APPTAINER", "SINGULARITY"))}
        # `#!/usr/bin/env python3` finds this interpreter first (pyenv shims add ~100 ms).
        self.env["PATH"] = f"{BIN}:{Path(sys.executable).parent}:{os.environ['PATH']}"
        self.env["HPCDET_APPTAINER_DOUBLE_REGISTRY"] = str(self.registry)
        self.env["HPCDET_APPTAINER_DOUBLE_LOG"] = str(self.log)

    def image(self, name: str, **data: object) -> None:
        (self.registry / f"{name}.json").write_text(json.dumps(data))

    def run(self, tool: str, *args: str, extra: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / tool), *args], env={**self.env, **(extra or {})},
                              cwd=cwd or self.root, capture_output=True, text=True, timeout=30)

    def entries(self, subcommand: str) -> list[dict[str, object]]:
        if not self.log.exists():
            return []
        lines = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [e for e in lines if e["subcommand"] == subcommand]


@pytest.fixture
def double(tmp_path: Path) -> Double:
    return Double(tmp_path)


@pytest.fixture
def sif(double: Double) -> Path:
    double.image("library_python_3.11", env={"IMGVAR": "from-image", "CLASH": "image"},
                 labels={"org.example.owner": "hpcdet"})
    dest = double.root / "python.sif"
    done = double.run("apptainer", "pull", str(dest), "docker://library/python:3.11")
    assert done.returncode == 0, done.stderr
    return dest


def namespaces_or_skip() -> None:
    ok = os.geteuid() == 0 and subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "true"],
        capture_output=True).returncode == 0
    if ok:
        return
    reason = "the container's filesystem view needs root and unshare --mount"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI runs the tests as root")
    pytest.skip(reason)


def env_of(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert done.returncode == 0, done.stderr
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


# ---- version, pull, inspect ---------------------------------------------------------------


def test_version_lines(double: Double) -> None:
    assert double.run("apptainer", "--version").stdout == "apptainer version 1.3.4\n"
    assert double.run("apptainer", "version").stdout == "1.3.4\n"
    assert double.run("singularity", "--version").stdout == "singularity-ce version 3.11.4\n"


def test_pull_writes_a_sif_and_logs_one_pull(double: Double) -> None:
    double.image("library_python_3.11", env={"PATH": "/opt/py/bin:/usr/bin"}, labels={"a": "b"})
    dest = double.root / "images" / "py.sif"
    dest.parent.mkdir()
    done = subprocess.run([str(BIN / "apptainer"), "pull", str(dest), "docker://python:3.11"],
                          env=double.env, capture_output=True, text=True,
                          preexec_fn=lambda: os.umask(0o027))
    assert done.returncode == 0, done.stderr
    assert "INFO:    Converting OCI blobs to SIF format" in done.stderr
    assert "INFO:    Creating SIF file..." in done.stderr
    magic, body = dest.read_text().splitlines()
    assert magic == "HPCDET-APPTAINER-DOUBLE-SIF 1"
    assert json.loads(body) == {"ref": "docker://python:3.11", "content": [],
                                "env": {"PATH": "/opt/py/bin:/usr/bin"}, "labels": {"a": "b"}}
    assert dest.stat().st_mode & 0o777 == 0o750
    assert os.listdir(dest.parent) == ["py.sif"]  # no temporary file left behind
    [pull] = double.entries("pull")
    assert pull["tool"] == "apptainer"
    assert pull["ref"] == "docker://python:3.11"
    assert pull["dest"] == str(dest)
    assert pull["argv"] == ["apptainer", "pull", str(dest), "docker://python:3.11"]


def test_pull_without_dest_names_the_image_after_repository_and_tag(double: Double) -> None:
    double.image("python_3.12")
    done = double.run("apptainer", "pull", "docker://docker.io/library/python:3.12")
    assert done.returncode == 0, done.stderr
    assert (double.root / "python_3.12.sif").is_file()


def test_pull_of_an_unknown_ref_fails_like_a_denied_registry(double: Double) -> None:
    done = double.run("apptainer", "pull", "y.sif", "docker://x/y:1")
    assert done.returncode == 255
    assert done.stderr.strip() == DENIED
    assert not (double.root / "y.sif").exists()


def test_pull_needing_auth_takes_the_tools_own_credential_variables(double: Double) -> None:
    double.image("x_y_1", auth={"username": "u", "password": "p"})
    args = ("pull", "y.sif", "docker://x/y:1")
    assert double.run("apptainer", *args).stderr.strip() == DENIED
    wrong = double.run("apptainer", *args, extra={"APPTAINER_DOCKER_USERNAME": "u",
                                                  "APPTAINER_DOCKER_PASSWORD": "nope"})
    assert wrong.returncode == 255
    assert "incorrect username or password" in wrong.stderr
    other_prefix = double.run("singularity", *args, extra={"APPTAINER_DOCKER_USERNAME": "u",
                                                           "APPTAINER_DOCKER_PASSWORD": "p"})
    assert other_prefix.returncode == 255
    assert not (double.root / "y.sif").exists()
    ok = double.run("singularity", *args, extra={"SINGULARITY_DOCKER_USERNAME": "u",
                                                 "SINGULARITY_DOCKER_PASSWORD": "p"})
    assert ok.returncode == 0, ok.stderr
    assert (double.root / "y.sif").is_file()


def test_pull_onto_an_existing_file_needs_force(double: Double) -> None:
    double.image("library_alpine_latest", labels={"v": "2"})
    dest = double.root / "alpine.sif"
    dest.write_text("old\n")
    done = double.run("apptainer", "pull", str(dest), "docker://alpine")
    assert done.returncode == 255
    assert done.stderr.strip() == (
        f'FATAL:   Image file already exists: "{dest}" - will not overwrite')
    assert dest.read_text() == "old\n"
    assert double.run("apptainer", "pull", "-F", str(dest), "docker://alpine").returncode == 0
    assert dest.read_text().startswith("HPCDET-APPTAINER-DOUBLE-SIF 1\n")


def test_concurrent_pulls_each_log_one_whole_line(double: Double) -> None:
    double.image("library_alpine_latest")
    env = {**double.env, "HPCDET_APPTAINER_DOUBLE_PULL_SECONDS": "0.3"}
    procs = [subprocess.Popen([str(BIN / "apptainer"), "pull", f"a{i}.sif", "docker://alpine"],
                              cwd=double.root, env=env, stderr=subprocess.PIPE)
             for i in range(3)]
    assert [p.wait(timeout=30) for p in procs] == [0, 0, 0]
    assert sorted(str(e["dest"]) for e in double.entries("pull")) == [
        str(double.root / f"a{i}.sif") for i in range(3)]


def test_inspect_shows_labels_and_environment(double: Double, sif: Path) -> None:
    assert double.run("apptainer", "inspect", str(sif)).stdout == "org.example.owner: hpcdet\n"
    as_json = json.loads(double.run("apptainer", "inspect", "--json", "-e", str(sif)).stdout)
    [script] = as_json["data"]["attributes"]["environment"].values()
    assert "export IMGVAR=from-image" in script


def test_pull_copies_content_and_exec_needs_it_on_the_host(double: Double) -> None:
    there, gone = double.root / "there", double.root / "gone"
    there.mkdir()
    double.image("x_y_1", content=[str(there), str(gone) + "/"])
    dest = double.root / "y.sif"
    assert double.run("apptainer", "pull", str(dest), "docker://x/y:1").returncode == 0
    assert json.loads(dest.read_text().splitlines()[1])["content"] == [str(there), str(gone)]
    done = double.run("apptainer", "exec", str(dest), "true")
    assert (done.returncode, done.stderr) == (255, (
        f"FATAL:   could not open image {dest}: hpcdet's apptainer double: image content "
        f"{gone} doesn't exist on the host\n"))
    gone.mkdir()
    assert double.run("apptainer", "exec", str(dest), "true").returncode == 0
    double.image("x_y_2", content=["relative/path"])
    bad = double.run("apptainer", "pull", "z.sif", "docker://x/y:2")
    assert bad.returncode == 255
    assert '"content" must be a list of absolute paths' in bad.stderr


def test_a_sif_without_content_is_still_readable(double: Double) -> None:
    old = double.root / "old.sif"
    old.write_text('HPCDET-APPTAINER-DOUBLE-SIF 1\n'
                   '{"ref": "docker://x/y:1", "env": {"V": "1"}, "labels": {}}\n')
    done = double.run("apptainer", "exec", str(old), "sh", "-c", 'echo "$V"')
    assert (done.returncode, done.stdout) == (0, "1\n"), done.stderr


# ---- exec: environment, flags, failures ---------------------------------------------------


def test_cleanenv_drops_host_variables_but_passes_prefixed_and_image_ones(
    double: Double, sif: Path
) -> None:
    env = env_of(double.run("apptainer", "exec", "--cleanenv", str(sif), "env", extra={
        "HOSTONLY": "host", "APPTAINERENV_X": "from-prefix", "TERM": "dumb"}))
    assert "HOSTONLY" not in env
    assert env["X"] == "from-prefix"
    assert "APPTAINERENV_X" not in env
    assert env["IMGVAR"] == "from-image"
    assert env["TERM"] == "dumb"
    assert env["PATH"] == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert env["LD_LIBRARY_PATH"] == "/.singularity.d/libs"
    assert env["APPTAINER_CONTAINER"] == str(sif)
    assert env["APPTAINER_NAME"] == "python.sif"
    assert env["APPTAINER_ENVIRONMENT"] == "/.singularity.d/env/91-environment.sh"


def test_without_cleanenv_host_variables_pass_but_do_not_override_the_image(
    double: Double, sif: Path
) -> None:
    env = env_of(double.run("apptainer", "exec", str(sif), "env",
                            extra={"HOSTONLY": "host", "CLASH": "host"}))
    assert env["HOSTONLY"] == "host"
    assert env["CLASH"] == "image"


def test_singularity_reads_only_its_own_prefix(double: Double, sif: Path) -> None:
    env = env_of(double.run("singularity", "exec", "-e", str(sif), "env", extra={
        "SINGULARITYENV_Y": "s", "APPTAINERENV_Z": "a"}))
    assert env["Y"] == "s"
    assert "Z" not in env
    assert env["SINGULARITY_CONTAINER"] == str(sif)
    assert "APPTAINER_CONTAINER" not in env


def test_env_flag_reads_csv_and_beats_the_prefixed_variable(double: Double, sif: Path) -> None:
    env = env_of(double.run("apptainer", "exec", "-e", "--env", 'A=1,"B=x,y"', "--env", "C=3",
                            str(sif), "env", extra={"APPTAINERENV_A": "prefixed"}))
    assert (env["A"], env["B"], env["C"]) == ("1", "x,y", "3")
    bad = double.run("apptainer", "exec", "--env", "NOEQUALS", str(sif), "true")
    assert bad.returncode == 1
    assert bad.stderr.startswith('Error for command "exec": invalid argument "NOEQUALS" for '
                                 '"--env" flag: NOEQUALS must be formatted as key=value')


def test_cleanenv_gives_the_variables_apptainer_1_4_5_gives(double: Double, sif: Path) -> None:
    """Measured with `apptainer exec --cleanenv --no-eval ... env` (Apptainer 1.4.5)."""
    env = env_of(double.run("apptainer", "exec", "--cleanenv", "--no-eval", "-B",
                            f"{double.root}:/d,{double.root}:/e", str(sif), "env",
                            extra={"TERM": "xterm", "HOSTONLY": "x"}))
    assert set(env) == {
        "APPTAINER_APPNAME", "APPTAINER_BIND", "APPTAINER_COMMAND", "APPTAINER_CONTAINER",
        "APPTAINER_ENVIRONMENT", "APPTAINER_NAME", "APPTAINER_NO_EVAL", "SINGULARITY_BIND",
        "SINGULARITY_CONTAINER", "SINGULARITY_ENVIRONMENT", "SINGULARITY_NAME",
        "SINGULARITY_NO_EVAL", "HOME", "LANG", "LD_LIBRARY_PATH", "PATH", "PROMPT_COMMAND",
        "PS1", "PWD", "TERM", "IMGVAR", "CLASH"}
    assert env["APPTAINER_BIND"] == env["SINGULARITY_BIND"] == "/d,/e"
    assert env["APPTAINER_APPNAME"] == ""
    assert env["APPTAINER_NO_EVAL"] == env["SINGULARITY_NO_EVAL"] == "1"
    assert env["PROMPT_COMMAND"] == 'PS1="Apptainer> "; unset PROMPT_COMMAND'
    assert env_of(double.run("apptainer", "exec", "-e", str(sif), "env"))["APPTAINER_BIND"] == ""


def test_env_splits_on_commas_as_1_4_5_does(double: Double, sif: Path) -> None:
    show = ("sh", "-c", 'echo "FOO=[$FOO] B=[$B]"')
    one = double.run("apptainer", "exec", "-e", "--env", "FOO=a,b", str(sif), *show)
    assert (one.returncode, one.stdout) == (0, "FOO=[a,b] B=[]\n"), one.stderr
    two = double.run("apptainer", "exec", "-e", "--env", "FOO=1,B=2", str(sif), *show)
    assert (two.returncode, two.stdout) == (0, "FOO=[1] B=[2]\n"), two.stderr
    bad = double.run("apptainer", "exec", "-e", "--env", "Y=k=v,z", str(sif), "true")
    assert bad.returncode == 1
    assert bad.stderr.startswith('Error for command "exec": invalid argument "Y=k=v,z" for '
                                 '"--env" flag: z must be formatted as key=value\n')


def test_home_cannot_be_set_through_env_only_through_home(double: Double, sif: Path) -> None:
    warned = ("WARNING: Overriding HOME environment variable with APPTAINERENV_HOME is not "
              "permitted\n")
    own = pwd.getpwuid(os.geteuid()).pw_dir
    for args, extra in ((("--env", "HOME=/x"), {}), ((), {"APPTAINERENV_HOME": "/y"})):
        done = double.run("apptainer", "exec", "-e", *args, str(sif), "sh", "-c",
                          'echo "$HOME"', extra=extra)
        assert (done.returncode, done.stdout, done.stderr) == (0, f"{own}\n", warned)
    legacy = double.run("apptainer", "exec", "-e", str(sif), "sh", "-c", 'echo "$HOME"',
                        extra={"SINGULARITYENV_HOME": "/y"})
    assert (legacy.stdout, legacy.stderr) == (f"{own}\n", (
        "INFO:    Environment variable SINGULARITYENV_HOME is set, but APPTAINERENV_HOME is "
        "preferred\nWARNING: Overriding HOME environment variable with SINGULARITYENV_HOME is "
        "not permitted\n"))
    home = double.root / "h"
    home.mkdir()
    given = double.run("apptainer", "exec", "-e", "--home", f"{home}:/w", str(sif), "sh", "-c",
                       'echo "$HOME"', extra={"APPTAINERENV_HOME": "/y"})
    assert (given.stdout, given.stderr) == ("/w\n", warned)


def test_apptainer_also_reads_singularityenv_and_says_so(double: Double, sif: Path) -> None:
    show = ("sh", "-c", 'echo "FOO=$FOO"; env | grep -c ENV_ || true')
    alone = double.run("apptainer", "exec", "-e", str(sif), *show,
                       extra={"SINGULARITYENV_FOO": "s"})
    assert (alone.stdout, alone.stderr) == ("FOO=s\n0\n", (
        "INFO:    Environment variable SINGULARITYENV_FOO is set, but APPTAINERENV_FOO is "
        "preferred\n"))
    both = double.run("apptainer", "exec", "-e", "--env", "FOO=e", str(sif), *show,
                      extra={"SINGULARITYENV_FOO": "s"})
    assert (both.stdout, both.stderr) == ("FOO=e\n0\n", (
        "WARNING: SINGULARITYENV_FOO and APPTAINERENV_FOO have different values, using the "
        "latter\nWARNING: Skipping environment variable [SINGULARITYENV_FOO=s], FOO is already "
        "overridden with different value [e]\n"))
    same = double.run("apptainer", "exec", "-e", str(sif), *show,
                      extra={"SINGULARITYENV_FOO": "a", "APPTAINERENV_FOO": "a"})
    assert (same.stdout, same.stderr) == ("FOO=a\n0\n", "")


def test_pwd_sets_the_working_directory_and_must_exist(double: Double, sif: Path) -> None:
    done = double.run("apptainer", "exec", "--pwd", "/etc", str(sif), "pwd")
    assert (done.returncode, done.stdout) == (0, "/etc\n")
    missing = double.run("apptainer", "exec", "--pwd", "/no/such/dir", str(sif), "pwd")
    assert missing.returncode == 255
    assert ("FATAL:   failed to set working directory: chdir /no/such/dir: no such file or "
            "directory") in missing.stderr
    assert missing.stdout == ""


def test_unknown_flag_is_rejected_before_anything_runs(double: Double, sif: Path) -> None:
    marker = double.root / "ran"
    done = double.run("apptainer", "exec", "--xyz", str(sif), "touch", str(marker))
    assert done.returncode == 1
    assert done.stderr.startswith('Error for command "exec": unknown flag: --xyz\n\n'
                                  "Options for exec command:\n")
    assert "Run 'apptainer --help' for more detailed usage information." in done.stderr
    assert not marker.exists()


def test_flags_stop_at_the_image(double: Double, sif: Path) -> None:
    done = double.run("apptainer", "exec", str(sif), "sh", "-c", 'echo "$0 $1"', "--xyz", "-e")
    assert (done.returncode, done.stdout) == (0, "--xyz -e\n")


def test_missing_bind_source_fails_container_creation(double: Double, sif: Path) -> None:
    src = double.root / "absent"
    done = double.run("apptainer", "exec", "-B", f"{src}:/data", str(sif), "true")
    assert done.returncode == 255
    assert done.stderr == (
        f"WARNING: skipping mount of {src}: stat {src}: no such file or directory\n"
        f"FATAL:   container creation failed: mount hook function failure: mount {src}->/data "
        f"error: while mounting {src}: mount source {src} doesn't exist\n")


def test_unusable_images_and_commands_are_fatal_in_apptainer_1_4_5s_words(
    double: Double, sif: Path
) -> None:
    missing = double.run("apptainer", "exec", "x.sif", "true")
    x = double.root / "x.sif"  # a relative name is made absolute
    assert (missing.returncode, missing.stderr) == (255, (
        f"FATAL:   While checking container encryption: could not open image {x}: failed to "
        f"retrieve path for {x}: lstat {x}: no such file or directory\n"))
    (double.root / "not.sif").write_text("hello\n")
    other = double.run("apptainer", "exec", "not.sif", "true")
    assert (other.returncode, other.stderr) == (255, (
        "FATAL:   While checking container encryption: could not open image "
        f"{double.root / 'not.sif'}: image format not recognized\n"))
    absent = double.run("apptainer", "exec", str(sif), "nosuchcmd")
    assert (absent.returncode, absent.stderr) == (
        255, 'FATAL:   "nosuchcmd": executable file not found in $PATH\n')


def test_nv_without_a_gpu_says_nothing(double: Double, sif: Path) -> None:
    done = double.run("apptainer", "exec", "--nv", "--rocm", str(sif), "true",
                      extra={"PATH": f"{BIN}:{Path(sys.executable).parent}:/usr/bin:/bin"})
    assert (done.returncode, done.stderr) == (0, ""), done.stderr


def test_the_commands_exit_status_passes_through(double: Double, sif: Path) -> None:
    assert double.run("apptainer", "exec", str(sif), "sh", "-c", "exit 42").returncode == 42


def test_sigterm_sent_to_apptainer_reaches_the_command(double: Double, sif: Path) -> None:
    ready, got = double.root / "ready", double.root / "got"
    script = f'trap "echo term > {got}; exit 7" TERM; touch {ready}; while :; do sleep 0.05; done'
    proc = subprocess.Popen([str(BIN / "apptainer"), "exec", "-B", str(double.root), str(sif),
                             "sh", "-c", script], env=double.env, cwd=double.root)
    try:
        deadline = time.monotonic() + 10
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 7
    finally:
        proc.kill()
    assert got.read_text() == "term\n"


# ---- exec: the filesystem view (root and unshare) -----------------------------------------

CHECK = """
import json, os, sys
hidden, shared, ro = sys.argv[1:4]
result = {"hidden": os.path.exists(hidden), "shared": sorted(os.listdir(shared)),
          "home": sorted(os.listdir(os.environ["HOME"])), "repo": os.path.exists(sys.argv[4]),
          "home_id": [os.stat(os.environ["HOME"]).st_dev, os.stat(os.environ["HOME"]).st_ino],
          "cwd": os.getcwd()}
open(os.path.join(shared, "written"), "w").close()
try:
    open(os.path.join(ro, "nope"), "w").close()
    result["ro"] = "writable"
except OSError as e:
    result["ro"] = e.strerror
print(json.dumps(result))
"""


def _view_tree(root: Path) -> tuple[Path, Path, Path]:
    hidden, shared, ro = root / "hidden", root / "shared", root / "ro"
    for d in (hidden, shared, ro):
        d.mkdir()
    (hidden / "secret").write_text("s")
    (shared / "visible").write_text("v")
    return hidden, shared, ro


def _repo_is_hidden(contain: bool = True) -> bool:
    """Whether the checkout is out of the container's sight: under a hidden top-level
    directory, except /tmp and the home directory, which stay without --contain."""
    if not contain and (REPO.parts[1] == "tmp" or REPO.is_relative_to(Path.home())):
        return False
    return REPO.parts[1] not in KEPT


def _home() -> tuple[str, list[int]]:
    home = pwd.getpwuid(os.geteuid()).pw_dir
    st = os.stat(home)
    return home, [st.st_dev, st.st_ino]


def test_contain_shows_only_the_image_and_the_binds(double: Double, sif: Path) -> None:
    namespaces_or_skip()
    hidden, shared, ro = _view_tree(double.root)
    done = double.run("apptainer", "exec", "--contain", "-B", f"{shared},{ro}:/data/ro:ro",
                      str(sif), "python3", "-c", CHECK, str(hidden / "secret"), str(shared),
                      "/data/ro", str(REPO / "pyproject.toml"), cwd=hidden)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["hidden"] is False
    assert result["shared"] == ["visible"]
    home, home_id = _home()
    assert result["home"] == []
    assert result["home_id"] != home_id
    assert result["cwd"] == home  # the host's cwd is not in the container
    assert result["ro"] == "Read-only file system"
    assert result["repo"] is not _repo_is_hidden()
    assert (shared / "written").exists()
    assert not (ro / "nope").exists()
    assert "WARNING" not in done.stderr


def test_without_contain_host_tmp_and_home_stay_but_other_top_dirs_are_empty(
    double: Double, sif: Path
) -> None:
    namespaces_or_skip()
    hidden, shared, ro = _view_tree(double.root)
    outside = Path("/tmp") / f"hpcdet-apptainer-double-{os.getpid()}-{time.time_ns()}"
    outside.mkdir()
    try:
        (outside / "f").write_text("x")
        done = double.run("apptainer", "exec", "-B", f"{shared},{ro}:{ro}:ro", str(sif),
                          "python3", "-c", CHECK + "print(os.listdir(sys.argv[5]))",
                          str(hidden / "secret"), str(shared), str(ro),
                          str(REPO / "pyproject.toml"), str(outside), cwd=shared)
    finally:
        (outside / "f").unlink()
        outside.rmdir()
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    result = json.loads(first)
    assert second == "['f']"  # the host's /tmp
    assert result["home_id"] == _home()[1]
    assert result["cwd"] == str(shared)
    assert result["ro"] == "Read-only file system"
    assert result["repo"] is not _repo_is_hidden(contain=False)


@pytest.fixture
def hidden_dir() -> Iterator[Path]:
    """A fresh directory under /srv, a top-level directory the view hides (not /tmp: --contain)."""
    namespaces_or_skip()
    assert "srv" not in KEPT
    path = Path(tempfile.mkdtemp(prefix="hpcdet-apptainer-double-", dir="/srv"))
    try:
        yield path
    finally:
        shutil.rmtree(path)


CONTENT_CHECK = """
import json, os, sys
py, sibling, data = sys.argv[1:4]
result = {"tool": open(os.path.join(py, "bin", "tool")).read(), "sibling": os.path.exists(sibling),
          "data": sorted(os.listdir(data)), "lib": sorted(os.listdir(os.path.join(py, "lib")))}
for name, where in (("ro", py), ("lib_rw", os.path.join(py, "lib"))):
    try:
        open(os.path.join(where, "new"), "w").close()
        result[name] = "writable"
    except OSError as e:
        result[name] = e.strerror
print(json.dumps(result))
"""


def test_content_under_a_hidden_directory_is_read_only_image_content(
    double: Double, hidden_dir: Path
) -> None:
    py, sibling = hidden_dir / "py", hidden_dir / "sibling"
    for d in (py / "bin", py / "lib", sibling):
        d.mkdir(parents=True)
    (py / "bin" / "tool").write_text("from the image")
    (py / "lib" / "image-file").write_text("x")
    shared, lib = double.root / "shared", double.root / "lib"
    shared.mkdir()
    lib.mkdir()
    (shared / "visible").write_text("v")
    double.image("x_y_1", content=[str(py)])
    sif = double.root / "y.sif"
    assert double.run("apptainer", "pull", str(sif), "docker://x/y:1").returncode == 0
    done = double.run("apptainer", "exec", "--contain", "-B", f"{shared}:/data,{lib}:{py}/lib",
                      str(sif), "python3", "-c", CONTENT_CHECK, str(py), str(sibling), "/data")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "tool": "from the image", "sibling": False, "data": ["visible"],
        "lib": [],  # the bind goes on top of the image's directory
        "ro": "Read-only file system", "lib_rw": "writable"}
    assert not (py / "new").exists()
    assert (lib / "new").exists()
    inside = double.run("apptainer", "exec", "-B", f"{shared}:{py}/absent", str(sif), "true")
    assert inside.returncode == 255
    assert inside.stderr.strip().endswith(
        f"mount {shared}->{py}/absent error: while mounting {shared}: destination {py}/absent "
        "doesn't exist in container")


HPCDET_VIEW = """
import json, os
def writable(path):
    try:
        open(path, "w").close()
        return True
    except OSError:
        return False
print(json.dumps({"cwd": os.getcwd(), "home": os.environ["HOME"], "files": os.listdir("."),
                  "tmp": writable("/tmp/x"), "var_tmp": writable("/var/tmp/x"),
                  "image": writable("/srv/x"), "work": writable("probe"),
                  "shm": os.listdir("/dev/shm")}))
"""


def test_hpcdets_command_line_home_as_workdir_no_cwd_no_tmp_shared_dev(
    double: Double, sif: Path, hidden_dir: Path
) -> None:
    """`--no-mount cwd,tmp --home WORK:/hpcdet/work --pwd /hpcdet/work`, without --contain, as
    measured on Apptainer 1.4.5: the work directory is home and cwd, the image (/tmp, /var/tmp
    included) is read-only, the host's /dev/shm is shared."""
    work = hidden_dir / "work"
    work.mkdir()
    (work / "in").write_text("x")
    shm = Path("/dev/shm") / f"hpcdet-double-{os.getpid()}"
    shm.write_text("")
    try:
        done = double.run("apptainer", "exec", "--cleanenv", "--no-mount", "cwd,tmp", "--home",
                          f"{work}:/hpcdet/work", "--no-eval", "--pwd", "/hpcdet/work",
                          str(sif), "python3", "-c", HPCDET_VIEW, cwd=hidden_dir)
    finally:
        shm.unlink()
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    facts = json.loads(done.stdout)
    assert facts["cwd"] == facts["home"] == "/hpcdet/work"
    assert facts["files"] == ["in"] and facts["work"] and (work / "probe").exists()
    assert (facts["tmp"], facts["var_tmp"], facts["image"]) == (False, False, False)
    assert shm.name in facts["shm"]


def test_no_mount_home_leaves_homes_dest_missing_and_cwd_falls_back(
    double: Double, sif: Path, hidden_dir: Path
) -> None:
    work = hidden_dir / "work"
    work.mkdir()
    done = double.run("apptainer", "exec", "-e", "--no-mount", "home,cwd,tmp", "--home",
                      f"{work}:/d", str(sif), "sh", "-c", 'pwd; echo "$HOME"; ls -d /d',
                      cwd=hidden_dir)
    assert done.stdout == "/\n/d\n"
    assert done.stderr.startswith(
        "WARNING: Error changing the container working directory. Using '/' instead: chdir /d: "
        "no such file or directory\n")
    assert "cannot access '/d'" in done.stderr
    falls = double.run("apptainer", "exec", "-e", "--no-mount", "cwd", str(sif), "pwd",
                       cwd=hidden_dir)
    home = pwd.getpwuid(os.geteuid()).pw_dir
    assert (falls.stdout, falls.stderr) == (f"{home}\n", (
        f"WARNING: Error changing the container working directory. Using '{home}' instead: "
        f"chdir {hidden_dir}: no such file or directory\n"))
    mounted = double.run("apptainer", "exec", "-e", "--home", str(work), str(sif), "sh", "-c",
                         'pwd; echo "$HOME"', cwd=hidden_dir)
    assert (mounted.stdout, mounted.stderr) == (f"{hidden_dir}\n{work}\n", "")
    unknown = double.run("apptainer", "exec", "-e", "--no-mount", "foo", str(sif), "true")
    assert (unknown.returncode, unknown.stderr) == (
        0, "WARNING: Ignoring unknown mount type 'foo'\n")


def test_an_unprivileged_user_gets_apptainer_1_4_5s_info_lines(
    double: Double, sif: Path, hidden_dir: Path
) -> None:
    """As a user (no setuid install, SIF through FUSE) Apptainer 1.4.5 prints two INFO lines on
    every run, after the environment's messages (measured)."""
    from tests.support import ensure_user

    ensure_user("hpcdet-u1")
    copy = hidden_dir / "double"  # the checkout may be where the user cannot read
    shutil.copytree(BIN.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    image = hidden_dir / "py.sif"
    shutil.copy(sif, image)
    hidden_dir.chmod(0o755)
    image.chmod(0o644)
    done = subprocess.run(
        ["runuser", "-u", "hpcdet-u1", "--", "env", "PATH=/usr/bin:/bin",
         "SINGULARITYENV_FOO=s", str(copy / "bin" / "apptainer"), "exec", "-e", str(image),
         "sh", "-c", 'echo "$FOO"'], cwd=hidden_dir, capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout) == (0, "s\n"), done.stderr
    assert done.stderr.splitlines()[:3] == [
        "INFO:    Environment variable SINGULARITYENV_FOO is set, but APPTAINERENV_FOO is "
        "preferred",
        "INFO:    fuse2fs not found, will not be able to mount EXT3 filesystems",
        "INFO:    gocryptfs not found, will not be able to use gocryptfs"]
