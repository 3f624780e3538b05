"""The login node's half of a laptop's `hpcdet -c NAME experiment create` (the laptop's is
``hpcdet.remote.upload``).

The laptop snapshots the context as a create here would (``.detignore``, the 95 MB limit) and
sends a manifest: each file's path, SHA-256, size and mode, the config file likewise, and the
create's command and options with the request id the laptop chose. Files travel as blobs named
by their hash in ``<state>/uploads/blobs``, private to the user: ``plan`` says which blobs are
missing and how much of each an earlier, broken upload left (``<sha>.part``, appended to over
SFTP); ``assemble`` checks every part's hash before it becomes a blob and copies the files
out into a directory the ordinary create then snapshots. A context uploaded before sends
nothing again; blobs unused for ``KEEP_DAYS`` are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpcdet.errors import UsageError
from hpcdet.private import open_private, private_dir
from hpcdet.protocol.filedrop import CALLER_REQUEST_ID
from hpcdet.remote.forward import UPLOADS as COMMANDS  # the laptop's list: one of them

KEEP_DAYS = 7
PART = ".part"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Entry:
    """One file: where it goes (relative, ``/``-separated), its content's hash, size, mode."""

    path: str
    sha256: str
    size: int
    mode: int = 0o644


@dataclass(frozen=True)
class Manifest:
    """What a laptop uploads for one create. ``command``: one of ``COMMANDS``; ``options``:
    the create's options past its config file and context (``--include`` already taken into
    the files)."""

    request_id: str
    command: tuple[str, ...]
    options: tuple[str, ...]
    config: Entry
    files: tuple[Entry, ...]

    def blobs(self) -> dict[str, int]:
        """Every blob the create needs: hash -> size."""
        return {e.sha256: e.size for e in (self.config, *self.files)}

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        """Raises:
            UsageError: not a manifest of this hpcdet, naming what is wrong."""
        try:
            raw = json.loads(data)
            manifest = cls(
                str(raw["request_id"]), tuple(map(str, raw["command"])),
                tuple(map(str, raw["options"])), _entry(raw["config"]),
                tuple(_entry(e) for e in raw["files"]))
        except (ValueError, KeyError, TypeError) as e:
            raise UsageError(f"not an upload manifest of hpcdet: {e}") from None
        problem = manifest.problem()
        if problem:
            raise UsageError(f"upload manifest: {problem}")
        return manifest

    def problem(self) -> str | None:
        if not CALLER_REQUEST_ID.fullmatch(self.request_id):
            return f"request_id {self.request_id!r} is not a request id"
        if self.command not in COMMANDS:
            return f"command {' '.join(self.command)!r} is not one that uploads"
        if "/" in self.config.path or not safe_relative(self.config.path):
            return f"config file name {self.config.path!r} is not a file name"
        paths = set()
        for e in (self.config, *self.files):
            if not _SHA256.fullmatch(e.sha256) or e.size < 0 or not 0 <= e.mode <= 0o7777:
                return f"{e.path!r}: not a SHA-256, size and mode"
        for e in self.files:
            if not safe_relative(e.path):
                return f"{e.path!r} is not a relative path inside the context"
            if e.path in paths:
                return f"{e.path!r} is listed twice"
            paths.add(e.path)
        return None


def _entry(raw: dict[str, Any]) -> Entry:
    return Entry(str(raw["path"]), str(raw["sha256"]), int(raw["size"]), int(raw["mode"]))


def safe_relative(path: str) -> bool:
    """Whether ``path`` (``/``-separated) stays inside the directory it is relative to."""
    parts = path.split("/")
    return bool(path) and all(p not in ("", ".", "..") and "\0" not in p for p in parts)


def blob_dir(uploads: Path) -> Path:
    return uploads / "blobs"


def plan(uploads: Path, manifest: Manifest, now: float | None = None) -> dict[str, int]:
    """The blobs still to send: hash -> bytes of it already here (an upload that broke off
    resumes there). Blobs the manifest names are marked used; others unused for
    ``KEEP_DAYS`` are removed."""
    blobs = private_dir(blob_dir(uploads))
    now = time.time() if now is None else now
    missing: dict[str, int] = {}
    for sha, size in manifest.blobs().items():
        blob = blobs / sha
        if blob.exists():
            os.utime(blob, (now, now))
            continue
        part = blobs / f"{sha}{PART}"
        have = part.stat().st_size if part.exists() else 0
        if have > size:  # not this content: begin again
            part.unlink()
            have = 0
        missing[sha] = have
    before = now - KEEP_DAYS * 86400
    _forget_unused(blobs, before, set(manifest.blobs()))
    _forget_unused(private_dir(uploads / "locks"), before, set())
    return missing


def _forget_unused(blobs: Path, before: float, keep: set[str]) -> None:
    for entry in os.scandir(blobs):
        with contextlib.suppress(OSError):
            if entry.name.removesuffix(PART) not in keep and entry.stat().st_mtime < before:
                os.unlink(entry.path)


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's content, as a laptop names its blob."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _complete(blobs: Path, sha: str, size: int) -> Path:
    """The blob ``sha``, made from its part once that is whole and its hash right."""
    blob = blobs / sha
    if blob.exists():
        return blob
    part = blobs / f"{sha}{PART}"
    have = part.stat().st_size if part.exists() else -1
    if have != size:
        raise UsageError(f"the upload is incomplete ({max(have, 0)} of {size} bytes of blob "
                         f"{sha[:12]}); run the command again: it sends what is missing")
    if file_sha256(part) != sha:
        part.unlink()
        raise UsageError(f"blob {sha[:12]} arrived damaged (its SHA-256 differs) and was "
                         "removed; run the command again to send it anew")
    os.replace(part, blob)
    return blob


def assemble(uploads: Path, manifest: Manifest, into: Path) -> tuple[Path, Path]:
    """The config file and the context directory of ``manifest``, copied out of the blobs
    into ``into`` (new); returns (config file, context directory).

    Raises:
        UsageError: a blob is missing or damaged (the command sent again mends it).
    """
    blobs = blob_dir(uploads)
    found = {sha: _complete(blobs, sha, size) for sha, size in manifest.blobs().items()}
    context = into / "context"
    context.mkdir(parents=True)
    (into / "config").mkdir()
    config = into / "config" / manifest.config.path
    shutil.copyfile(found[manifest.config.sha256], config)
    for e in manifest.files:
        target = context.joinpath(*e.path.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found[e.sha256], target)
        os.chmod(target, e.mode & 0o777)
    return config, context


@contextlib.contextmanager
def one_at_a_time(uploads: Path, request_id: str) -> Iterator[None]:
    """The same create sent again while the first still runs here (its connection dropped,
    its process not yet ended) waits for it, then gets the experiment it made."""
    import fcntl

    locks = private_dir(uploads / "locks")
    fd = open_private(locks / request_id)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # left in place: one removed while waited on would let a third in
