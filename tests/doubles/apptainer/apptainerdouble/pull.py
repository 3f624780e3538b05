"""`pull [--force|-F] [--disable-cache] [DEST] docker://REF`.

Follows apptainer-pull(1): "pull [pull options...] [output file] <URI>"; without an output file
the image is named after the repository and tag (docker://library/python:3.11 ->
python_3.11.sif in the current directory); an existing output file is refused unless
-F/--force ("Image file already exists: "X" - will not overwrite"). Progress goes to stderr as
INFO lines like apptainer 1.3's ("Converting OCI blobs to SIF format", "Starting build...",
"Creating SIF file..."). There is no cache: --disable-cache is accepted and changes nothing.

HPCDET_APPTAINER_DOUBLE_PULL_SECONDS (a float) makes the pull sleep that long before it writes
the image, so tests can run pulls concurrently.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from . import registry, sif
from .cli import Command, Flag, Parsed
from .messages import Fatal, info
from .tools import Tool

DELAY_VAR = "HPCDET_APPTAINER_DOUBLE_PULL_SECONDS"

COMMAND = Command(
    name="pull",
    use="pull [pull options...] [output file] <URI>",
    flags=(
        Flag("disable-cache", usage="dont use cached images/blobs and dont create them"),
        Flag("force", "F", usage="overwrite an image file if it exists"),
    ),
    min_args=1,
    max_args=2,
)


def describe(parsed: Parsed) -> dict[str, object]:
    """What the invocation log records about a pull."""
    uri = parsed.args[-1]
    try:
        dest = _destination(parsed)
    except Fatal:
        return {"ref": uri}
    return {"ref": uri, "dest": os.path.abspath(dest)}


def run(tool: Tool, parsed: Parsed, environ: Mapping[str, str]) -> int:
    dest = _destination(parsed)
    if os.path.lexists(dest) and not parsed.is_set("force"):
        raise Fatal(f'Image file already exists: "{dest}" - will not overwrite')
    ref = registry.parse_uri(parsed.args[-1])
    image = registry.lookup(ref, environ)
    registry.check_credentials(tool, ref, image, environ)
    info("Converting OCI blobs to SIF format")
    info("Starting build...")
    time.sleep(_delay(environ))
    info("Creating SIF file...")
    sif.write_atomically(dest, sif.Sif(ref.uri, image.env, image.labels, image.content))
    return 0


def _destination(parsed: Parsed) -> str:
    if len(parsed.args) == 2:
        return parsed.args[0]
    return registry.parse_uri(parsed.args[-1]).default_sif_name


def _delay(environ: Mapping[str, str]) -> float:
    raw = environ.get(DELAY_VAR, "")
    try:
        return max(0.0, float(raw)) if raw else 0.0
    except ValueError:
        raise Fatal(f"hpcdet's apptainer double: {DELAY_VAR}={raw!r} is not a number") from None
