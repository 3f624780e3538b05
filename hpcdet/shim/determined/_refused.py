"""The module ``__getattr__`` of Determined's modules hpcdet does not offer: they import (every
module of the trial's tree does), and any name taken from them raises an ImportError that
says what to use instead."""

from __future__ import annotations

from typing import Callable, NoReturn


def refusing(message: str) -> Callable[[str], NoReturn]:
    def __getattr__(name: str) -> NoReturn:
        if name.startswith("__"):  # the import system's and tools' probes
            raise AttributeError(name)
        raise ImportError(message)

    return __getattr__
