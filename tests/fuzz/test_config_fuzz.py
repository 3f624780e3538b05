"""Property tests over experiment configs (issue 9): whatever the YAML holds, loading it raises
nothing but hpcdet's own errors, and every config that loads builds its searcher and its first
plan, as the daemon does with a new experiment.

Configs are trees built from the schema's own keys with plausible and hostile values (wrong
types, huge and non-finite numbers, unicode and control characters, nested garbage). The runs
are derandomized, so CI sees the same examples every time (``HPCDET_FUZZ=deep`` runs many more,
randomly); examples found here are kept as plain tests in ``test_found.py``.
"""

from __future__ import annotations

import os
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcdet.config import ExperimentConfig, load_experiment_config
from hpcdet.config.experiment import TOP_SPECS
from hpcdet.config.searcher import SEARCHERS
from hpcdet.errors import HpcdetError
from hpcdet.search import EXIT_COMPLETED, Create, Initialize, Searcher, TrialExited

_BASE = settings(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
# CI runs the same examples every time, in about 20 s; HPCDET_FUZZ=deep searches further.
_PROFILES = {
    "ci": settings(_BASE, max_examples=150, derandomize=True),
    "deep": settings(_BASE, max_examples=3000),
}
FUZZ = _PROFILES[os.environ.get("HPCDET_FUZZ", "ci")]

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_edge_ints = st.sampled_from([
    0, 1, -1, 2, 3, 16, 32, 33, 100_000, 100_001, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63),
    -(2**63) - 1, 10**30, -(10**30),
])
_edge_floats = st.sampled_from([
    0.0, -0.0, 0.5, 1.0, 1.0000001, 4.0, 1e6, 1e300, 1e308, -1e308, 5e-324,
    float("inf"), float("-inf"), float("nan"),
])
_scalars = st.one_of(
    st.none(), st.booleans(), _edge_ints, st.integers(), _edge_floats,
    st.floats(allow_nan=True, allow_infinity=True), _text,
    st.sampled_from(["", " ", "\n", "\x1b[31m", "$(id)", "[/oops]", "1:30:00", "1e-5", "0x10"]),
)
_garbage = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(_text, st.sampled_from(list(TOP_SPECS))), inner, max_size=4),
    ),
    max_leaves=12,
)


def _maybe(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value, sometimes garbage."""
    return st.one_of(value, value, value, _garbage)


_counts = st.one_of(st.integers(1, 5), _edge_ints)
_hparam = st.one_of(
    st.fixed_dictionaries({"type": st.just("const"), "val": _garbage}),
    st.fixed_dictionaries({
        "type": st.sampled_from(["int", "double", "log"]),
        "minval": _maybe(st.one_of(st.integers(-400, 400), _edge_ints, _edge_floats)),
        "maxval": _maybe(st.one_of(st.integers(-400, 2000), _edge_ints, _edge_floats)),
    }, optional={
        "base": _maybe(st.one_of(st.sampled_from([10, 2, 0.5, 1, 1e-300]), _edge_floats)),
        "count": _maybe(_counts),
    }),
    st.fixed_dictionaries({"type": st.just("categorical"),
                           "vals": _maybe(st.lists(_scalars, min_size=1, max_size=4))}),
    _garbage,
)
_hparams = st.recursive(
    st.dictionaries(_text, _hparam, max_size=3),
    lambda inner: st.dictionaries(_text, st.one_of(_hparam, inner), max_size=3),
    max_leaves=6,
)
_length = st.one_of(
    _edge_ints, st.integers(0, 1000),
    st.dictionaries(st.sampled_from(["batches", "records", "epochs", "bogus"]),
                    st.one_of(_edge_ints, st.integers(0, 50)), min_size=1, max_size=2),
)
_searcher = st.fixed_dictionaries({
    "name": _maybe(st.sampled_from([*SEARCHERS, "pbt", "adaptive"])),
    "metric": _maybe(st.just("loss")),
}, optional={
    "max_trials": _maybe(st.one_of(st.integers(1, 64), _edge_ints)),
    "max_concurrent_trials": _maybe(st.one_of(st.integers(0, 8), _edge_ints)),
    "max_length": _maybe(_length),
    "time_metric": _maybe(st.just("batches")),
    "max_time": _maybe(st.one_of(st.integers(0, 1000), _edge_ints)),
    "mode": _maybe(st.sampled_from(["standard", "aggressive", "conservative"])),
    "divisor": _maybe(st.one_of(_edge_floats, _edge_ints, st.floats(1, 10))),
    "max_rungs": _maybe(st.one_of(st.integers(0, 40), _edge_ints)),
    "bracket_rungs": _maybe(st.lists(st.one_of(st.integers(0, 40), _edge_ints), max_size=4)),
    "stop_once": _maybe(st.booleans()),
    "smaller_is_better": _maybe(st.booleans()),
    "source_trial_id": _maybe(_edge_ints),
})
_hpc = st.dictionaries(
    st.sampled_from(["walltime", "partition", "account", "qos", "gpu_type", "slots_per_node",
                     "sbatch_args", "queue", "pbs_args", "bogus"]),
    st.one_of(_garbage, st.sampled_from(["1:00:00", "99999999999", "2h", "1-00:00:00"])),
    max_size=3,
)
_config = st.fixed_dictionaries({
    "entrypoint": _maybe(st.just("python3 train.py")),
    "searcher": _maybe(_searcher),
}, optional={
    "name": _maybe(_text),
    "hyperparameters": _maybe(_hparams),
    "resources": _maybe(st.dictionaries(
        st.sampled_from(["slots_per_trial", "priority", "weight", "max_slots", "shm_size"]),
        st.one_of(_edge_ints, _edge_floats, _text), max_size=3)),
    "max_restarts": _maybe(_edge_ints),
    "reproducibility": _maybe(st.fixed_dictionaries({"experiment_seed": _edge_ints})),
    "min_validation_period": _maybe(_length),
    "environment": _maybe(st.dictionaries(
        st.sampled_from(["image", "environment_variables", "ports"]), _garbage, max_size=2)),
    "bind_mounts": _maybe(st.lists(st.dictionaries(
        st.sampled_from(["host_path", "container_path", "read_only"]), _garbage), max_size=2)),
    "checkpoint_storage": _maybe(st.dictionaries(
        st.sampled_from(["type", "host_path", "storage_path", "save_trial_best"]), _garbage)),
    "slurm": _maybe(_hpc),
    "pbs": _maybe(_hpc),
    "data": _garbage,
    "preemption_timeout": _maybe(_edge_ints),
    "records_per_epoch": _maybe(_edge_ints),
    "scheduling_unit": _maybe(_edge_ints),
})
# A hexadecimal literal reads as an integer of ~6000 digits, which Python cannot even print.
HUGE_HEX = "0x" + "f" * 5000
_overrides = st.lists(
    st.builds(
        lambda key, value: f"{key}={value}",
        st.sampled_from(["searcher.max_trials", "searcher.divisor", "searcher.max_length",
                         "hyperparameters.x", "resources.slots_per_trial", "data", "a..b", ""]),
        st.one_of(_text, st.sampled_from(["1e23", ".nan", "[&a [1], *a]", "{", "0", HUGE_HEX])),
    ),
    max_size=2,
)


# Near-valid configs: every field in or at the edge of its range, so most of them load and the
# searchers' arithmetic is exercised at the bounds validation lets through.
_near_hparam = st.one_of(
    st.builds(lambda lo, span, count: {"type": "int", "minval": lo, "maxval": lo + span,
                                       "count": count},
              st.one_of(st.integers(-5, 5), st.sampled_from([-(2**63), 2**63 - 2])),
              st.integers(1, 2**63), st.integers(1, 100_000)),
    st.builds(lambda lo, span, count: {"type": "double", "minval": lo, "maxval": lo + span,
                                       "count": count},
              st.floats(-1e300, 1e300), st.floats(1e-300, 1e300), st.integers(1, 100_000)),
    st.builds(lambda base, lo, span, count: {"type": "log", "base": base, "minval": lo,
                                             "maxval": lo + span, "count": count},
              st.sampled_from([10, 2, 0.5, 1, 1e-300, 1e300, 1.0000001]),
              st.floats(-700, 700), st.floats(1e-9, 700), st.integers(1, 100_000)),
    st.builds(lambda vals: {"type": "categorical", "vals": vals},
              st.lists(_scalars, min_size=1, max_size=100)),
    _scalars,
)
_near_searcher = st.fixed_dictionaries({
    "name": st.sampled_from(SEARCHERS),
    "metric": st.just("loss"),
    "max_trials": st.one_of(st.integers(1, 40), st.sampled_from([100_000, 99_999])),
}, optional={
    "max_concurrent_trials": st.one_of(st.integers(0, 8), st.just(100_000)),
    "max_length": st.one_of(st.integers(0, 10**6), st.sampled_from([2**63 - 1]),
                            st.builds(lambda n: {"epochs": n}, st.integers(1, 2**63 - 1))),
    "time_metric": st.just("batches"),
    "max_time": st.one_of(st.integers(1, 10**6), st.just(2**63 - 1)),
    "mode": st.sampled_from(["standard", "aggressive", "conservative"]),
    "divisor": st.one_of(st.floats(1.0000001, 1e6), st.sampled_from([1.0000001, 2, 1e6])),
    "max_rungs": st.integers(1, 32),
    "bracket_rungs": st.lists(st.integers(1, 32), max_size=32),
    "stop_once": st.booleans(),
})


@st.composite
def _near_config(draw: st.DrawFn) -> dict[str, Any]:
    searcher = draw(_near_searcher)
    if searcher["name"] == "grid":
        searcher.pop("max_trials")
    if searcher["name"] == "single":
        searcher = {"name": "single", "metric": "loss",
                    **({"max_length": searcher["max_length"]} if "max_length" in searcher else {})}
    if searcher["name"] == "adaptive_asha" and "max_time" not in searcher:
        searcher.setdefault("max_length", 1000)
    if "max_time" in searcher:
        searcher["time_metric"] = "batches"
    return {
        "entrypoint": "python3 train.py",
        "searcher": searcher,
        "hyperparameters": draw(st.dictionaries(_text, _near_hparam, max_size=4)),
        "reproducibility": {"experiment_seed": draw(st.integers(0, 2**63 - 1))},
    }


def first_plan(cfg: ExperimentConfig) -> None:
    """What the daemon does with an accepted config: store it, rebuild it, build the searcher,
    take its first decisions, and see one trial end."""
    again = ExperimentConfig.from_dict(cfg.to_dict())
    searcher = Searcher(again.searcher, again.hyperparameters, again.experiment_seed)
    actions = searcher.feed(Initialize())
    searcher.trial_count_bound()
    searcher.concurrency()
    searcher.progress()
    created = [a for a in actions if isinstance(a, Create)]
    assert created, actions
    searcher.feed(TrialExited(created[0].request_id, EXIT_COMPLETED))


def check(text: str, overrides: list[str]) -> None:
    try:
        cfg = load_experiment_config(text, overrides)
    except HpcdetError:
        return
    first_plan(cfg)


@FUZZ
@given(_config, _overrides)
def test_any_config_tree_loads_or_fails_with_an_hpcdet_error(
    config: dict[str, Any], overrides: list[str]
) -> None:
    check(yaml.safe_dump(config, allow_unicode=True) + "\n", overrides)


@FUZZ
@given(_near_config())
def test_near_valid_configs_build_their_first_plan(config: dict[str, Any]) -> None:
    check(yaml.safe_dump(config, allow_unicode=True) + "\n", [])


@FUZZ
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_any_text_loads_or_fails_with_an_hpcdet_error(text: str) -> None:
    check("entrypoint: x\n" + text, [])


@FUZZ
@given(_config, st.sampled_from(["", "&a ", "!!binary ", "!!python/object:os.system ", "? "]),
       st.sampled_from(["\n", "\n  - *a\n", "\n<<: *a\n", "\n---\n", "\t\n"]))
def test_hostile_yaml_around_a_config_fails_with_an_hpcdet_error(
    config: dict[str, Any], prefix: str, suffix: str
) -> None:
    check(prefix + yaml.safe_dump(config, allow_unicode=True, default_flow_style=True) + suffix, [])
