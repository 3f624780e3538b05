"""``determined.pytorch`` for trials run by hpcdet: ``hpcdet.pytorch`` under Determined's name."""

from hpcdet.pytorch import *  # noqa: F403  (this module mirrors hpcdet.pytorch exactly)
from hpcdet.pytorch import __all__ as __all__
