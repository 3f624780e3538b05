"""The generator reproduces numpy's legacy RandomState(seed) draw for draw."""

from __future__ import annotations

import pytest

from hpcdet.search.rng import MT19937

# numpy: RandomState(42); [randint(0, 10) for _ in range(24)]
SEED_42_RANDINT_0_10 = [6, 3, 7, 4, 6, 9, 2, 6, 7, 4, 3, 7, 7, 2, 5, 4, 1, 7, 5, 1, 4, 0, 9, 5]
# numpy: RandomState(1); [uniform(0, 1) for _ in range(3)]
SEED_1_UNIFORM = [0.417022004702574, 0.7203244934421581, 0.00011437481734488664]


# numpy: RandomState(84); [randint(-10, 10) for _ in range(8)]
SEED_84_RANDINT_M10_10 = [0, 7, 4, 3, -10, 4, -9, 0]
# numpy: RandomState(999); [randint(0, 1 << 31) for _ in range(3)]
SEED_999_RANDINT_2_31 = [1303213504, 648491356, 118207333]
# numpy: RandomState(999); [randint(0, (1 << 60) - 10) for _ in range(3)] (64-bit draws)
SEED_999_RANDINT_2_60 = [985573361606668636, 507696633659605473, 1044297212768526561]


def test_known_numpy_outputs() -> None:
    rng = MT19937(42)
    assert [rng.intn(10) for _ in SEED_42_RANDINT_0_10] == SEED_42_RANDINT_0_10
    rng = MT19937(1)
    assert [rng.uniform(0.0, 1.0) for _ in SEED_1_UNIFORM] == SEED_1_UNIFORM
    rng = MT19937(84)
    assert [rng.randint(-10, 10) for _ in SEED_84_RANDINT_M10_10] == SEED_84_RANDINT_M10_10
    rng = MT19937(999)
    assert [rng.trial_seed() for _ in SEED_999_RANDINT_2_31] == SEED_999_RANDINT_2_31
    rng = MT19937(999)
    assert [rng.intn((1 << 60) - 10) for _ in range(3)] == SEED_999_RANDINT_2_60


def test_seed_is_taken_modulo_2_to_the_32() -> None:
    a, b = MT19937(7), MT19937(7 + 2**32)
    assert [a.next_uint32() for _ in range(5)] == [b.next_uint32() for _ in range(5)]


def test_bounded_edges() -> None:
    rng, ref = MT19937(3), MT19937(3)
    assert rng.bounded(0) == 0  # draws nothing
    assert rng.next_uint32() == ref.next_uint32()
    assert rng.bounded(0xFFFFFFFF) == ref.next_uint32()  # full 32-bit range: one draw, no mask
    with pytest.raises(ValueError):
        rng.intn(0)
    with pytest.raises(ValueError):
        rng.randint(5, 5)


def test_read_bytes_uses_one_draw_per_four_bytes() -> None:
    rng, ref = MT19937(11), MT19937(11)
    data = rng.read_bytes(16)
    words = [ref.next_uint32() for _ in range(4)]
    assert data == b"".join(w.to_bytes(4, "little") for w in words)
    assert rng.next_uint32() == ref.next_uint32()


def test_trial_seed_is_randint_0_2_to_the_31() -> None:
    rng, ref = MT19937(99), MT19937(99)
    assert [rng.trial_seed() for _ in range(50)] == [ref.randint(0, 2**31) for _ in range(50)]


# ---- against numpy itself (numpy is a test-only dependency) -----------------------------------

SEEDS = [0, 1, 42, 84, 999, 1234, 5678, 2**31 - 1, 2**32 - 1]


@pytest.fixture
def np_random() -> object:
    return pytest.importorskip("numpy").random


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("low", "high"), [
    (0, 10), (-10, 10), (0, 2**31), (-(2**31), 0), (-(2**31), 2**31), (0, 2**60 - 10),
    (-(2**62), 2**62), (0, 1), (3, 4), (0, 3), (0, 2**32), (0, 2**32 + 1),
])
def test_randint_matches_numpy(np_random: object, seed: int, low: int, high: int) -> None:
    reference = np_random.RandomState(seed)  # type: ignore[attr-defined]
    rng = MT19937(seed)
    expected = [int(reference.randint(low, high)) for _ in range(300)]
    assert [rng.randint(low, high) for _ in range(300)] == expected
    assert rng.random_double() == reference.random_sample()  # still in step afterwards


@pytest.mark.parametrize("seed", SEEDS)
def test_uniform_and_random_sample_match_numpy(np_random: object, seed: int) -> None:
    reference = np_random.RandomState(seed)  # type: ignore[attr-defined]
    rng = MT19937(seed)
    for low, high in [(0.0, 1.0), (-1.0, 0.0), (-4.0, -1.0), (1e-3, 2.5)]:
        assert [rng.uniform(low, high) for _ in range(200)] == [
            reference.uniform(low, high) for _ in range(200)]
    assert [rng.random_double() for _ in range(700)] == list(reference.random_sample(700))


def test_interleaved_draws_match_numpy(np_random: object) -> None:
    """The mix a searcher makes: ints, floats, categorical picks and trial seeds in turn."""
    reference = np_random.RandomState(2024)  # type: ignore[attr-defined]
    rng = MT19937(2024)
    for i in range(1000):
        n = 1 + i % 17
        assert rng.intn(n) == reference.randint(0, n)
        assert rng.uniform(-3.0, 2.0) == reference.uniform(-3.0, 2.0)
        assert rng.trial_seed() == reference.randint(0, 2**31)
