"""The real container runtimes of scripts/container-runtimes.sh, as the tests use them: which
runtime, as which user, with which image. The base image is Debian bookworm minbase with its
python3 (3.11) and nothing else: hpcdet's trial side comes from the host, read-only."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support import CONTAINER_TESTS_ROOT, REPO, Hpcdet, ensure_user

SCRIPT = REPO / "scripts" / "container-runtimes.sh"
CACHE = Path("/var/cache/hpcdet-test-images")
SIF = CACHE / "hpcdet-test-base.sif"
TARBALL = CACHE / "hpcdet-test-base.tar"
REFERENCE = "localhost/hpcdet-test-base:py3"
# The unprivileged user the rootless runs use (tests/cluster's users are its neighbours).
USER = "hpcdet-u1"


@dataclass(frozen=True)
class Runtime:
    """One way to run a trial's container: ``name`` as ``cluster.yaml``'s container_runtime,
    ``rootless`` for an unprivileged user (root otherwise)."""

    name: str
    rootless: bool = False

    @property
    def id(self) -> str:
        return f"{self.name}-{'user' if self.rootless else 'root'}"

    @property
    def image(self) -> str:
        return str(SIF) if self.name == "apptainer" else REFERENCE

    @property
    def user(self) -> str | None:
        return USER if self.rootless else None

    def configure(self, h: Hpcdet) -> None:
        """Point ``h``'s cluster config at this runtime, and give a rootless Podman user the
        shared image store (imported once per machine, see ``podman_store``)."""
        (h.root / "cluster.yaml").write_text(
            f"backend: {h.backend}\ncontainer_runtime: {self.name}\n")
        if self.name == "podman" and self.rootless:
            conf = h.mkdir(h.root / ".config" / "containers") / "storage.conf"
            store = podman_store(USER)
            conf.write_text(storage_conf(store))
            shutil.chown(conf, USER, USER)
            shutil.chown(conf.parent.parent, USER, USER)


# Each way the tests run: Apptainer as HPC users run it (unprivileged) and as root, Podman
# rootless and rootful, Docker (root; its group is root-equivalent, not rootless).
ALL = (Runtime("apptainer", rootless=True), Runtime("apptainer"),
       Runtime("podman", rootless=True), Runtime("podman"), Runtime("docker"))


def require_runtimes() -> None:
    """The runtimes and the base image are there: missing ones fail the test under CI=true
    (scripts/test.sh starts them) and skip it elsewhere."""
    import pytest

    done = subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True, text=True,
                          check=False, timeout=60)
    if done.returncode == 0:
        return
    reason = ("the container runtimes are not ready (run `bash scripts/container-runtimes.sh "
              f"start` as root):\n{done.stdout}{done.stderr}")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def storage_conf(store: Path) -> str:
    """Podman's storage.conf that points at the shared rootless store ``store``."""
    return (f'[storage]\ndriver = "overlay"\ngraphroot = "{store}/graph"\n'
            f'runroot = "{store}/run"\n')


def podman_store(user: str) -> Path:
    """A rootless Podman image store of ``user``'s holding the base image, made once per
    machine (the import takes seconds; every test that needs it shares it)."""
    store = CONTAINER_TESTS_ROOT / f"podman-{user}"
    ensure_user(user)
    CONTAINER_TESTS_ROOT.mkdir(parents=True, exist_ok=True)
    with open(CONTAINER_TESTS_ROOT / f".podman-{user}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # The image of the recipe the script built last: a new recipe is imported again.
        recipe = (CACHE / "recipe").read_text()
        marker = store / "imported"
        if marker.exists() and marker.read_text() == recipe:
            return store
        home = store / "home" / ".config" / "containers"
        home.mkdir(parents=True, exist_ok=True)
        (home / "storage.conf").write_text(storage_conf(store))
        subprocess.run(["chown", "-R", f"{user}:", str(store)], check=True)
        store.chmod(0o755)
        subprocess.run(["runuser", "-u", user, "--", "env", "-i", f"HOME={store / 'home'}",
                        "PATH=/usr/bin:/bin", "podman", "import", "-q", str(TARBALL),
                        REFERENCE], check=True, capture_output=True, timeout=300, cwd="/")
        marker.write_text(recipe)
    return store
