"""apptainerdouble: a test DOUBLE of the `apptainer` and `singularity` container runtimes.

This is not Apptainer.  The real Apptainer 1.4.5 runs in the test suite (scripts/
container-runtimes.sh; tests/integration/test_runtimes.py, tests/cluster/test_runtimes.py);
this double stays for what it cannot stage here, having no registry: pulls that succeed, fail
or are shared by many jobs.  It is two real executables (bin/apptainer, bin/singularity) that
accept exactly the subset of the command line hpcdet uses: `version`, `--version`, `pull`,
`inspect` and `exec`.  Images come from a directory of JSON files instead of a registry
(registry.py), a "SIF" is a two-line text file (sif.py), and `exec` runs the command on the host
in a private mount namespace that shows only what a container would (fsview.py).

`exec` follows what Apptainer 1.4.5 was measured to do (Debian, 2026-11-28, as root and as an
unprivileged user); `pull` and `inspect` follow the apptainer.org user documentation and man
pages (apptainer-pull(1), apptainer-inspect(1)); each module names what it follows, and
../README.md lists what the double does not do.  The code is our own; nothing is copied from
Apptainer or SingularityCE.  Only the standard library and util-linux's unshare and mount are
used (Python 3.9+).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence

from . import execute, inspection, invocations, pull, version
from .cli import (
    ArgsError,
    Command,
    Flag,
    FlagError,
    Parsed,
    UsageProblem,
    args_problem,
    flag_problem,
    no_command,
    parse,
    unknown_command,
)
from .messages import FATAL_EXIT, USAGE_EXIT, Fatal, fatal
from .tools import TOOLS, Tool

Describe = Callable[[Parsed], "dict[str, object]"]
Run = Callable[[Tool, Parsed, Mapping[str, str]], int]

SUBCOMMANDS: dict[str, tuple[Command, Describe, Run]] = {
    module.COMMAND.name: (module.COMMAND, module.describe, module.run)
    for module in (execute, inspection, pull, version)
}

__all__ = ["main"]


def main(tool_name: str, argv: Sequence[str]) -> int:
    """Run one invocation of `tool_name` ("apptainer" or "singularity")."""
    tool = TOOLS[tool_name]
    environ = dict(os.environ)
    try:
        return _dispatch(tool, list(argv), environ)
    except UsageProblem as problem:
        sys.stderr.write(problem.text)
        return USAGE_EXIT
    except Fatal as e:
        fatal(str(e))
        return FATAL_EXIT


def _dispatch(tool: Tool, argv: list[str], environ: Mapping[str, str]) -> int:
    root = Command(tool.name, "", (Flag("version", usage=f"version for {tool.name}"),))
    try:
        top = parse(root, argv)
    except FlagError as e:
        invocations.record(tool.name, argv, "", {}, environ)
        raise flag_problem(tool.name, root, e) from None
    if top.is_set("version"):
        invocations.record(tool.name, argv, "version", {}, environ)
        print(tool.version_line)
        return 0
    if not top.args:
        invocations.record(tool.name, argv, "", {}, environ)
        raise no_command(tool.name, root)
    word, rest = top.args[0], top.args[1:]
    if word not in SUBCOMMANDS:
        invocations.record(tool.name, argv, word, {}, environ)
        raise unknown_command(tool.name, root, word)
    command, describe, run = SUBCOMMANDS[word]
    try:
        parsed = parse(command, rest)
    except (FlagError, ArgsError) as e:
        invocations.record(tool.name, argv, word, {}, environ)
        if isinstance(e, FlagError):
            raise flag_problem(tool.name, command, e) from None
        raise args_problem(tool.name, command, e) from None
    invocations.record(tool.name, argv, word, describe(parsed), environ)
    return run(tool, parsed, environ)
