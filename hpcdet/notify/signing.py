"""Signed posts, as Determined's master signs them (master/internal/webhooks/shipper.go):
``X-Determined-AI-Signature-Timestamp: T`` and ``X-Determined-AI-Signature:`` the hex
HMAC-SHA256 of ``T,BODY`` with the signing key. Determined's key is the master config's
``webhooks.signing_key``; hpcdet's is a random key of the user's, kept 0600 in the state
directory (``hpcdet webhook signing-key`` prints it for the receiver to check posts with)."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from hpcdet.private import open_private, private_dir

KEY_FILE = "signing-key"
TIMESTAMP_HEADER = "X-Determined-AI-Signature-Timestamp"
SIGNATURE_HEADER = "X-Determined-AI-Signature"


def signing_key(path: Path) -> str:
    """The key in ``path``, made there (0600) the first time; the daemon and the CLI may
    both ask first: the key is written aside and linked in whole, and the first link wins."""
    if not path.exists():
        private_dir(path.parent)
        aside = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        with os.fdopen(open_private(aside, os.O_WRONLY | os.O_EXCL), "w") as f:
            f.write(secrets.token_hex(32) + "\n")
        try:
            os.link(aside, path)
        except FileExistsError:
            pass
        finally:
            aside.unlink()
    return path.read_text().strip()


def signed_headers(key: str, body: str, timestamp: int) -> dict[str, str]:
    digest = hmac.new(key.encode(), f"{timestamp},{body}".encode(), hashlib.sha256)
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: digest.hexdigest()}


__all__ = ["KEY_FILE", "SIGNATURE_HEADER", "TIMESTAMP_HEADER", "signed_headers", "signing_key"]
