"""Sampling one point of a hyperparameter space (Determined's types)."""

from __future__ import annotations

import random
from typing import Any


def sample(space: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """One value per hyperparameter, keys in sorted order as Determined iterates them."""
    return {key: _sample_one(space[key], rng) for key in sorted(space)}


def _sample_one(hp: Any, rng: random.Random) -> Any:
    if not isinstance(hp, dict):
        return hp
    kind = hp.get("type")
    if kind is None:
        return sample(hp, rng)
    if kind == "const":
        return hp["val"]
    if kind == "int":
        return rng.randint(int(hp["minval"]), int(hp["maxval"]))
    if kind == "double":
        return rng.uniform(float(hp["minval"]), float(hp["maxval"]))
    if kind == "log":
        return float(hp["base"]) ** rng.uniform(float(hp["minval"]), float(hp["maxval"]))
    if kind == "categorical":
        return rng.choice(list(hp["vals"]))
    raise ValueError(f"unknown hyperparameter type {kind!r}")
