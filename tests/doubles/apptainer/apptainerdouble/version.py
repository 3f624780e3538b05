"""`version`: prints the bare version number.

apptainer's VersionCmd prints buildcfg.PACKAGE_VERSION alone ("1.3.4"); the root command's
`--version` prints the cobra version template, "apptainer version 1.3.4" (handled in
__init__.py).  SingularityCE behaves the same ("3.11.4" / "singularity-ce version 3.11.4").
"""

from __future__ import annotations

from collections.abc import Mapping

from .cli import Command, Parsed
from .tools import Tool

COMMAND = Command(name="version", use="version", flags=())


def describe(parsed: Parsed) -> dict[str, object]:
    return {}


def run(tool: Tool, parsed: Parsed, environ: Mapping[str, str]) -> int:
    print(tool.version)
    return 0
