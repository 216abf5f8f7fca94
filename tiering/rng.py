"""Counter-based random numbers for parallel numba kernels.

Every random draw in tierbench's parallel kernels is a pure function of
``(seed, stream, counter)``: a SplitMix64 hash (Steele, Lea and Flood,
OOPSLA 2014) of the three, turned into a uniform double.  Nothing depends on
which thread handles which item, so a kernel run with ``prange`` gives
bit-identical output on 1 or 16 threads.  This is what lets the synthetic
generators (suite/datasets) and the samplers be deterministic for a seed
while running in parallel; numba's own ``np.random`` keeps one state per
thread and cannot promise that.

SplitMix64 passes BigCrush used this way (one hash per counter); it is not a
cryptographic generator and is not meant to be.
"""

import math

import numba
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)
_TWO_POW_MINUS_53 = 1.0 / 9007199254740992.0


@numba.njit(inline="always")
def splitmix64(x):
    """One SplitMix64 step of ``x`` (uint64 in, uint64 out, wrapping)."""
    z = np.uint64(x) + _GOLDEN
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


@numba.njit(inline="always")
def hash3(seed, stream, counter):
    """A 64-bit hash of three non-negative integers."""
    h = splitmix64(np.uint64(seed))
    h = splitmix64(h ^ np.uint64(stream))
    return splitmix64(h ^ np.uint64(counter))


@numba.njit(inline="always")
def uniform(seed, stream, counter):
    """A double in [0, 1) with 53 random bits."""
    return np.float64(hash3(seed, stream, counter) >> _S11) * _TWO_POW_MINUS_53


@numba.njit(inline="always")
def normal(seed, stream, counter):
    """A standard normal draw (Box-Muller on two counter-based uniforms)."""
    u1 = uniform(seed, stream, np.uint64(2) * np.uint64(counter))
    u2 = uniform(seed, stream, np.uint64(2) * np.uint64(counter) + np.uint64(1))
    return math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)


# The same hash on torch tensors (any device), for the torch sampling backend.  torch has no
# unsigned 64-bit arithmetic on every device, so the bits live in int64: addition and
# multiplication wrap identically in two's complement, and a logical right shift is an
# arithmetic one with the sign-extended bits masked off.


def _signed(value: np.uint64) -> int:
    return int(value) - (1 << 64) if int(value) >= 1 << 63 else int(value)


def _shift_right(x, bits: int):
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def _splitmix64_tensor(x):
    z = x + _signed(_GOLDEN)
    z = (z ^ _shift_right(z, 30)) * _signed(_MIX1)
    z = (z ^ _shift_right(z, 27)) * _signed(_MIX2)
    return z ^ _shift_right(z, 31)


def stream_hashes(seed: int, streams):
    """The per-stream half of ``hash3(seed, stream, counter)`` for an int64 tensor of streams."""
    first = _signed(splitmix64(np.uint64(seed)))
    return _splitmix64_tensor(streams.long() ^ first)


def uniform_from_hashes(hashes, counter):
    """``uniform(seed, stream, counter)`` for every stream, from ``stream_hashes(seed, streams)``: bit-identical.

    ``counter`` is an int, or an int64 tensor of non-negative counters that broadcasts against ``hashes``.
    """
    return _shift_right(_splitmix64_tensor(hashes ^ counter), 11).double() * _TWO_POW_MINUS_53
