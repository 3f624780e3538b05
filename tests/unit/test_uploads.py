"""The login node's half of a laptop's upload (hpcdet/uploads.py): manifests checked, missing
blobs planned from what broken uploads left, parts checked by hash before they are used."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

import pytest

from hpcdet.errors import UsageError
from hpcdet.uploads import KEEP_DAYS, Entry, Manifest, assemble, blob_dir, plan


def _entry(path: str, data: bytes, mode: int = 0o644) -> Entry:
    return Entry(path, hashlib.sha256(data).hexdigest(), len(data), mode)


CONFIG = b"entrypoint: python3 train.py\n"
TRAIN = b"print('train')\n"
RUN = b"#!/bin/sh\n"


def _manifest(**changes: object) -> Manifest:
    base = Manifest("r1", ("experiment", "create"), ("--paused",), _entry("c.yaml", CONFIG),
                    (_entry("train.py", TRAIN), _entry("bin/run.sh", RUN, 0o755)))
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _blob(uploads: Path, data: bytes, suffix: str = "") -> Path:
    blobs = blob_dir(uploads)
    blobs.mkdir(parents=True, exist_ok=True)
    path = blobs / (hashlib.sha256(data).hexdigest() + suffix)
    path.write_bytes(data)
    return path


def test_a_manifest_goes_there_and_back() -> None:
    m = _manifest()
    assert Manifest.from_json(m.to_json()) == m


@pytest.mark.parametrize(("changes", "said"), [
    ({"request_id": "../r"}, "is not a request id"),
    ({"command": ("experiment", "kill")}, "not one that uploads"),
    ({"config": _entry("../c.yaml", CONFIG)}, "is not a file name"),
    ({"config": _entry("a/c.yaml", CONFIG)}, "is not a file name"),
    ({"files": (_entry("/etc/passwd", TRAIN),)}, "not a relative path inside"),
    ({"files": (_entry("a/../../x", TRAIN),)}, "not a relative path inside"),
    ({"files": (_entry("a//x", TRAIN),)}, "not a relative path inside"),
    ({"files": (_entry("x", TRAIN), _entry("x", RUN))}, "listed twice"),
    ({"files": (Entry("x", "abc", 1),)}, "not a SHA-256"),
    ({"files": (Entry("x", "a" * 64, -1),)}, "not a SHA-256"),
])
def test_a_manifest_that_could_reach_outside_is_refused(changes: dict[str, object],
                                                         said: str) -> None:
    with pytest.raises(UsageError, match="upload manifest: .*" + said):
        Manifest.from_json(_manifest(**changes).to_json())


@pytest.mark.parametrize("data", [b"{", b"[]", b'{"request_id": "r"}'])
def test_not_a_manifest_is_a_usage_error(data: bytes) -> None:
    with pytest.raises(UsageError, match="not an upload manifest of hpcdet"):
        Manifest.from_json(data)


def test_plan_asks_for_what_is_missing_from_where_a_broken_upload_stopped(
        tmp_path: Path) -> None:
    m = _manifest()
    _blob(tmp_path, CONFIG)
    part = _blob(tmp_path, TRAIN[:5], ".part")
    part.rename(part.with_name(hashlib.sha256(TRAIN).hexdigest() + ".part"))
    missing = plan(tmp_path, m)
    assert missing == {hashlib.sha256(TRAIN).hexdigest(): 5, hashlib.sha256(RUN).hexdigest(): 0}
    assert oct(blob_dir(tmp_path).stat().st_mode & 0o777) == "0o700"


def test_a_part_longer_than_its_blob_begins_again(tmp_path: Path) -> None:
    sha = hashlib.sha256(TRAIN).hexdigest()
    (blob_dir(tmp_path)).mkdir(parents=True)
    (blob_dir(tmp_path) / f"{sha}.part").write_bytes(TRAIN + b"more")
    assert plan(tmp_path, _manifest(files=(_entry("t.py", TRAIN),)))[sha] == 0
    assert not (blob_dir(tmp_path) / f"{sha}.part").exists()


def test_blobs_unused_for_a_week_are_removed_and_used_ones_kept(tmp_path: Path) -> None:
    old, kept = _blob(tmp_path, b"old code"), _blob(tmp_path, CONFIG)
    recent = _blob(tmp_path, b"yesterday's")
    week_ago = 1e9 - KEEP_DAYS * 86400 - 1
    for path in (old, kept):
        os.utime(path, (week_ago, week_ago))
    os.utime(recent, (1e9 - 86400, 1e9 - 86400))
    plan(tmp_path, _manifest(), now=1e9)
    assert not old.exists() and kept.exists() and recent.exists()
    assert kept.stat().st_mtime == 1e9


def test_assemble_copies_the_files_out_with_their_modes(tmp_path: Path) -> None:
    uploads = tmp_path / "uploads"
    for data in (CONFIG, TRAIN, RUN):
        _blob(uploads, data, ".part")  # a whole part becomes its blob once its hash is right
    config, context = assemble(uploads, _manifest(), tmp_path / "work")
    assert config == tmp_path / "work" / "config" / "c.yaml" and config.read_bytes() == CONFIG
    assert (context / "train.py").read_bytes() == TRAIN
    assert (context / "bin" / "run.sh").stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in blob_dir(uploads).iterdir()) == sorted(
        hashlib.sha256(d).hexdigest() for d in (CONFIG, TRAIN, RUN))


def test_a_damaged_part_is_removed_and_said(tmp_path: Path) -> None:
    _blob(tmp_path, CONFIG)
    _blob(tmp_path, RUN)
    sha = hashlib.sha256(TRAIN).hexdigest()
    (blob_dir(tmp_path) / f"{sha}.part").write_bytes(b"X" * len(TRAIN))
    with pytest.raises(UsageError, match="arrived damaged .* run the command again"):
        assemble(tmp_path, _manifest(), tmp_path / "work")
    assert not (blob_dir(tmp_path) / f"{sha}.part").exists()
    (blob_dir(tmp_path) / f"{sha}.part").write_bytes(TRAIN[:3])
    with pytest.raises(UsageError, match=f"incomplete \\(3 of {len(TRAIN)} bytes"):
        assemble(tmp_path, _manifest(), tmp_path / "work2")
