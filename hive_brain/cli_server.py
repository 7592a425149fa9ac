"""CLI commands for the long-running server (`serve`)."""

from __future__ import annotations
