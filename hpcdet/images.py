"""Converting a registry image once, however many jobs need it at the same time.

The CLI converts it on the login node at create (its progress in the terminal), and the
harness of each job makes sure it is there before the trial starts: a hundred array tasks that
start together take one lock, one pulls and the others wait and use the file. The lock is a
directory (``mkdir`` is atomic on every shared filesystem, unlike ``flock`` on some Lustre
mounts) whose holder touches a heartbeat file; a lock whose heartbeat stops (a pull killed with
its node) is taken over after ``STALE_AFTER`` seconds.

The daemon submits an experiment's jobs before the CLI hears it was created, so it takes the
lock for the CLI first (``reserve``): a job that starts at once waits for the login node's pull
rather than pull on a compute node, which often cannot reach the registry. The CLI adopts the
lock (``ensure(..., reserved=holder)``); one that never comes lets it go stale.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from hpcdet.containers import OWN_STORE, ContainerSpec, pull_argv, pull_environment
from hpcdet.errors import ImageError
from hpcdet.private import PrivacyError, private_dir

HEARTBEAT = 5.0
STALE_AFTER = 120.0
PULL_TIMEOUT = 3 * 3600.0


def locate(spec: ContainerSpec) -> ContainerSpec:
    """``spec`` with its runtime's executable on this host: the one on PATH here, else the one
    found where the run was submitted, if this host has it at that path.

    Raises:
        ImageError: when there is none.
    """
    found = shutil.which(spec.runtime) or (
        spec.executable if spec.executable and os.access(spec.executable, os.X_OK) else None)
    if found is None:
        raise ImageError(
            f"the container runtime {spec.runtime!r} is not on PATH on {socket.gethostname()}; "
            f"load it (e.g. `module load {spec.runtime}`) in the environment you start hpcdet "
            "from, or set container_runtime in the cluster config (`hpcdet cluster show`)")
    return replace(spec, executable=found)


def ensure(spec: ContainerSpec, say: Callable[[str], None], force: bool = False,
           reserved: str = "") -> Path:
    """The image file, converted first if it is not there (or ``force``). ``reserved``: the
    holder ``reserve`` wrote, whose lock this call adopts (and lets go of, whatever happens).

    Raises:
        ImageError: with what to do.
    """
    try:
        return _ensure(spec, say, force, reserved)
    finally:
        if reserved:
            release(spec, reserved)


def needs_pull(spec: ContainerSpec, force: bool = False) -> bool:
    """Whether ``spec``'s image is one hpcdet converts and is not there yet (or ``force``)."""
    image = spec.image
    return (image.pull_from is not None and spec.runtime not in OWN_STORE
            and (force or not Path(image.file).exists()))


def reserve(spec: ContainerSpec, holder: str, force: bool = False) -> bool:
    """Take the pull lock of ``spec``'s image for a converter that comes later, which passes
    ``holder`` to ``ensure``; False (and nothing taken) when there is nothing to convert or
    the lock is held already."""
    if not needs_pull(spec, force):
        return False
    target = Path(spec.image.file)
    lock = _lock_path(target)
    try:
        private_dir(target.parent, None)
        lock.mkdir()
    except (OSError, PrivacyError):
        return False
    (lock / "holder").write_text(holder + "\n")
    (lock / "heartbeat").touch()
    return True


def release(spec: ContainerSpec, holder: str) -> None:
    """Let go of a lock ``reserve`` took, if ``holder`` still holds it."""
    lock = _lock_path(Path(spec.image.file))
    if holder and _read(lock / "holder") == holder:
        shutil.rmtree(lock, ignore_errors=True)


def _lock_path(target: Path) -> Path:
    return target.with_name(target.name + ".lock")


def _ensure(spec: ContainerSpec, say: Callable[[str], None], force: bool,
            reserved: str) -> Path:
    image = spec.image
    target = Path(image.file)
    if image.pull_from is None or spec.runtime in OWN_STORE:
        if spec.runtime not in OWN_STORE and not target.exists():
            raise ImageError(f"the image {image.named} does not exist ({target}); check "
                             "environment.image, or copy the image there")
        return target
    try:
        # Another user who could write here could plant the image every trial runs.
        private_dir(target.parent, None)
    except PrivacyError as e:
        raise ImageError(f"the image cache will not do: {e}") from None
    if not needs_pull(spec, force):
        return target
    try:
        spec = locate(spec)
    except ImageError as e:
        raise ImageError(f"cannot convert {image.pull_from}: {e}") from None
    lock = _lock_path(target)
    started = os.stat(target).st_mtime if target.exists() else None
    with _Lock(lock, say, reserved):
        done = target.exists() and (not force or os.stat(target).st_mtime != started)
        if not done:
            _pull(spec, target, say)
    return target


def _pull(spec: ContainerSpec, target: Path, say: Callable[[str], None]) -> None:
    partial = target.with_name(f".{target.name}.{socket.gethostname()}.{os.getpid()}")
    argv = pull_argv(spec.runtime, spec.image, str(partial), force=True, program=spec.program)
    say(f"converting {spec.image.pull_from} into {target} ({' '.join(argv[:2])})")
    environ = {**os.environ, **pull_environment(spec.runtime, spec.registry_auth)}
    try:
        proc = subprocess.Popen(argv, env=environ, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
    except OSError as e:
        raise ImageError(f"cannot start {argv[0]}: {e.strerror}") from e
    # A registry that stops answering must not hold the trial (and every job waiting on the
    # lock) for ever.
    timed_out = threading.Event()

    def give_up() -> None:
        timed_out.set()
        proc.kill()

    stalled = threading.Timer(PULL_TIMEOUT, give_up)
    stalled.start()
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        say(line.rstrip("\n"))
        tail = (tail + [line.rstrip("\n")])[-5:]
    rc = proc.wait()
    stalled.cancel()
    if timed_out.is_set():
        tail.append(f"killed after {PULL_TIMEOUT / 3600:.0f} h without finishing")
    if rc != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        shown = "; ".join(t.strip() for t in tail if t.strip()) or "no output"
        raise ImageError(
            f"pulling {spec.image.pull_from} failed (exit code {rc}): {shown}. Check the "
            "name in environment.image, environment.registry_auth for a private registry, and "
            f"that this host can reach the registry; or convert it yourself with "
            f"`{spec.runtime} pull {target} {spec.image.pull_from}`")
    os.replace(partial, target)


class _Lock:
    """``reserved``: the holder of a lock taken for this one by ``reserve``, which it adopts."""

    def __init__(self, path: Path, say: Callable[[str], None], reserved: str = "") -> None:
        self.path = path
        self.say = say
        self.reserved = reserved
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def __enter__(self) -> _Lock:
        told = False
        deadline = time.monotonic() + PULL_TIMEOUT
        while not (self.reserved and _read(self.path / "holder") == self.reserved):
            try:
                self.path.mkdir()
                break
            except FileExistsError:
                pass
            holder = _read(self.path / "holder")
            if _age(self.path / "heartbeat", self.path) > STALE_AFTER:
                self.say(f"taking over the pull lock {self.path} of {holder or 'someone'}, "
                         f"silent for {STALE_AFTER:.0f} s")
                shutil.rmtree(self.path, ignore_errors=True)
                continue
            if not told:
                self.say(f"waiting for {holder or 'another job'} to finish converting the "
                         "image")
                told = True
            if time.monotonic() > deadline:
                raise ImageError(f"the pull lock {self.path} was held for over "
                                 f"{PULL_TIMEOUT / 3600:.0f} h; remove it if no pull runs")
            time.sleep(1.0)
        (self.path / "holder").write_text(f"{socket.gethostname()} pid {os.getpid()}\n")
        (self.path / "heartbeat").touch()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True)
        self._beat.start()
        return self

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT):
            try:
                os.utime(self.path / "heartbeat")
            except OSError:
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        shutil.rmtree(self.path, ignore_errors=True)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _age(heartbeat: Path, lock: Path) -> float:
    """Seconds since the holder last showed life (the lock's own age while it is writing its
    first heartbeat); 0 when the lock is gone."""
    for p in (heartbeat, lock):
        try:
            return time.time() - os.stat(p).st_mtime
        except OSError:
            continue
    return 0.0
