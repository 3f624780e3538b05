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

Measured, Apptainer 1.4.5 on Debian, 2026-11-28 (root and an unprivileged user), and followed:
- with --cleanenv the command sees TERM, HOME, LANG=C, PATH, LD_LIBRARY_PATH=/.singularity.d/libs,
  PS1="Apptainer> ", PROMPT_COMMAND='PS1="Apptainer> "; unset PROMPT_COMMAND', PWD,
  APPTAINER_{APPNAME (empty), BIND, COMMAND, CONTAINER, ENVIRONMENT, NAME} and
  SINGULARITY_{BIND, CONTAINER, ENVIRONMENT, NAME}; with --no-eval also APPTAINER_NO_EVAL=1 and
  SINGULARITY_NO_EVAL=1.  <PREFIX>_BIND is the binds' container paths, comma-separated, empty
  when there are none.
- HOME is the passwd entry's home, or --home's DEST.  `--env HOME=x` and APPTAINERENV_HOME=x
  cannot change it: "WARNING: Overriding HOME environment variable with APPTAINERENV_HOME is not
  permitted" (SINGULARITYENV_HOME: the same with that name, after the INFO line below).
- apptainer also reads SINGULARITYENV_FOO: alone it sets FOO with "INFO:    Environment variable
  SINGULARITYENV_FOO is set, but APPTAINERENV_FOO is preferred"; beside an APPTAINERENV_FOO or
  `--env FOO=` of another value it loses, with "WARNING: SINGULARITYENV_FOO and APPTAINERENV_FOO
  have different values, using the latter" and "WARNING: Skipping environment variable
  [SINGULARITYENV_FOO=s], FOO is already overridden with different value [a]"; of the same
  value, silently.  Neither prefix's variables reach the command themselves.
- `--env FOO=a,b` is one variable; `--env FOO=1,B=2` two; `--env A=1,"B=x,y"` two (CSV quoting);
  `--env 'Y=k=v,z'` is a usage error ("z must be formatted as key=value", exit 1).
The `singularity` tool (SingularityCE, not measured here) reads only its own prefix.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from .messages import info, warning
from .tools import Tool

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LIBS_DIR = "/.singularity.d/libs"
ENV_SCRIPT = "/.singularity.d/env/91-environment.sh"
ALWAYS_PASSED = tuple(
    name for base in ("http_proxy", "https_proxy", "no_proxy", "all_proxy", "ftp_proxy")
    for name in (base, base.upper())) + ("TERM",)
RESET_FROM_HOST = frozenset({"PATH", "LD_LIBRARY_PATH", "PS1", "PROMPT_COMMAND"})
FIXED = frozenset({"HOME"})  # only --home sets it
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
    env["PROMPT_COMMAND"] = f'PS1="{tool.prompt}"; unset PROMPT_COMMAND'
    env.update(_runtime_vars(tool, req))
    libs = _apply_overrides(env, _overrides(tool, host, req.env_flag), req.no_eval)
    env["LD_LIBRARY_PATH"] = f"{libs}:{LIBS_DIR}" if libs else LIBS_DIR
    return env


def _from_host(tool: Tool, host: Mapping[str, str], cleanenv: bool) -> dict[str, str]:
    if cleanenv:
        env = {k: host[k] for k in ALWAYS_PASSED if k in host}
        env["LANG"] = "C"
        return env
    own = tuple(p for p in (tool.env_prefix, f"{tool.prefix}_", tool.legacy_env_prefix) if p)
    return {k: v for k, v in host.items()
            if k not in RESET_FROM_HOST and not k.startswith(own)}


def _with_default_path(image_path: str | None) -> str:
    if not image_path:
        return DEFAULT_PATH
    parts = image_path.split(":")
    missing = [p for p in DEFAULT_PATH.split(":") if p not in parts]
    return ":".join(parts + missing)


def _runtime_vars(tool: Tool, req: Request) -> dict[str, str]:
    shared = {
        "BIND": ",".join(req.binds),
        "CONTAINER": req.image_path,
        "NAME": req.image_path.rsplit("/", 1)[-1],
        "ENVIRONMENT": ENV_SCRIPT,
    }
    if req.no_eval:
        shared["NO_EVAL"] = "1"
    out = {tool.var("COMMAND"): "exec", tool.var("APPNAME"): ""}
    for prefix in filter(None, (tool.prefix, tool.legacy)):
        out.update({f"{prefix}_{k}": v for k, v in shared.items()})
    return out


def _overrides(tool: Tool, host: Mapping[str, str], env_flag: Mapping[str, str]
               ) -> dict[str, str]:
    own = _prefixed(host, tool.env_prefix)
    own.update(env_flag)
    legacy = _prefixed(host, tool.legacy_env_prefix) if tool.legacy else {}
    out: dict[str, str] = {}
    for name, value in legacy.items():
        legacy_name, own_name = f"{tool.legacy_env_prefix}{name}", f"{tool.env_prefix}{name}"
        if name not in own:
            info(f"Environment variable {legacy_name} is set, but {own_name} is preferred")
            out[name] = value
        elif own[name] != value:
            warning(f"{legacy_name} and {own_name} have different values, using the latter")
            warning(f"Skipping environment variable [{legacy_name}={value}], {name} is already "
                    f"overridden with different value [{own[name]}]")
    out.update(own)
    for name in sorted(FIXED & out.keys()):
        source = tool.env_prefix if name in own else tool.legacy_env_prefix
        warning(f"Overriding {name} environment variable with {source}{name} is not permitted")
        del out[name]
    return out


def _prefixed(host: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix):]: v for k, v in host.items()
            if k.startswith(prefix) and len(k) > len(prefix)}


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
