"""What every benchmark reports: figures, each with the baseline measured in the same run,
their ratio and the target, and the table and RESULTS.md made of them."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    bench: str  # which benchmark (its module's name)
    what: str  # what was measured
    value: float
    unit: str
    baseline: str = ""  # what it is compared with, measured in the same run
    baseline_value: float | None = None
    target: str = ""  # the target, in words
    met: bool | None = None  # None: no target, or not judged by a number
    note: str = ""  # for a missed target: the cause found, or the next suspect

    @property
    def ratio(self) -> float | None:
        if self.baseline_value in (None, 0):
            return None
        assert self.baseline_value is not None
        return self.value / self.baseline_value


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def p99(xs: Sequence[float]) -> float:
    return statistics.quantiles(xs, n=100)[98] if len(xs) > 1 else xs[0]


def repeat(n: int, measure: Callable[[], float]) -> list[float]:
    return [measure() for _ in range(n)]


def _number(x: float | None) -> str:
    if x is None:
        return ""
    if x == 0 or 0.01 <= abs(x) < 100_000:
        return f"{x:.3g}" if abs(x) < 100 else f"{x:,.0f}"
    return f"{x:.3g}"


def rows(figures: Sequence[Figure]) -> list[list[str]]:
    out = []
    for f in figures:
        ratio = f.ratio
        out.append([
            f.bench, f.what, f"{_number(f.value)} {f.unit}".strip(), f.baseline,
            f"{_number(f.baseline_value)} {f.unit}".strip() if f.baseline_value is not None
            else "", f"{ratio:.2f}x" if ratio is not None else "", f.target,
            {True: "met", False: "MISSED", None: ""}[f.met],
        ])
    return out


HEADER = ["bench", "measured", "value", "baseline", "baseline value", "ratio", "target",
          "verdict"]


def table(figures: Sequence[Figure]) -> str:
    """A plain-text table for the terminal."""
    body = [HEADER, *rows(figures)]
    widths = [max(len(r[i]) for r in body) for i in range(len(HEADER))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in body)


def markdown(figures: Sequence[Figure]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows(figures)]
    missed = [f for f in figures if f.met is False]
    if missed:
        lines += ["", "Missed targets:", ""]
        lines += [f"- **{f.bench}: {f.what}** ({f.target}): {f.note or 'cause not found yet'}"
                  for f in missed]
    remarks = [f for f in figures if f.met is not False and f.note]
    if remarks:
        lines += ["", "Other findings:", ""]
        lines += [f"- **{f.bench}: {f.what}**: {f.note}" for f in remarks]
    return "\n".join(lines)
