"""The registry's journal entries applied: models and versions, once, with the offset in a row
of its own."""

from __future__ import annotations

from pathlib import Path

from hpcdet.rundir.atomic import append_lines, whole_lines
from hpcdet.store.entries import ModelCreated, ModelVersionRegistered, decode, encode
from hpcdet.store.repository import Store

VERSION = ModelVersionRegistered(model="m", version=1, uuid="u1", experiment_id=3,
                                 trial_id=4, steps_completed=50, storage="/ckpts")


def _apply(store: Store, path: Path, reported: list[tuple[int, str]]) -> int:
    return store.apply_registry_journal(lambda offset: whole_lines(path, offset), set(),
                                        lambda start, why: reported.append((start, why)))


def test_entries_read_back_as_written() -> None:
    created = ModelCreated(name="m", description="d", metadata={"a": [1]})
    assert decode(ModelCreated, encode(created)) == created
    assert decode(ModelVersionRegistered, encode(VERSION)) == VERSION


def test_applied_once_and_again_after_a_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "registry.jsonl"
    append_lines(path, [{"exp_id": 0, "time": 10.0, **encode(e)} for e in (
        ModelCreated(name="m", description="d"), VERSION,
        ModelVersionRegistered(model="m", version=2, uuid="u2", experiment_id=3, trial_id=5,
                               steps_completed=60, storage="/ckpts"))])
    append_lines(path, [{"exp_id": 0, "time": 11.0, "kind": "model_shiny"}])
    store = Store(tmp_path / "a.db")
    reported: list[tuple[int, str]] = []
    assert _apply(store, path, reported) == 3
    assert _apply(store, path, reported) == 0
    assert [why for _, why in reported] == ["an entry of unknown kind 'model_shiny'"]
    [m] = store.models()
    assert (m.name, m.description, m.created) == ("m", "d", 10.0)
    assert [(v.version, v.uuid, v.trial_id) for v in m.versions] == [(1, "u1", 4), (2, "u2", 5)]
    again = Store(tmp_path / "b.db")
    assert _apply(again, path, []) == 3
    assert again.models() == store.models()


def test_an_entry_applied_twice_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "registry.jsonl"
    lines = [{"exp_id": 0, "time": 1.0, **encode(e)}
             for e in (ModelCreated(name="m"), VERSION)]
    append_lines(path, lines + lines)  # a daemon killed before its offset was committed
    store = Store(tmp_path / "a.db")
    _apply(store, path, [])
    assert [len(m.versions) for m in store.models()] == [1]
