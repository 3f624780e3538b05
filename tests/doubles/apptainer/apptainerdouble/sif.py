"""The double's stand-in for a SIF file.

Two lines: `HPCDET-APPTAINER-DOUBLE-SIF 1`, then one JSON object {"ref", "env", "labels",
"content"} ("content", the registry entry's host paths that make up the image's files, is absent
from files written before it existed, and then means none).  It is written the way a pull must
leave it for concurrent readers: to a temporary file in the destination's directory, then renamed
over the destination, so nobody ever sees half an image.
Real SIF files are executable (they start with a "#!/usr/bin/env run-singularity" line), so the
mode is 0777 less the umask.

Messages for unusable images are Apptainer 1.4.5's (measured on Debian, 2026-11-28; exit 255,
relative names made absolute from the working directory): "While checking container
encryption: could not open image /abs/X: failed to retrieve path for /abs/X: lstat /abs/X: no
such file or directory"; "While checking container encryption: could not open image /abs/X:
image format not recognized".  A content path
that is missing on the host makes the image unusable for `exec`, in the double's own words
("could not open image X: hpcdet's apptainer double: image content P doesn't exist on the
host").
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile

from .messages import Fatal

MAGIC = "HPCDET-APPTAINER-DOUBLE-SIF 1"
CHECKING = "While checking container encryption: "


@dataclasses.dataclass(frozen=True)
class Sif:
    ref: str
    env: dict[str, str]
    labels: dict[str, str]
    content: tuple[str, ...] = ()


def write_atomically(path: str, sif: Sif) -> None:
    body = json.dumps({"ref": sif.ref, "env": sif.env, "labels": sif.labels,
                       "content": list(sif.content)}, sort_keys=True)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".hpcdet-sif-", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(f"{MAGIC}\n{body}\n")
        os.chmod(tmp, 0o777 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        _remove_quietly(tmp)
        raise


def read(path: str) -> Sif:
    """The image at `path`, or Fatal with the real tool's wording."""
    absolute = os.path.abspath(path)
    if not os.path.lexists(absolute):
        raise Fatal(f"{CHECKING}could not open image {absolute}: failed to retrieve path for "
                    f"{absolute}: lstat {absolute}: no such file or directory")
    try:
        with open(absolute, encoding="utf-8") as f:
            magic, body = f.readline().rstrip("\n"), f.readline()
        data = json.loads(body) if magic == MAGIC else None
    except (OSError, UnicodeDecodeError, ValueError):
        data = None
    if not isinstance(data, dict):
        raise Fatal(f"{CHECKING}could not open image {absolute}: image format not recognized")
    return Sif(str(data.get("ref", "")), dict(data.get("env") or {}),
               dict(data.get("labels") or {}), tuple(str(p) for p in data.get("content") or ()))


def check_content(path: str, sif: Sif) -> None:
    """Fatal, as for a damaged image, when a content path is missing on the host."""
    for content in sif.content:
        if not os.path.exists(content):
            raise Fatal(f"could not open image {os.path.abspath(path)}: hpcdet's apptainer "
                        f"double: image content {content} doesn't exist on the host")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
