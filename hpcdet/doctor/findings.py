"""A finding of `hpcdet doctor`: one check, what it saw and, unless all is well, what to
change."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Any


class Status(str, enum.Enum):
    OK = "ok"
    WARN = "warn"  # works, but not as well as it could, or not everywhere
    FAIL = "fail"  # hpcdet's experiments will not work until it is changed
    SKIPPED = "skipped"  # not checked; ``seen`` says why


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    seen: str
    change: str = ""  # what to change; "" when nothing needs to

    def as_json(self) -> dict[str, Any]:
        found = asdict(self)
        found["status"] = self.status.value
        return found


def failed(findings: list[Finding]) -> bool:
    return any(f.status is Status.FAIL for f in findings)


__all__ = ["Finding", "Status", "failed"]
