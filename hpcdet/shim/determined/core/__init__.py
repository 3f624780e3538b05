"""``determined.core``: hpcdet's Core API under Determined's name."""

from __future__ import annotations

from hpcdet.core import *  # noqa: F403  (this module mirrors hpcdet.core exactly)
from hpcdet.core import __all__ as __all__
from hpcdet.core import _dummy_init as _dummy_init
