"""``determined.util``: the helpers of it that trial scripts call."""

from __future__ import annotations

import json
from typing import Any

from hpcdet.rundir.atomic import dumps


def json_encode(obj: Any, indent: int | str | None = None, sort_keys: bool = False) -> str:
    """JSON as Determined encodes metrics: NaN and infinities as strings, numpy values and
    arrays as plain numbers and lists."""
    if indent is None and not sort_keys:
        return dumps(obj)
    return json.dumps(json.loads(dumps(obj)), indent=indent, sort_keys=sort_keys)
