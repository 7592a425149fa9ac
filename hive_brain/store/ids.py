"""Ids and timestamps every record carries: ULIDs (time-ordered, random) and the ISO 8601 UTC now.

Standard library only (not even ``datetime``) and apart from ``store.notes`` (which loads YAML): the prompt hook stamps its
usage record with these and must not pay for a YAML parser.
"""

from __future__ import annotations

import os
import time


def now_iso() -> str:
    """``2026-12-01T05:19:07Z`` (time.strftime: ``datetime`` is a C module the hook need not load)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_ulid() -> str:
    n = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    out = []
    for _ in range(26):
        out.append(_CROCKFORD[n & 31])
        n >>= 5
    return "".join(reversed(out))
