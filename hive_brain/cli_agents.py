"""CLI commands for agent integration (hooks, core, mcp, consolidate)."""

from __future__ import annotations
