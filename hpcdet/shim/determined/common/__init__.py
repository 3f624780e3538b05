"""``determined.common``: the few names of it that trial scripts import (``util``)."""

from __future__ import annotations

from . import util

__all__ = ["util"]
