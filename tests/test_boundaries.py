"""Boundaries: where caller text meets a limit or a frame.

* ``update --content`` is held to the same size limit as ``remember`` (stop 19 found none).
* Recalled text is data: in the prompt hook's output, MCP results and ``answer``, a memory holding
  "ignore previous instructions", a fake closing tag of our frame, markdown headings or a fake
  ``</system>`` stays inside the frame; it can never close it.
"""

from __future__ import annotations

from hive_brain.memory.store import MAX_CONTENT_CHARS

from .helpers import remember, run


def test_update_content_has_the_same_length_limit_as_remember(vault_path):
    m = remember("Package manager", "Use pnpm.")
    note = next(vault_path.rglob("package-manager-*.md"))
    before = note.read_bytes()
    too_long = "x" * (MAX_CONTENT_CHARS + 1)
    res = run("remember", "--type", "fact", "--title", "Long", "--content", too_long, ok=False)
    assert res["_exit"] != 0 and "characters" in res["message"]
    res = run("update", m["id"], "--content", too_long, ok=False)
    assert res["_exit"] != 0 and "characters" in res["message"], res
    res = run("update", m["id"], "--title", "t" * 301, ok=False)
    assert res["_exit"] != 0 and "300" in res["message"], res
    assert note.read_bytes() == before  # refused whole: nothing written
    res = run("update", m["id"], "--content", "y" * MAX_CONTENT_CHARS)
    assert res["status"] == "updated"
