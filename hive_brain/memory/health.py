"""`hive-brain health`: memories per layer, the Brain Review queue, conflicts and index freshness."""

from __future__ import annotations

from typing import Any

from .conflicts import find as sync_conflicts
from .core import oversized_core
from .layers import conflicts, layer_counts
from .ports import EngineLike
from .proposals import status_counts


def health(engine: EngineLike) -> dict[str, Any]:
    """Counts per layer, Brain Review queue, conflicts and index freshness, for `hive-brain health`."""
    settings = engine.settings
    agent = settings.agent_id
    st = engine.status()  # refreshes the catalog (via the indexer's diff)
    cat = engine.catalog
    found = conflicts(cat, agent) + sync_conflicts(cat, agent)
    queue = status_counts(cat, agent)
    return {
        "agent": agent,
        "enforcement": bool(settings.scoped_permissions),
        "memories": layer_counts(cat, agent, settings=settings),
        "proposals": queue,
        "conflicts": len(found),
        "conflictList": found,
        "index": {
            "generation": st["generation"],
            "staleNotes": st["staleNotes"],
            "fresh": st["staleNotes"] == 0,
            "notes": st["notes"],
        },
        "problems": len(cat.problems()),
        "warnings": [*(st.get("warnings") or []), *oversized_core(engine, agent)],
    }
