"""`inspect [--json] [--labels|--environment] IMAGE` of a double SIF.

Follows apptainer-inspect(1): labels are shown by default (-l/--labels), -e/--environment shows
the image's environment script, -j/--json prints structured JSON instead of sections.  The text
and JSON shapes are apptainer's: "key: value" lines for labels; "=== <script> ===" followed by
the script for the environment; {"data": {"attributes": {...}}, "type": "container"} for JSON.
A pulled Docker image keeps its environment in /.singularity.d/env/10-docker2singularity.sh.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping

from . import sif
from .cli import Command, Flag, Parsed
from .tools import Tool

DOCKER_ENV_SCRIPT = "/.singularity.d/env/10-docker2singularity.sh"

COMMAND = Command(
    name="inspect",
    use="inspect [inspect options...] <image path>",
    flags=(
        Flag("environment", "e", usage="show the environment settings for the image"),
        Flag("json", "j", usage="print structured json instead of sections"),
        Flag("labels", "l", usage="show the labels for the image (default)"),
    ),
    min_args=1,
    max_args=1,
)


def describe(parsed: Parsed) -> dict[str, object]:
    return {"image": parsed.args[0]}


def run(tool: Tool, parsed: Parsed, environ: Mapping[str, str]) -> int:
    image = sif.read(parsed.args[0])
    show_env = parsed.is_set("environment")
    show_labels = parsed.is_set("labels") or not show_env
    if parsed.is_set("json"):
        print(json.dumps(_as_json(image, show_labels, show_env), indent=4))
        return 0
    if show_labels:
        print(_labels_text(image), end="")
    if show_env:
        print(f"=== {DOCKER_ENV_SCRIPT} ===\n{_env_script(image)}", end="")
    return 0


def _as_json(image: sif.Sif, labels: bool, env: bool) -> dict[str, object]:
    attributes: dict[str, object] = {}
    if labels:
        attributes["labels"] = dict(sorted(image.labels.items()))
    if env:
        attributes["environment"] = {DOCKER_ENV_SCRIPT: _env_script(image)}
    return {"data": {"attributes": attributes}, "type": "container"}


def _labels_text(image: sif.Sif) -> str:
    return "".join(f"{k}: {v}\n" for k, v in sorted(image.labels.items()))


def _env_script(image: sif.Sif) -> str:
    lines = [f"export {k}={shlex.quote(v)}" for k, v in image.env.items()]
    return "#!/bin/sh\n" + "".join(f"{line}\n" for line in lines)
