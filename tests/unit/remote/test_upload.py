"""A laptop's create (hpcdet/remote/upload.py): its arguments parsed by the local command,
and the manifest of a snapshot."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from hpcdet.cli.remote import parse_create as parse
from hpcdet.remote.forward import uploads as command_words
from hpcdet.remote.upload import CreateArgs, make_manifest


@pytest.mark.parametrize(("argv", "words"), [
    (["e", "create", "c.yaml", "."], ("experiment", "create")),
    (["experiment", "create"], ("experiment", "create")),
    (["submit", "c.yaml"], ("submit",)),
    (["e", "list"], None), (["t", "create"], None), ([], None),
])
def test_the_commands_that_upload(argv: list[str], words: tuple[str, ...] | None) -> None:
    assert command_words(argv) == words


def test_a_create_is_parsed_as_the_local_command_parses_it() -> None:
    parsed = parse(["e", "create", "-f", "--config", "a=1", "cfg.yaml", "ctx", "-i", "x",
                    "--include=y", "--config=b.c=2"])
    assert parsed == CreateArgs(("experiment", "create"), Path("cfg.yaml"), Path("ctx"),
                                (Path("x"), Path("y")), ("a=1", "b.c=2"),
                                ("--config=a=1", "--config=b.c=2", "--follow"))
    submitted = parse(["submit", "dir/cfg.yaml"])
    assert isinstance(submitted, CreateArgs) and submitted.context == Path("dir")
    assert parse(["e", "create", "--paused", "c", "d"]).options == ("--paused",)  # type: ignore[union-attr]


def test_a_usage_error_is_left_to_the_login_nodes_command() -> None:
    assert parse(["e", "create", "only-one"]) is None
    assert parse(["e", "create", "c", "d", "--no-such-option"]) is None


def test_the_manifest_holds_each_file_by_hash_with_its_mode(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    (snap / "a").mkdir(parents=True)
    (snap / "a" / "m.py").write_text("x = 1\n")
    (snap / "run.sh").write_text("#!/bin/sh\n")
    (snap / "run.sh").chmod(0o700)
    (snap / "same.py").write_text("x = 1\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("entrypoint: x\n")
    args = CreateArgs(("submit",), cfg, snap, (), (), ("--config=a=1",))
    manifest, sources = make_manifest(args, snap, "rid")
    sha = hashlib.sha256(b"x = 1\n").hexdigest()
    assert [(e.path, e.sha256 == sha, e.mode) for e in manifest.files] == [
        ("a/m.py", True, 0o644 & ~_umask()), ("run.sh", False, 0o700),
        ("same.py", True, 0o644 & ~_umask())]
    assert manifest.config.path == "c.yaml" and manifest.options == ("--config=a=1",)
    assert len(manifest.blobs()) == 3 and sources[manifest.config.sha256] == cfg
    assert manifest.request_id == "rid" and manifest.command == ("submit",)


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("rel", ["../x", "/etc/passwd", "a/../../x", "a//b", ""])
def test_a_download_listing_a_file_outside_its_directory_fetches_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rel: str) -> None:
    from hpcdet.remote import wire
    from hpcdet.remote.download import fetch

    monkeypatch.chdir(tmp_path)
    listed = {"uuid": "u", "source": "/x", "dest": "got", "files": [[rel, 1, 0o600]]}
    with pytest.raises(wire.RemoteError, match="outside its directory"):
        fetch(None, listed)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
