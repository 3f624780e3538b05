"""Which commands run where, and the login node's command line for those that go there.

With a cluster chosen, every command runs on the cluster's login node as ``<hpcdet> <argv>``,
every argument quoted for its shell, except those that are the laptop's own: the cluster
profiles, the version, the help of either, and running a script off the cluster here
(``local-run``, ``shim-path``).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

# `cluster show` is not here: it tells what the chosen cluster's scheduler says.
LAPTOP_CLUSTER_COMMANDS = frozenset({"add", "use", "remove", "list", "trust"})
HELP = frozenset({"--help", "-h"})
# Commands about this machine; local-run's words after it are the user's command's, `-c` too.
LAPTOP_COMMANDS = frozenset({"local-run", "shim-path"})


def split_cluster(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """``-c NAME``, ``-cNAME``, ``--cluster NAME`` or ``--cluster=NAME`` taken out of ``argv``
    (before a ``--`` or the command of `local-run` or `cmd run`; the last one wins), and the
    rest in order."""
    name: str | None = None
    rest: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        # What follows `local-run` or `cmd run` is the user's command, its -c its own.
        if arg == "--" or (arg == "local-run" and not rest) or (arg == "run" and rest == ["cmd"]):
            rest.extend(args[i:])
            break
        if arg in ("-c", "--cluster"):
            if i + 1 >= len(args):
                from hpcdet.errors import UsageError

                raise UsageError(f"{arg} needs a cluster's name: `hpcdet {arg} NAME COMMAND`")
            name = args[i + 1]
            i += 2
            continue
        if arg.startswith("--cluster="):
            name = arg.split("=", 1)[1]
        elif arg.startswith("-c") and not arg.startswith("--") and len(arg) > 2:
            name = arg[2:]
        else:
            rest.append(arg)
        i += 1
    return name, rest


def _words(argv: Sequence[str]) -> list[str]:
    return [a for a in argv if a != "--"]


def runs_on_laptop(argv: Sequence[str]) -> bool:
    """Whether ``argv`` (without ``-c``) is a command of the laptop's own."""
    words = _words(argv)
    if not words or words[0] in ("--version", "-v", "version") or words[0] in HELP:
        return True
    if words[0] in LAPTOP_COMMANDS:
        return True
    return words[0] == "cluster" and (len(words) == 1 or words[1] in HELP
                                      or words[1] in LAPTOP_CLUSTER_COMMANDS)


def hpcdet_words(command: str) -> str:
    """The profile's hpcdet command for the login node's shell: its words quoted, a leading
    ``~/`` kept as the remote ``$HOME``."""
    out = []
    for word in shlex.split(command):
        if word == "~":
            out.append('"$HOME"')
        elif word.startswith("~/"):
            out.append('"$HOME"/' + shlex.quote(word[2:]))
        else:
            out.append(shlex.quote(word))
    return " ".join(out)


def remote_command(command: str, argv: Sequence[str]) -> str:
    """``<hpcdet> <argv>`` as one line for the login node's shell, each argument quoted."""
    return " ".join([hpcdet_words(command), *(shlex.quote(a) for a in argv)])


def command_of(argv: Sequence[str]) -> list[str]:
    """The command's words before its first option (``["e", "create"]``), for the hooks."""
    words = []
    for a in argv:
        if a.startswith("-"):
            break
        words.append(a)
    return words[:2]


# Determined's one-letter aliases of the groups.
_GROUPS = {"e": "experiment", "t": "trial", "c": "checkpoint"}
# The commands that carry the laptop's files: a create's context goes up first.
UPLOADS = (("experiment", "create"), ("submit",))


def _named(words: Sequence[str]) -> tuple[str, ...]:
    return tuple(_GROUPS.get(w, w) if i == 0 else w for i, w in enumerate(words))


def uploads(argv: Sequence[str]) -> tuple[str, ...] | None:
    """The upload command ``argv`` begins with (``("experiment", "create")``,
    ``("submit",)``), in full names; None for any other."""
    for command in UPLOADS:
        if _named(argv[:len(command)]) == command:
            return command
    return None


def is_download(argv: Sequence[str]) -> bool:
    """``checkpoint download``, ``trial download``, ``experiment download`` or ``model
    download``: the files come to the laptop."""
    return len(argv) >= 2 and argv[1] == "download" and _named(argv[:1])[0] in (
        *_GROUPS.values(), "model")


def output_only_grows(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is a command whose output, run again, begins with what it printed
    before (a trial's or an experiment's logs): one that may resume after a cut."""
    words = command_of(argv)
    return (len(words) == 2 and words[1] == "logs"
            and _named(words[:1])[0] in ("experiment", "trial"))
