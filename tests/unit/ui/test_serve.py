"""Binding the UI: a state directory too deep for a Unix socket is a clear error (issue 37:
it was a traceback), a path that fits binds."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcdet.errors import UsageError
from hpcdet.ui.serve import SOCKET_PATH_MAX, listen


def test_a_socket_path_too_long_says_to_use_a_port(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    with pytest.raises(UsageError, match="--port") as told:
        listen(deep / "ui.sock", None, None)
    assert str(deep / "ui.sock") in str(told.value)
    fits = tmp_path / "ui.sock"
    assert len(str(fits)) <= SOCKET_PATH_MAX
    listener, port = listen(fits, None, None)
    listener.close()
    assert port is None and fits.is_socket()
