"""`hpcdet -c NAME checkpoint download` (and `trial download`, `experiment download`) from a
laptop: the login node's own command chooses the checkpoints and checks them (`hpcdet relay
download`), without copying; their files come here over SFTP, into the directory the command
names on the laptop, and its output is the login node's.

Each checkpoint's files gather in ``.<name>.hpcdet-download`` beside its directory and move
into place once whole, as a local download's do; a broken connection is resumed file by file
from the bytes already here, in the same command or by running it again.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcdet.remote import wire
from hpcdet.remote.session import again_when_cut

if TYPE_CHECKING:
    import paramiko

    from hpcdet.remote.session import RemoteSession

_CHUNK = 1 << 20
PARTIAL = ".hpcdet-download"


def download_on_cluster(session: RemoteSession, argv: Sequence[str]) -> int:
    """``hpcdet <argv>`` (a download) for the laptop on the session's cluster; its exit
    code."""
    code, out, err = session.capture(["relay", "download", *argv])
    sys.stderr.write(err)
    if code != 0 or not out.startswith("{"):
        sys.stdout.write(out)
        return code
    result = json.loads(out)
    for listed in result["checkpoints"]:
        fetch(session, listed)
    sys.stdout.write(result["output"])
    if result["error"]:
        print(f"Error: {result['error']}", file=sys.stderr)
    return int(result["code"])


def fetch(session: RemoteSession, listed: dict[str, Any]) -> Path:
    """One checkpoint's files (``relay download``'s listing) into its directory here."""
    from hpcdet.private import download_target, private_dir
    from hpcdet.uploads import safe_relative

    files = [(str(rel), int(size), int(mode)) for rel, size, mode in listed["files"]]
    outside = [rel for rel, _, _ in files if not safe_relative(rel)]
    if outside:  # the login node lists what a trial wrote: nothing of it lands elsewhere
        raise wire.RemoteError(f"checkpoint {listed['uuid']} lists files outside its "
                               f"directory ({outside[0]!r}); nothing was downloaded")
    target = download_target(Path(listed["dest"]))
    partial = private_dir(target.parent / f".{target.name}{PARTIAL}")
    source = str(listed["source"])

    def once() -> int:
        sftp = session.sftp()
        try:
            for rel, size, mode in files:
                local = partial.joinpath(*rel.split("/"))
                local.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                _get(sftp, f"{source}/{rel}", local, size)
                os.chmod(local, mode & 0o700)
        finally:
            sftp.close()
        return 0

    again_when_cut(session, once)
    os.replace(partial, target)
    return target


def _get(sftp: paramiko.SFTPClient, remote: str, local: Path, size: int) -> None:
    """``remote`` (``size`` bytes) into ``local``, from the bytes ``local`` has already."""
    have = local.stat().st_size if local.exists() else 0
    if have > size:
        local.unlink()
        have = 0
    if have == size and local.exists():
        return
    with sftp.open(remote, "rb") as src, local.open("ab") as dst:
        src.seek(have)
        src.prefetch(size)
        while have < size:
            chunk = src.read(min(_CHUNK, size - have))
            if not chunk:
                raise wire.RemoteError(f"{remote} on the login node is shorter than it was "
                                       "listed; download it again")
            dst.write(chunk)
            have += len(chunk)
