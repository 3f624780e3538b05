"""Noticing that a small file the daemon replaces (a run's control file) changed."""

from __future__ import annotations

from pathlib import Path


class FileWatch:
    """Cheap change detection for a small control file: one ``stat`` per ``changed()``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sig: tuple[int, int, int] | None = None

    def changed(self) -> bool:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return False
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        if sig != self._sig:
            self._sig = sig
            return True
        return False
