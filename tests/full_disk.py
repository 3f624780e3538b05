"""A real full filesystem for tests: a small tmpfs mounted for one test (needs root)."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.support import require_root


def mount_small_fs(where: Path, size: str = "2m") -> Iterator[Path]:
    """Mount a tmpfs of ``size`` at ``where`` for the duration of the generator."""
    require_root("mounting a small tmpfs needs root")
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                    str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(fs: Path) -> Path:
    """Take every free byte of ``fs``; remove the returned file to free them again."""
    filler = fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
    finally:
        os.close(fd)
    return filler
