"""Rendering batch scripts from the Jinja templates in ``templates/`` (or a site's own)."""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2

from hpcdet.config.directives import problem
from hpcdet.errors import ConfigError
from hpcdet.private import PrivacyError, check_trusted, hpcdet_command, umask_in_force

HARNESS = "hpcdet.launch.harness"
PILOT = "hpcdet.launch.pilot"


def _text(value: Any) -> str:
    return str(value.absolute()) if isinstance(value, Path) else str(value)


def shq(value: Any) -> str:
    """Quote one value for a POSIX shell; paths become absolute."""
    return shlex.quote(_text(value))


def directive(value: Any) -> str:
    """Quote one value of a directive line (``#SBATCH ...``), which is a comment to the shell:
    quotes cannot keep a newline on it, so a control character raises instead of rendering."""
    text = _text(value)
    said = problem(text, "text")
    if said is not None:
        raise ConfigError([f"{text!r} {said}"], source="value for a batch script directive")
    return shlex.quote(text)


def check_template_dir(template_dir: str | None) -> None:
    """Refuse a ``template_dir`` that another user owns or can write: its templates are
    batch scripts that run as the user (issue 37).

    Raises:
        ConfigError: naming template_dir and, where it is another's, its owner.
    """
    if template_dir and os.path.lexists(template_dir):
        try:
            check_trusted(Path(template_dir))
        except PrivacyError as e:
            raise ConfigError([f"template_dir: {e}"], source="cluster config") from e


class _TrustedLoader(jinja2.FileSystemLoader):
    """A site's templates, each loaded only while it and its directory are the user's or
    root's and nobody else can write them (``hpcdet.private.check_trusted``)."""

    def get_source(self, environment: jinja2.Environment,
                   template: str) -> tuple[str, str, Callable[[], bool]]:
        source, filename, uptodate = super().get_source(environment, template)
        check_template_dir(str(self.searchpath[0]))
        try:
            check_trusted(Path(filename))
        except PrivacyError as e:
            raise ConfigError([f"template_dir: {e}"], source="cluster config") from e
        return source, filename, uptodate


@functools.lru_cache(maxsize=8)
def environment(template_dir: str | None = None) -> jinja2.Environment:
    """One per template directory, kept: it holds the compiled templates (compiling the batch
    script's takes ~50 ms), and reloads one whose file has changed."""
    loaders: list[jinja2.BaseLoader] = []
    if template_dir:
        loaders.append(_TrustedLoader(template_dir))
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
    env.filters["directive"] = directive
    return env


def render(name: str, context: dict[str, Any], template_dir: str | None = None) -> str:
    """Every template also gets ``umask`` (the one hpcdet runs with) and ``harness``: the
    isolated command that runs the harness with the job's ``python``."""
    common = {
        "umask": umask_in_force(),
        "harness": " ".join(shq(a) for a in hpcdet_command(HARNESS, context["python"])),
        "pilot_command": " ".join(shq(a) for a in hpcdet_command(PILOT, context["python"])),
        "pilot": False,
    }
    return environment(template_dir).get_template(name).render(**{**common, **context})
