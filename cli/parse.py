"""A command line parsed as the CLI parses it, without running it: for the commands that
``hpcdet.remote`` carries out in part on a laptop (a create uploads its context first)."""

from collections.abc import Sequence
from typing import Any, Optional

import typer.core
import typer.main
from typer._click import ClickException  # typer's own click, not a separate package


def parameters(words: int, argv: Sequence[str]) -> Optional[dict[str, Any]]:
    """The parameters of the command named by the first ``words`` of ``argv`` (aliases
    included), given the rest; None for a usage error, which that command would print."""
    from hpcdet.cli.main import app

    cmd: Any = typer.main.get_command(app)
    for word in argv[:words]:
        assert isinstance(cmd, typer.core.TyperGroup)
        cmd = cmd.get_command(typer.Context(cmd), word)
    try:
        ctx = cmd.make_context(" ".join(["hpcdet", *argv[:words]]), list(argv[words:]))
    except ClickException:
        return None
    return dict(ctx.params)
