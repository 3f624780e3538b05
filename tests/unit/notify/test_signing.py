"""The signing key and the headers of a signed post (hpcdet.notify.signing)."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

from hpcdet.notify.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, signed_headers, signing_key


def test_the_key_is_made_once_privately_whoever_asks_first(tmp_path: Path) -> None:
    path = tmp_path / "notify" / "signing-key"
    keys: list[str] = []
    threads = [threading.Thread(target=lambda: keys.append(signing_key(path)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(keys)) == 1 and len(keys[0]) == 64
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == ["signing-key"]
    assert signing_key(path) == keys[0]


def test_the_signature_covers_the_timestamp_and_the_body() -> None:
    # HMAC-SHA256("k", "1700000000,{}"), computed with `openssl dgst -sha256 -hmac k`.
    headers = signed_headers("k", "{}", 1700000000)
    assert headers[TIMESTAMP_HEADER] == "1700000000"
    assert headers[SIGNATURE_HEADER] == (
        "cd2a4377bd57525988c7d850ec0fffa85ac3551d6f7dd98c915a9e229ac63e3f")
    assert signed_headers("k", "{}", 1700000001)[SIGNATURE_HEADER] != headers[SIGNATURE_HEADER]
