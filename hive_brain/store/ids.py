"""Ids and timestamps every record carries: ULIDs (time-ordered, random) and the ISO 8601 UTC now.

Standard library only and apart from ``store.notes`` (which loads YAML): the prompt hook stamps its
usage record with these and must not pay for a YAML parser.
"""

from __future__ import annotations

import datetime as dt
import os
import time


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_ulid() -> str:
    n = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    out = []
    for _ in range(26):
        out.append(_CROCKFORD[n & 31])
        n >>= 5
    return "".join(reversed(out))
