"""The UI's door, pure parts: which token a request shows, same origin, and the bind."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcdet.errors import UsageError
from hpcdet.ui.door import (
    Door,
    admits,
    bound_hosts,
    check_bind,
    cookie_name,
    host_allowed,
    new_token,
    presented,
    same_origin,
    token,
)


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


def test_a_new_token_replaces_the_old_one_privately(tmp_path: Path) -> None:
    old = token(tmp_path)
    made = new_token(tmp_path)
    assert made != old and token(tmp_path) == made
    assert (tmp_path / "ui-token").stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["ui-token"]


def test_a_session_is_the_instances_and_ends_with_the_token(tmp_path: Path) -> None:
    token(tmp_path)
    one = Door(lambda: token(tmp_path), "hpcdet_1")
    two = Door(lambda: token(tmp_path), "hpcdet_1")
    assert one.session != two.session and token(tmp_path) not in (one.session, two.session)
    before = one.session
    assert one.token() == token(tmp_path) and one.session == before
    new_token(tmp_path)
    assert one.token() == token(tmp_path) and one.session != before
    assert cookie_name(18765, "ui.sock") == "hpcdet_18765"
    assert cookie_name(None, "tensorboard.sock") == "hpcdet_tensorboard"


def test_only_the_bound_names_are_answered() -> None:
    local = bound_hosts(None)
    for ok in ("localhost:8765", "127.0.0.1:18765", "[::1]:8765", "LOCALHOST", "localhost"):
        assert host_allowed(ok, local), ok
    for bad in ("evil.example:8765", "127.0.0.1.evil.example", "", None, "[::1", "10.0.0.5"):
        assert not host_allowed(bad, local), bad
    assert bound_hosts("127.0.0.1") == local
    assert host_allowed("10.0.0.5:80", bound_hosts("10.0.0.5"))
    assert not host_allowed("evil.example", bound_hosts("10.0.0.5"))
