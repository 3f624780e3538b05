"""The environment a command sees inside the container.

Follows the apptainer.org user docs, "Environment and Metadata" (apptainer-userdocs
environment_and_metadata.rst), section by section:

- "Environment from the host": host variables pass in, except that PS1 is reset, PATH gets the
  image's value (or the default), LD_LIBRARY_PATH becomes /.singularity.d/libs, and a host
  variable never overrides a variable of the same name set in the image.
- "-e / --cleanenv": no host variables, except the ones always passed (TERM and the proxy
  variables, upper and lower case); the docs' example output also shows LANG=C.
- "Environment from the runtime": <PREFIX>_COMMAND, _CONTAINER, _ENVIRONMENT, _NAME, _BIND.
- "Environment Variable Precedence": image variables, then the default PATH (or its missing
  parts appended to the image's PATH), then PS1 and LD_LIBRARY_PATH, then
  <PREFIX>ENV_NAME / --env may override anything; "\\$VAR" in such a value is evaluated in the
  container ("Evaluating container variables") unless --no-eval is given; APPEND_PATH /
  PREPEND_PATH extend PATH ("Manipulating PATH").
- Between a <PREFIX>ENV_ variable and --env for the same name, --env wins (documented for
  apptainer since 3.6's --env option; an explicit flag beats the environment).

The double keeps host variables with the tool's own prefixes (<PREFIX>_*, <PREFIX>ENV_*) out of
the container: they configure the runtime, they are not meant for the command.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from .tools import Tool

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LIBS_DIR = "/.singularity.d/libs"
ENV_SCRIPT = "/.singularity.d/env/91-environment.sh"
ALWAYS_PASSED = tuple(
    name for base in ("http_proxy", "https_proxy", "no_proxy", "all_proxy", "ftp_proxy")
    for name in (base, base.upper())) + ("TERM",)
RESET_FROM_HOST = frozenset({"PATH", "LD_LIBRARY_PATH", "PS1", "PROMPT_COMMAND"})
_REFERENCE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


@dataclasses.dataclass(frozen=True)
class Request:
    cleanenv: bool
    image_env: Mapping[str, str]
    env_flag: Mapping[str, str]
    image_path: str
    home: str
    binds: tuple[str, ...]
    no_eval: bool = False  # --no-eval: values stay as written


def container_env(tool: Tool, host: Mapping[str, str], req: Request) -> dict[str, str]:
    env = _from_host(tool, host, req.cleanenv)
    env.update(req.image_env)
    env["PATH"] = _with_default_path(req.image_env.get("PATH"))
    env["HOME"] = req.home
    env["PS1"] = tool.prompt
    env.update(_runtime_vars(tool, req))
    libs = _apply_overrides(env, _overrides(tool, host, req.env_flag), req.no_eval)
    env["LD_LIBRARY_PATH"] = f"{libs}:{LIBS_DIR}" if libs else LIBS_DIR
    return env


def _from_host(tool: Tool, host: Mapping[str, str], cleanenv: bool) -> dict[str, str]:
    if cleanenv:
        env = {k: host[k] for k in ALWAYS_PASSED if k in host}
        env["LANG"] = "C"
        return env
    own = (tool.env_prefix, f"{tool.prefix}_")
    return {k: v for k, v in host.items()
            if k not in RESET_FROM_HOST and not k.startswith(own)}


def _with_default_path(image_path: str | None) -> str:
    if not image_path:
        return DEFAULT_PATH
    parts = image_path.split(":")
    missing = [p for p in DEFAULT_PATH.split(":") if p not in parts]
    return ":".join(parts + missing)


def _runtime_vars(tool: Tool, req: Request) -> dict[str, str]:
    out = {
        tool.var("COMMAND"): "exec",
        tool.var("CONTAINER"): req.image_path,
        tool.var("NAME"): req.image_path.rsplit("/", 1)[-1],
        tool.var("ENVIRONMENT"): ENV_SCRIPT,
    }
    if req.binds:
        out[tool.var("BIND")] = ",".join(req.binds)
    return out


def _overrides(tool: Tool, host: Mapping[str, str], env_flag: Mapping[str, str]
               ) -> dict[str, str]:
    out = {k[len(tool.env_prefix):]: v for k, v in host.items()
           if k.startswith(tool.env_prefix) and len(k) > len(tool.env_prefix)}
    out.update(env_flag)
    return out


def _apply_overrides(env: dict[str, str], overrides: Mapping[str, str],
                     no_eval: bool = False) -> str:
    """Set the overrides into env; return the LD_LIBRARY_PATH the image or they ask for (the
    runtime appends its own libs directory to it)."""
    before = dict(env)
    libs = env.pop("LD_LIBRARY_PATH", "")
    for name, raw in overrides.items():
        value = raw if no_eval else _evaluate(raw, before)
        if name == "APPEND_PATH":
            env["PATH"] = f"{env['PATH']}:{value}"
        elif name == "PREPEND_PATH":
            env["PATH"] = f"{value}:{env['PATH']}"
        elif name == "LD_LIBRARY_PATH":
            libs = value
        else:
            env[name] = value
    return libs


def _evaluate(value: str, env: Mapping[str, str]) -> str:
    return _REFERENCE.sub(lambda m: env.get(m.group(1) or m.group(2), ""), value)


# -------------------------------------------------------------------------------------------
# --env: pflag's stringToString flag.
# -------------------------------------------------------------------------------------------


def parse_env_flag(value: str) -> dict[str, str]:
    """One --env value as pflag's stringToString reads it: a value with a single "=" is one
    pair (commas included, surrounding double quotes trimmed); otherwise the value is one line
    of CSV (Go's encoding/csv: a field may be double-quoted to hold commas) of KEY=VALUE pairs.
    Raises ValueError with pflag's reason."""
    count = value.count("=")
    if count == 0:
        raise ValueError(f"{value} must be formatted as key=value")
    pairs = [value.strip('"')] if count == 1 else _csv_fields(value)
    out: dict[str, str] = {}
    for pair in pairs:
        key, has_eq, val = pair.partition("=")
        if not has_eq:
            raise ValueError(f"{pair} must be formatted as key=value")
        out[key] = val
    return out


def check_env_flag(value: str) -> None:
    parse_env_flag(value)


def _csv_fields(line: str) -> list[str]:
    """One CSV record with Go's strict quoting rules (no bare quote in an unquoted field)."""
    fields: list[str] = []
    i = 0
    while True:
        if line.startswith('"', i):
            field, i = _quoted_field(line, i)
        else:
            end = line.find(",", i)
            end = len(line) if end < 0 else end
            field = line[i:end]
            if '"' in field:
                col = i + field.index('"') + 1
                raise ValueError(f'parse error on line 1, column {col}: '
                                 f'bare " in non-quoted-field')
            i = end
        fields.append(field)
        if i >= len(line):
            return fields
        i += 1  # the comma


def _quoted_field(line: str, start: int) -> tuple[str, int]:
    out: list[str] = []
    i = start + 1
    while i < len(line):
        if line[i] != '"':
            out.append(line[i])
            i += 1
        elif line.startswith('""', i):
            out.append('"')
            i += 2
        elif i + 1 == len(line) or line[i + 1] == ",":
            return "".join(out), i + 1
        else:
            break
    raise ValueError(f'parse error on line 1, column {i + 1}: extraneous or missing " in '
                     f"quoted-field")
