"""-B/--bind specifications.

Follows apptainer-exec(1) and the apptainer.org "Bind Paths and Mounts" page: a spec is
`src[:dest[:opts]]`, dest defaults to src, opts is "ro" (read-only) or "rw" (the default), and
one flag value may hold several specs separated by commas; the flag may be repeated. A source
that does not exist on the host fails the container's creation with apptainer's message
("container creation failed: mount hook function failure: mount SRC->DST error: while mounting
SRC: mount source SRC doesn't exist"), after a warning ("skipping mount of SRC: stat SRC: no
such file or directory"; measured, Apptainer 1.4.5 on Debian, 2026-11-28). The double knows no
other bind options (image-src=, id=): they are refused."""

from __future__ import annotations

import dataclasses
import os

from .messages import Fatal, warning


@dataclasses.dataclass(frozen=True)
class Bind:
    source: str
    target: str
    read_only: bool

    @property
    def spec(self) -> str:
        return f"{self.source}:{self.target}:{'ro' if self.read_only else 'rw'}"


def parse(values: list[str]) -> list[Bind]:
    return [_one(spec) for value in values for spec in value.split(",") if spec]


def check_sources(binds: list[Bind]) -> None:
    for bind in binds:
        if not os.path.exists(bind.source):
            warning(f"skipping mount of {bind.source}: stat {bind.source}: no such file or "
                    "directory")
            raise Fatal(mount_failure(bind, f"mount source {bind.source} doesn't exist"))


def mount_failure(bind: Bind, reason: str) -> str:
    return (f"container creation failed: mount hook function failure: mount "
            f"{bind.source}->{bind.target} error: while mounting {bind.source}: {reason}")


def _one(spec: str) -> Bind:
    parts = spec.split(":")
    if len(parts) > 3 or not parts[0]:
        raise Fatal(f"hpcdet's apptainer double: cannot read bind spec {spec!r} "
                    "(expected src[:dest[:ro|rw]])")
    source = os.path.abspath(parts[0])
    target = parts[1] if len(parts) > 1 and parts[1] else source
    option = parts[2] if len(parts) > 2 else "rw"
    if option not in ("ro", "rw"):
        raise Fatal(f"hpcdet's apptainer double: bind option {option!r} in {spec!r} is not "
                    "supported (only ro and rw)")
    if not target.startswith("/"):
        raise Fatal(f"hpcdet's apptainer double: bind destination {target!r} in {spec!r} must "
                    "be an absolute path")
    return Bind(source, os.path.normpath(target), option == "ro")
