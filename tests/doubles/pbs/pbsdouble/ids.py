"""Job identifiers: parsing operands and printing job ids."""

from __future__ import annotations

import re

# ---------------------------------------------------------------------------------------------
# Job identifiers: qstat.1B OPERANDS: <seq>[.<server>][@<server>], <seq>[], <seq>[<index>],
# <seq>[<start>-<end>].
# ---------------------------------------------------------------------------------------------
ID_RE = re.compile(r"^(\d+)(?:\[([^\]]*)\])?(?:\.([^@\s]+))?(?:@(\S+))?$")


class JobRef:
    def __init__(self, text: str, server: str) -> None:
        m = ID_RE.match(text)
        if not m:
            raise ValueError(text)
        self.seq = str(int(m.group(1)))
        self.bracket = m.group(2)  # None, "" (array), "3" (subjob) or "2-5[:z]" (range)
        if self.bracket not in (None, "") and not re.fullmatch(r"\d+(-\d+(:\d+)?)?",
                                                              self.bracket):
            raise ValueError(text)
        self.server_given = m.group(3)
        br = "" if self.bracket is None else f"[{self.bracket}]"
        # get_server() completes "12" to "12.<default server>" before printing errors.
        self.full = f"{m.group(1)}{br}.{server}"
        self.foreign = bool(self.server_given) and not (
            self.server_given == server or self.server_given.startswith(server + "."))

    @property
    def is_sub(self) -> bool:
        return self.bracket not in (None, "")

    def indices(self) -> list[int]:
        b = self.bracket or ""
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", b)
        if not m:
            return []
        a = int(m.group(1))
        z = int(m.group(2)) if m.group(2) else a
        return list(range(a, z + 1, int(m.group(3) or 1)))


def job_id(cfg: dict, job: dict, index: int | None = None) -> str:
    if job.get("array") is None:
        return f"{job['seq']}.{cfg['server']}"
    if index is None:
        return f"{job['seq']}[].{cfg['server']}"
    return f"{job['seq']}[{index}].{cfg['server']}"
