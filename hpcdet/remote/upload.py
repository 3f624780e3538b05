"""`hpcdet -c NAME experiment create` (and `submit`) from a laptop: the context goes up by
content hash, then the login node creates it (the login node's half is ``hpcdet.uploads``).

The create's arguments are parsed by the same command a local create uses; the config is
validated here, so its errors name the laptop's file. The context and its ``--include``s are
snapshotted here as a local create would (``.detignore``, the 95 MB limit), every file is
hashed, and the login node says which blobs it lacks and how much of each a broken upload
left. Only those bytes go, over SFTP on the cluster's one transport; a connection that breaks
is resumed where it stopped. The create then runs there with a request id chosen here: sent
again after a dropped connection, it answers with the one experiment it made.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcdet.remote import wire
from hpcdet.remote.session import again_when_cut
from hpcdet.uploads import PART, Entry, Manifest, file_sha256

if TYPE_CHECKING:
    import paramiko

    from hpcdet.remote.session import RemoteSession

_CHUNK = 1 << 20


@dataclass(frozen=True)
class CreateArgs:
    """A create's arguments as the laptop's CLI parsed them."""

    command: tuple[str, ...]
    config_file: Path
    context: Path
    includes: tuple[Path, ...]
    overrides: tuple[str, ...]
    options: tuple[str, ...]  # passed on to the login node's create


@dataclass(frozen=True)
class Sent:
    files: int
    bytes: int


def create_args(command: tuple[str, ...], params: dict[str, Any]) -> CreateArgs:
    """A create's arguments from the parameters its command parsed."""
    config_file = Path(params["config_file"])
    overrides = tuple(params.get("config") or ())
    options = [f"--config={o}" for o in overrides]
    for flag in ("follow", "paused", "test"):
        if params.get(flag):
            options.append(f"--{flag}")
    return CreateArgs(command, config_file, Path(params.get("context") or config_file.parent),
                      tuple(Path(p) for p in params.get("includes") or ()), overrides,
                      tuple(options))


def create_on_cluster(session: RemoteSession, parsed: CreateArgs) -> int:
    """The create of ``parsed`` for the laptop on the session's cluster; its exit code."""
    from hpcdet.config import load_experiment_config
    from hpcdet.snapshot import Snapshot

    load_experiment_config(parsed.config_file, list(parsed.overrides))
    with tempfile.TemporaryDirectory(prefix="hpcdet-upload-") as tmp:
        taken = Snapshot(Path(tmp) / "context", _warn)
        taken.context(parsed.context)
        for extra in parsed.includes:
            taken.include(extra)
        manifest, sources = make_manifest(parsed, Path(tmp) / "context", uuid.uuid4().hex)
        sent = upload(session, manifest, sources)
        _say_sent(session.cluster.name, sent, len(manifest.blobs()))
        return again_when_cut(session, lambda: session.run(["relay", "create"],
                                                            stdin=manifest.to_json()))


def make_manifest(parsed: CreateArgs, snapshot: Path, request_id: str
                  ) -> tuple[Manifest, dict[str, Path]]:
    """The manifest of a snapshot and config, and where each blob's bytes are here."""
    sources: dict[str, Path] = {}

    def entry(path: Path, name: str) -> Entry:
        st = path.stat()
        sha = file_sha256(path)
        sources[sha] = path
        return Entry(name, sha, st.st_size, stat.S_IMODE(st.st_mode))

    files = []
    for root, dirs, names in os.walk(snapshot):
        dirs.sort()
        for name in sorted(names):
            path = Path(root, name)
            files.append(entry(path, path.relative_to(snapshot).as_posix()))
    config = entry(parsed.config_file, parsed.config_file.name)
    files.sort(key=lambda e: e.path)
    return Manifest(request_id, parsed.command, parsed.options, config, tuple(files)), sources


def upload(session: RemoteSession, manifest: Manifest, sources: dict[str, Path]) -> Sent:
    """The blobs the login node lacks sent over SFTP, each from where a broken upload left
    it; the files and bytes sent (bytes lost in flight when a connection broke included)."""
    files: set[str] = set()
    sent = [0]

    def once() -> int:
        code, out, err = session.capture(["relay", "plan"], manifest.to_json())
        if code != 0:
            raise wire.RemoteError(err.strip() or f"`hpcdet relay plan` exited with {code}")
        planned = json.loads(out)
        missing: dict[str, int] = planned["missing"]
        if missing:
            sftp = session.sftp()
            try:
                for sha, offset in missing.items():
                    files.add(sha)
                    _put(sftp, sources[sha], f"{planned['blobs']}/{sha}{PART}", offset, sent)
            finally:
                sftp.close()
        return 0

    again_when_cut(session, once)
    return Sent(len(files), sent[0])


def _put(sftp: paramiko.SFTPClient, source: Path, remote: str, offset: int,
         sent: list[int]) -> None:
    """``source`` from ``offset`` on appended to ``remote``, counted in ``sent[0]``."""
    if offset >= source.stat().st_size:
        return
    with source.open("rb") as src, sftp.open(remote, "ab") as dst:
        dst.set_pipelined(True)
        src.seek(offset)
        while chunk := src.read(_CHUNK):
            sent[0] += len(chunk)  # before: a write the connection broke in went in part
            dst.write(chunk)


def _say_sent(cluster: str, sent: Sent, blobs: int) -> None:
    if sent.bytes == 0:
        print(f"Sent nothing to {cluster}: its copy of the {blobs} files is up to date",
              file=sys.stderr)
    else:
        print(f"Sent {sent.bytes} bytes of {sent.files} of {blobs} files to {cluster}",
              file=sys.stderr)


def _warn(message: str) -> None:
    print(f"Warning: {message}", file=sys.stderr)
