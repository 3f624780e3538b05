"""Rendering batch scripts from the Jinja templates in ``templates/`` (or a site's own)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import jinja2

from hpcdet.private import hpcdet_command, umask_in_force

HARNESS = "hpcdet.launch.harness"


def shq(value: Any) -> str:
    """Quote one value for a POSIX shell; paths become absolute."""
    if isinstance(value, Path):
        value = str(value.absolute())
    return shlex.quote(str(value))


def environment(template_dir: str | None = None) -> jinja2.Environment:
    loaders: list[jinja2.BaseLoader] = []
    if template_dir:
        loaders.append(jinja2.FileSystemLoader(template_dir))
    loaders.append(jinja2.PackageLoader("hpcdet.templates", "."))
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["shq"] = shq
    return env


def render(name: str, context: dict[str, Any], template_dir: str | None = None) -> str:
    """Every template also gets ``umask`` (the one hpcdet runs with) and ``harness``: the
    isolated command that runs the harness with the job's ``python``."""
    common = {
        "umask": umask_in_force(),
        "harness": " ".join(shq(a) for a in hpcdet_command(HARNESS, context["python"])),
    }
    return environment(template_dir).get_template(name).render(**common, **context)
