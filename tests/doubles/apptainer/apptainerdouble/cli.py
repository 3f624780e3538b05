"""Command lines read the way Apptainer's cobra/pflag front end reads them.

Facts followed (man pages apptainer-exec(1), apptainer-pull(1), apptainer-inspect(1) for the
flags; pflag and cobra for the syntax):

- flags come before the operands and parsing stops at the first operand (apptainer registers
  every command with interspersed flags off), or after "--";
- "--name value", "--name=value", "-x value", "-xvalue", "-x=value", grouped boolean short
  flags ("-ec"); a boolean takes an optional "=true|false" (Go's strconv.ParseBool words);
- unknown flags and missing values are pflag's messages ("unknown flag: --xyz",
  "unknown shorthand flag: 'x' in -x", "flag needs an argument: --bind");
- operand counts are cobra's messages ("requires at least 2 arg(s), only received 1").

How apptainer reports these: its ExecuteApptainer (cmd/internal/cli/apptainer.go; SingularityCE
has the same code in singularity.go) prints `Error for command "exec": <error>`, then for a flag
error "Options for exec command:" and the flag list, for other errors the usage, then
"Run 'apptainer --help' for more detailed usage information.", and exits with status 1, not 255
(confirmed by a user report, ncbi/pgap issue 216: "unknown shorthand flag: 'v' in -v ...
returned non-zero exit status 1").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

TRUE_WORDS = frozenset({"1", "t", "T", "TRUE", "true", "True"})
FALSE_WORDS = frozenset({"0", "f", "F", "FALSE", "false", "False"})


@dataclasses.dataclass(frozen=True)
class Flag:
    name: str
    short: str = ""
    kind: str = ""  # "" for a boolean, else the value type pflag shows ("strings", "string")
    usage: str = ""
    check: Callable[[str], None] | None = None  # raises ValueError(pflag's reason)

    @property
    def boolean(self) -> bool:
        return not self.kind


@dataclasses.dataclass(frozen=True)
class Command:
    name: str
    use: str
    flags: tuple[Flag, ...]
    min_args: int = 0
    max_args: int | None = None

    def long(self, name: str) -> Flag | None:
        return next((f for f in self.flags if f.name == name), None)

    def short(self, letter: str) -> Flag | None:
        return next((f for f in self.flags if f.short and f.short == letter), None)


class UsageProblem(Exception):
    """A command-line mistake; `text` is everything the real tool prints for it."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class FlagError(Exception):
    pass


class ArgsError(Exception):
    pass


@dataclasses.dataclass
class Parsed:
    values: dict[str, list[str]]
    args: list[str]

    def is_set(self, name: str) -> bool:
        given = self.values.get(name)
        return given is not None and bool(given) and given[-1] in TRUE_WORDS

    def every(self, name: str) -> list[str]:
        return list(self.values.get(name, []))

    def last(self, name: str) -> str | None:
        given = self.values.get(name)
        return given[-1] if given else None


def parse(command: Command, argv: Sequence[str]) -> Parsed:
    """pflag with interspersed flags off, then cobra's operand count check."""
    values: dict[str, list[str]] = {}
    rest = list(argv)
    while rest:
        word = rest[0]
        if word == "--":
            rest.pop(0)
            break
        if not word.startswith("-") or word == "-":
            break
        rest.pop(0)
        if word.startswith("--"):
            _long(command, word[2:], rest, values)
        else:
            _shorts(command, word[1:], rest, values)
    _check_count(command, len(rest))
    return Parsed(values, rest)


def _long(command: Command, body: str, rest: list[str], values: dict[str, list[str]]) -> None:
    name, has_value, value = body.partition("=")
    flag = command.long(name)
    if flag is None:
        raise FlagError(f"unknown flag: --{name}")
    if not has_value:
        if flag.boolean:
            value = "true"
        elif rest:
            value = rest.pop(0)
        else:
            raise FlagError(f"flag needs an argument: --{name}")
    _store(flag, f"--{name}", value, values)


def _shorts(command: Command, letters: str, rest: list[str], values: dict[str, list[str]]) -> None:
    i = 0
    while i < len(letters):
        letter = letters[i]
        flag = command.short(letter)
        if flag is None:
            raise FlagError(f"unknown shorthand flag: {letter!r} in -{letters}")
        tail = letters[i + 1:]
        if tail.startswith("="):
            _store(flag, f"-{letter}", tail[1:], values)
            return
        if flag.boolean:
            _store(flag, f"-{letter}", "true", values)
            i += 1
            continue
        if tail:
            _store(flag, f"-{letter}", tail, values)
        elif rest:
            _store(flag, f"-{letter}", rest.pop(0), values)
        else:
            raise FlagError(f"flag needs an argument: {letter!r} in -{letters}")
        return


def _store(flag: Flag, spelled: str, value: str, values: dict[str, list[str]]) -> None:
    try:
        if flag.boolean and value not in TRUE_WORDS | FALSE_WORDS:
            raise ValueError(f'strconv.ParseBool: parsing "{value}": invalid syntax')
        if flag.check is not None:
            flag.check(value)
    except ValueError as e:
        raise FlagError(f'invalid argument "{value}" for "{spelled}" flag: {e}') from None
    values.setdefault(flag.name, []).append(value)


def _check_count(command: Command, n: int) -> None:
    low, high = command.min_args, command.max_args
    if high is None:
        if n < low:
            raise ArgsError(f"requires at least {low} arg(s), only received {n}")
    elif low == high and n != low:
        raise ArgsError(f"accepts {low} arg(s), received {n}")
    elif not low <= n <= high:
        raise ArgsError(f"accepts between {low} and {high} arg(s), received {n}")


# -------------------------------------------------------------------------------------------
# What the real tool prints for a command-line mistake.
# -------------------------------------------------------------------------------------------


def flag_problem(tool: str, command: Command, error: FlagError) -> UsageProblem:
    return UsageProblem(
        f'Error for command "{command.name}": {error}\n\n'
        f"Options for {command.name} command:\n\n{options_text(command)}\n"
        + _run_help(tool))


def args_problem(tool: str, command: Command, error: ArgsError) -> UsageProblem:
    return UsageProblem(
        f'Error for command "{command.name}": {error}\n\n{usage_text(tool, command)}\n'
        + _run_help(tool))


def unknown_command(tool: str, root: Command, word: str) -> UsageProblem:
    error = f'unknown command "{word}" for "{tool}"'
    return UsageProblem(
        f"Error: {error}\n\n"
        f'Error for command "{tool}": {error}\n\n{usage_text(tool, root)}\n'
        + _run_help(tool))


def no_command(tool: str, root: Command) -> UsageProblem:
    return UsageProblem(f"{usage_text(tool, root)}\n" + _run_help(tool))


def usage_text(tool: str, command: Command) -> str:
    use = f"{tool} [global options...]" if command.name == tool else (
        f"{tool} [global options...] {command.use}")
    return f"Usage:\n  {use}\n"


def options_text(command: Command) -> str:
    heads = [_flag_head(f) for f in command.flags]
    width = max((len(h) for h in heads), default=0)
    return "".join(f"{h.ljust(width)}   {f.usage}\n" for h, f in zip(heads, command.flags))


def _flag_head(flag: Flag) -> str:
    short = f"-{flag.short}, " if flag.short else "    "
    kind = f" {flag.kind}" if flag.kind else ""
    return f"  {short}--{flag.name}{kind}"


def _run_help(tool: str) -> str:
    return f"Run '{tool} --help' for more detailed usage information.\n"
