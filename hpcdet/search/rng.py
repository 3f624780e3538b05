"""A numpy-compatible Mersenne Twister: the searchers' only source of randomness.

Determined's master draws hyperparameters and trial seeds from a Go re-implementation of
numpy's legacy ``RandomState`` seeded with ``reproducibility.experiment_seed``. This module is
hpcdet's own implementation of the same generator, so an experiment seed gives the same draws:

* seeding: ``init_genrand`` with the seed taken modulo 2**32 (Go converts it to ``uint32``);
* ``random_double``: 53 bits from two 32-bit draws, ``((a >> 5) * 2**26 + (b >> 6)) / 2**53``;
* bounded integers: numpy's legacy masked rejection, 32-bit draws when the range fits in 32
  bits, else 64-bit draws made of two 32-bit draws (high word first).

The generator's state is never saved: the searcher rebuilds it by replaying its events.
"""

from __future__ import annotations

_N = 624
_M = 397
_MATRIX_A = 0x9908B0DF
_UPPER = 0x80000000
_LOWER = 0x7FFFFFFF
_MASK32 = 0xFFFFFFFF


class MT19937:
    """MT19937 with numpy ``RandomState(seed)``'s draws (see the module docstring)."""

    __slots__ = ("_key", "_pos")

    def __init__(self, seed: int) -> None:
        value = seed & _MASK32
        key = [0] * _N
        for i in range(_N):
            key[i] = value
            value = (1812433253 * (value ^ (value >> 30)) + i + 1) & _MASK32
        self._key = key
        self._pos = _N

    def _refill(self) -> None:
        key = self._key
        for i in range(_N):
            # Indices wrap, so the last M words mix with words already regenerated this round,
            # exactly as the reference three-loop form does.
            y = (key[i] & _UPPER) | (key[(i + 1) % _N] & _LOWER)
            key[i] = key[(i + _M) % _N] ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)
        self._pos = 0

    def next_uint32(self) -> int:
        if self._pos == _N:
            self._refill()
        y = self._key[self._pos]
        self._pos += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        y ^= y >> 18
        return y & _MASK32

    def next_uint64(self) -> int:
        high = self.next_uint32()
        return (high << 32) | self.next_uint32()

    def random_double(self) -> float:
        """A float in [0, 1) (numpy ``random_sample``)."""
        a = self.next_uint32() >> 5
        b = self.next_uint32() >> 6
        return (a * 67108864.0 + b) / 9007199254740992.0

    def bounded(self, limit: int) -> int:
        """An integer in [0, limit] by masked rejection; ``limit == 0`` draws nothing."""
        if limit < 0:
            raise ValueError(f"bounded() needs limit >= 0, got {limit}")
        if limit == 0:
            return 0
        mask = (1 << limit.bit_length()) - 1
        draw = self.next_uint32 if limit <= _MASK32 else self.next_uint64
        while True:
            value = draw() & mask
            if value <= limit:
                return value

    def intn(self, n: int) -> int:
        """An integer in [0, n) (Go ``nprand`` ``Intn``/``Int64n``)."""
        if n <= 0:
            raise ValueError(f"intn() needs n >= 1, got {n}")
        return self.bounded(n - 1)

    def randint(self, low: int, high: int) -> int:
        """An integer in [low, high) (numpy ``randint(low, high)``)."""
        if high <= low:
            raise ValueError(f"randint() needs low < high, got [{low}, {high})")
        return low + self.bounded(high - low - 1)

    def uniform(self, low: float, high: float) -> float:
        """A float in [low, high) (numpy ``uniform``)."""
        return low + (high - low) * self.random_double()

    def read_bytes(self, count: int) -> bytes:
        """``count`` bytes, each 32-bit draw giving up to four, least significant first."""
        out = bytearray()
        while len(out) < count:
            out += self.next_uint32().to_bytes(4, "little")
        return bytes(out[:count])

    def trial_seed(self) -> int:
        """A trial seed: Determined's ``rand.Int64n(1 << 31)``."""
        return self.intn(1 << 31)
