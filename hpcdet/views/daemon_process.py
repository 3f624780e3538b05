"""The daemon's process as the CLI starts, stops and shows it (``hpcdet.daemon.process``):
the faces reach the daemon's modules through the views and the client only."""

from __future__ import annotations

from hpcdet.daemon import process
from hpcdet.paths import StatePaths

DaemonInfo = process.DaemonInfo


def start(p: StatePaths) -> DaemonInfo:
    """The running daemon, started if need be."""
    return process.start(p)


def stop(p: StatePaths) -> bool:
    """Stop the daemon; False if none was running."""
    return process.stop(p)


def info(p: StatePaths) -> DaemonInfo:
    return process.info(p)
