"""What a ring slot holds besides a number, told apart by NaN payload bits.

A slot is a float64 (the rings stay 8 bytes per tick per series). Plain NaN, which every empty
slot holds, is "no sample here, the series was stale" (a scrape without it, as Prometheus's
staleness marker). Two other NaN bit patterns carry what Prometheus also distinguishes: a NaN
*value* (a sample whose value is NaN: `sum` over it is NaN) and a gap (no sample at this tick,
but not stale: an instant query looks back past it, as after a missing sample in promtool's
series notation). Python floats keep their payload bits through arrays and assignment; only
arithmetic would make a NaN plain again, and slots are never computed with.
"""

from __future__ import annotations

import struct

VALUE_NAN: float = struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_0000_0001))[0]
"""A sample whose value is NaN."""
GAP: float = struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_0000_0002))[0]
"""No sample at this tick, and not stale."""
_VALUE_NAN_BITS = struct.pack("<d", VALUE_NAN)
_GAP_BITS = struct.pack("<d", GAP)


def is_value_nan(slot: float) -> bool:
    """A NaN sample (not an empty slot)."""
    return slot != slot and struct.pack("<d", slot) == _VALUE_NAN_BITS


def is_gap(slot: float) -> bool:
    """No sample here, and not stale."""
    return slot != slot and struct.pack("<d", slot) == _GAP_BITS


def is_stale(slot: float) -> bool:
    """An empty slot: no sample, and the series was not in that scrape."""
    return slot != slot and struct.pack("<d", slot) not in (_VALUE_NAN_BITS, _GAP_BITS)
