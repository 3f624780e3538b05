"""Property: no query of the UI's JSON routes ends in a 5xx (issue 37: huge ids,
``trials=1,2,x``, a malformed log cursor or ``ranks=a`` answered 500 with a traceback). The
application runs in-process, behind its door, over the CLI fuzz's state directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from hpcdet.paths import StatePaths
from hpcdet.ui.app import make_app
from hpcdet.ui.door import Door
from tests.fuzz.test_fuzz_cli import world

__all__ = ["world"]

ROUTES = ["/api/experiments/{id}", "/api/experiments/{id}/curves",
          "/api/experiments/{id}/rungs", "/api/trials/{id}", "/api/trials/{id}/metrics",
          "/api/trials/{id}/curves", "/api/trials/{id}/checkpoints", "/api/trials/{id}/logs"]
IDS = st.one_of(st.sampled_from(["1", "0", "9223372036854775807", "9223372036854775808",
                                 "99999999999999999999999"]),
                st.integers(min_value=0, max_value=2**70).map(str))
VALUES = st.one_of(IDS, st.text(max_size=12), st.sampled_from([
    "1,2,x", "a", "1,,2", "-1", "{", "[]", '{"x": -1}', '{"run-1/node-0.log": 1e3}',
    '{"../x": 1}', '{"run-1/node-0.log": 99999999999999999999}', "INFO", "loss",
    "validation", "1,9223372036854775808"]))
PARAMS = st.dictionaries(st.sampled_from(["trials", "ranks", "cursor", "level", "group",
                                          "metric", "value"]), VALUES, max_size=4)


@pytest.fixture(scope="module")
def client(world: Path) -> Iterator[TestClient]:
    app = make_app(StatePaths(world / "state"), Door(lambda: "fuzz", "hpcdet_fuzz"))
    with TestClient(app, base_url="http://localhost",
                    headers={"Authorization": "Bearer fuzz"}) as c:
        yield c


@settings(max_examples=100, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=st.sampled_from(ROUTES), exp_or_trial=IDS, params=PARAMS)
def test_no_query_is_a_server_error(client: TestClient, route: str, exp_or_trial: str,
                                    params: dict[str, str]) -> None:
    got = client.get(route.format(id=exp_or_trial), params=params)
    assert got.status_code < 500, (route, exp_or_trial, params, got.text)
    if got.status_code == 400:
        assert any(name in got.json()["error"] for name in (
            "trials", "ranks", "cursor", "level", "group", "metric", "id")), got.text


@pytest.mark.parametrize(("url", "named"), [
    ("/api/trials/99999999999999999999", "trial_id"),
    ("/api/experiments/99999999999999999999/curves?group=g&metric=m", "exp_id"),
    ("/api/experiments/1/curves?group=validation&metric=loss&trials=1,2,x", "trials"),
    ("/api/trials/1/logs?ranks=a", "ranks"),
    ("/api/trials/1/logs?cursor=%7Bnope", "cursor"),
    ("/api/trials/1/logs?cursor=%5B1%5D", "cursor"),
])
def test_a_bad_parameter_is_a_400_naming_it(client: TestClient, url: str, named: str) -> None:
    got = client.get(url)
    assert got.status_code == 400 and named in got.json()["error"], got.text
