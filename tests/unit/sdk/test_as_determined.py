"""hpcdet.client.as_determined(): Determined's SDK name, opted into, never over a real one."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from hpcdet import client
from hpcdet.errors import StateError

NAMES = ("determined", "determined.experimental", "determined.experimental.client")


@pytest.fixture(autouse=True)
def _modules_as_they_were() -> Iterator[None]:
    before = {name: sys.modules.get(name) for name in NAMES}
    yield
    for name, module in before.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module


def test_the_sdk_answers_to_determineds_name_once_asked() -> None:
    for name in NAMES:
        sys.modules.pop(name, None)
    client.as_determined()
    from determined.experimental import client as det_client  # type: ignore[import-not-found]

    assert det_client is client
    import determined  # type: ignore[import-not-found]

    assert determined.IS_HPCDET_SHIM and determined.core is not None
    client.as_determined()  # again: a no-op


def test_a_real_determined_is_never_shadowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "determined", types.ModuleType("determined"))
    with pytest.raises(StateError, match="a real Determined is installed"):
        client.as_determined()
