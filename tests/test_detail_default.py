"""``recall --detail`` defaults to ``full`` (issue 28: as the spec says), while the prompt hook, the
MCP tools and ``answer`` keep asking for ``overview`` explicitly, so what they send into a model's
context does not grow."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hive_brain.cli import thin
from hive_brain.search.prompt import contextual_answer

from .helpers import remember, run

LONG = " ".join(f"Step {i}: run the staging smoke test suite number {i} and check the release dashboard." for i in range(40))


def test_recall_returns_the_whole_note_unless_asked_for_less(vault_path) -> None:
    m = remember("Release checklist", LONG, "procedure")
    hit = next(h for h in run("recall", "release checklist staging smoke test", "--lexical")["hits"] if h["id"] == m["id"])
    assert " ".join(hit.get("content", "").split()) == LONG  # the whole note, all its passages
    over = run("recall", "release checklist staging smoke test", "--lexical", "--detail", "overview")["hits"]
    assert "content" not in next(h for h in over if h["id"] == m["id"])


def test_the_thin_client_defaults_to_full_for_recall_and_overview_for_answer() -> None:
    assert thin.COMMANDS["recall"][1]["--detail"][2] == "full"
    assert thin.COMMANDS["answer"][1]["--detail"][2] == "overview"


def test_the_hook_asks_for_overview_whatever_the_default() -> None:
    seen: list[dict[str, Any]] = []

    def recall(q: str, **opts: Any) -> dict:
        seen.append(opts)
        return {"hits": [], "abstained": True, "reason": "nothing", "semantic": False}

    contextual_answer(recall, "how do we release the web app to staging", "The Android build is ready.", budget=6000)
    assert seen and all(o.get("detail") == "overview" for o in seen), seen


def test_the_mcp_tools_ask_for_overview() -> None:
    from hive_brain.agents import mcptools

    calls: list[tuple[str, dict]] = []
    res = {"hits": [], "abstained": True, "reason": "nothing", "semantic": False, "items": [], "context": ""}
    reader = SimpleNamespace(recall=lambda q, **o: calls.append(("recall", o)) or res,
                             answer=lambda q, **o: calls.append(("answer", o)) or res)
    t = SimpleNamespace(reader=reader, log_usage=lambda hits: None)
    mcptools.recall(t, "how do we release")
    mcptools.answer(t, "how do we release")
    assert [(name, o.get("detail")) for name, o in calls] == [("recall", "overview"), ("answer", "overview")]
