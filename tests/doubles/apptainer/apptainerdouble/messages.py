"""Messages and exit codes in the real tool's style.

Apptainer logs through its sylog package: a level tag padded to nine columns ("FATAL:   ",
"WARNING: ", "INFO:    ") on stderr, and a fatal message exits with status 255 (seen in user
reports, e.g. DIRACGrid/DIRAC pull request 8269: "Command exited with 255: apptainer ... exec").
Command-line mistakes are not fatal messages: the cobra front end reports them and exits 1 (see
cli.py).
"""

from __future__ import annotations

import sys

FATAL_EXIT = 255
USAGE_EXIT = 1


class Fatal(Exception):
    """A `FATAL:` message; the invocation exits with FATAL_EXIT."""


def fatal(message: str) -> None:
    _emit("FATAL:   ", message)


def warning(message: str) -> None:
    _emit("WARNING: ", message)


def info(message: str) -> None:
    _emit("INFO:    ", message)


def _emit(tag: str, message: str) -> None:
    sys.stderr.write(f"{tag}{message}\n")
    sys.stderr.flush()
