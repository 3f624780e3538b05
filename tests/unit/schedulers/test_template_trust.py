"""A site's ``template_dir`` is batch scripts that run as the user: one that another user owns
or can write is refused, saying whose it is (issue 37). Real accounts: the tests run as root,
whose own (and root's) templates are trusted."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hpcdet.errors import ConfigError
from hpcdet.schedulers.templating import check_template_dir, render
from tests.support import ensure_user, require_root

OTHER = "hpcdet-pb"
CONTEXT = {"python": "/usr/bin/python3"}


@pytest.fixture(autouse=True)
def _as_root() -> None:
    require_root("needs root to make another user's files")
    ensure_user(OTHER)


def _templates(tmp_path: Path, name: str) -> Path:
    directory = tmp_path / name
    directory.mkdir(mode=0o755)
    (directory / "t.j2").write_text("echo {{ umask }}\n")
    (directory / "t.j2").chmod(0o644)
    return directory


def test_own_templates_render(tmp_path: Path) -> None:
    directory = _templates(tmp_path, "own")
    check_template_dir(str(directory))
    assert render("t.j2", CONTEXT, str(directory)) == "echo 077\n"


def test_a_template_dir_of_another_user_is_refused_naming_them(tmp_path: Path) -> None:
    directory = _templates(tmp_path, "theirs")
    shutil.chown(directory, OTHER)
    with pytest.raises(ConfigError, match=f"template_dir: {directory} is a directory owned "
                                          f"by user {OTHER}"):
        check_template_dir(str(directory))
    with pytest.raises(ConfigError, match=f"owned by user {OTHER}"):
        render("t.j2", CONTEXT, str(directory))


def test_a_template_of_another_user_is_refused(tmp_path: Path) -> None:
    directory = _templates(tmp_path, "planted")
    shutil.chown(directory / "t.j2", OTHER)
    check_template_dir(str(directory))  # the directory itself is fine
    with pytest.raises(ConfigError, match=f"t.j2 is a file owned by user {OTHER}"):
        render("t.j2", CONTEXT, str(directory))


def test_templates_others_can_write_are_refused_with_the_fix(tmp_path: Path) -> None:
    directory = _templates(tmp_path, "open")
    directory.chmod(0o1777)  # sticky is no excuse: whoever made a file there may rewrite it
    with pytest.raises(ConfigError, match=r"mode 1777.*chmod go-w"):
        check_template_dir(str(directory))
    directory.chmod(0o755)
    (directory / "t.j2").chmod(0o666)
    with pytest.raises(ConfigError, match=r"t.j2 can be written by other users \(mode 0666\)"):
        render("t.j2", CONTEXT, str(directory))


def test_a_symlink_of_another_user_to_templates_is_refused(tmp_path: Path) -> None:
    directory = _templates(tmp_path, "real")
    link = tmp_path / "link"
    link.symlink_to(directory)
    os.lchown(link, int(_uid(OTHER)), -1)
    with pytest.raises(ConfigError, match=f"{link} is a symlink owned by user {OTHER}"):
        check_template_dir(str(link))


def _uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid
