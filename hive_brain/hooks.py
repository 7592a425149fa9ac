"""Agent hooks (placeholder until the agents module lands)."""

from __future__ import annotations


def dispatch(event: str, argv: list[str]) -> int:
    return 0
