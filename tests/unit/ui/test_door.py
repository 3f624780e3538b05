"""The UI's door, pure parts: which token a request shows, same origin, and the bind."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcdet.errors import UsageError
from hpcdet.ui.door import admits, check_bind, presented, same_origin, token


def test_the_token_is_made_once_and_private(tmp_path: Path) -> None:
    made = token(tmp_path)
    assert len(made) >= 40 and token(tmp_path) == made
    assert (tmp_path / "ui-token").stat().st_mode & 0o777 == 0o600


def test_which_token_a_request_shows() -> None:
    assert presented("c", "Bearer h", "q") == "h"
    assert presented("c", None, "q") == "c"
    assert presented(None, None, "q") == "q"
    assert presented(None, "Basic x", None) is None
    assert admits("s", "s") and not admits("s", "t") and not admits("s", None)


def test_same_origin() -> None:
    assert same_origin("http://localhost:8765", None, "localhost:8765")
    assert same_origin(None, "http://localhost:8765/x?y", "localhost:8765")
    assert not same_origin("https://evil.example", None, "localhost:8765")
    assert not same_origin(None, None, "localhost:8765")


def test_only_loopback_unless_asked() -> None:
    assert check_bind("127.0.0.1", False) is None
    assert check_bind("::1", False) is None
    assert check_bind("localhost", False) is None
    with pytest.raises(UsageError, match="--allow-remote"):
        check_bind("0.0.0.0", False)
    warning = check_bind("10.0.0.5", True)
    assert warning is not None and "other machines" in warning
