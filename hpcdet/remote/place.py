"""Where the keeper's socket, lock and log live: a directory of the user's alone."""

from __future__ import annotations

import os
from pathlib import Path

from hpcdet.errors import UsageError
from hpcdet.private import private_dir

ENV_DIR = "HPCDET_KEEPER_DIR"
ENV_IDLE = "HPCDET_KEEPER_IDLE"
DEFAULT_IDLE = 1800.0


def keeper_dir() -> Path:
    """``$HPCDET_KEEPER_DIR``, else ``$XDG_RUNTIME_DIR/hpcdet``, else ``/tmp/hpcdet-keeper-UID``:
    created 0700, refused unless it is ours and nobody else can write it (in /tmp another user
    could have made it first to listen in our place)."""
    chosen = os.environ.get(ENV_DIR)
    if chosen:
        path = Path(chosen).expanduser().absolute()
    elif os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(os.environ["XDG_RUNTIME_DIR"]) / "hpcdet"
    else:
        path = Path(f"/tmp/hpcdet-keeper-{os.getuid()}")
    private_dir(path)
    return path


def socket_path() -> Path:
    return keeper_dir() / "keeper.sock"


def idle_seconds() -> float:
    """``$HPCDET_KEEPER_IDLE``: the idle seconds after which the keeper leaves (default 30
    minutes).

    Raises:
        UsageError: it is not a positive number of seconds.
    """
    raw = os.environ.get(ENV_IDLE)
    if raw is None or raw == "":
        return DEFAULT_IDLE
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{ENV_IDLE}={raw!r} is not a number of seconds; set it to how long "
                         "an idle keeper keeps its connections (e.g. 1800), or unset it for 30 "
                         "minutes")
    return max(1.0, value)
