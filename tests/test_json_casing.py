"""hive-brain's own JSON keys are camelCase (docs/json.md); this fails on any snake_case key it emits.

Exceptions are the ones docs/json.md lists: note frontmatter (under ``meta``), keys that agents or
other components define, and the keys of the search modules being rewritten (for the integrator).
"""

from __future__ import annotations

import re
import shutil
from typing import Any

from tests.helpers import cli_as, doctor, run

SNAKE = re.compile(r"^[a-z0-9]+(_[a-z0-9]+)+$")

# Subtrees not checked: note frontmatter is a file format, its keys stay as written in the note.
SKIP_UNDER = {"meta", "frontmatter"}

# Documented exceptions (docs/json.md, "Exceptions").
ALLOWED = {
    "session_id",  # Claude Code's name, kept in the hook status records it comes from
}


def snake_keys(data: Any, path: str = "$") -> list[str]:
    """Every snake_case key in `data` (recursively), as a JSON path, skipping frontmatter subtrees."""
    found: list[str] = []
    if isinstance(data, dict):
        for k, v in data.items():
            here = f"{path}.{k}"
            if isinstance(k, str) and SNAKE.match(k) and k not in ALLOWED:
                found.append(here)
            if k in SKIP_UNDER:
                continue
            found += snake_keys(v, here)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            found += snake_keys(v, f"{path}[{i}]")
    return found


def test_snake_keys_helper():
    assert snake_keys({"a": {"b_c": 1, "meta": {"memory_key": 1}}, "l": [{"d_e": 2}], "okKey": 0}) == [
        "$.a.b_c", "$.l[0].d_e"]


def _hook_status_record(vault: Any) -> None:
    """One prompt through the hook (in-process, no hard exit), so `hooks status` has a run to show."""
    import json

    from hive_brain.agents.hooks import dispatch

    payload = {"session_id": "s1", "prompt": "which package manager do we use?", "hook_event_name": "UserPromptSubmit",
               "cwd": str(vault)}
    dispatch("prompt", [], stdin=json.dumps(payload), hard_exit=False)


def test_json_output_is_camel_case(vault_path, tmp_path):
    outputs: dict[str, Any] = {}
    outputs["init"] = run("init", str(tmp_path / "other-vault"))
    first = run("remember", "--type", "preference", "--title", "Package manager", "--content",
                "Use pnpm, not npm.", "--tags", "js")
    outputs["remember"] = first
    outputs["evolve"] = run("evolve", "--memory-id", first["id"], "--content", "Use bun now, not pnpm.")
    outputs["get"] = run("get", "--memory-id", outputs["evolve"]["id"])
    src = vault_path / outputs["evolve"]["path"]
    shutil.copyfile(src, src.with_name(src.stem + " 1.md"))  # a sync copy: its conflict shows in every output
    outputs["status"] = run("status")
    outputs["generations"] = run("generations")
    outputs["prune"] = run("generations", "--prune", "--keep", "1")
    outputs["generations after prune"] = run("generations")
    assert outputs["generations after prune"]["coverage"]["earliestReplayable"]  # coverage.json, converted
    outputs["recall"] = run("recall", "which package manager do we use?", "--lexical")
    outputs["doctor"] = doctor()
    outputs["health"] = run("health")
    outputs["conflicts"] = run("conflicts")
    assert outputs["doctor"]["conflicts"] and outputs["recall"]["hits"][0]["idConflict"]
    outputs["repair-conflicts"] = run("repair-conflicts")
    outputs["repair-conflicts --confirm"] = run("repair-conflicts", "--confirm")
    outputs["propose"] = cli_as("remember", "--type", "procedure", "--title", "Migrations first", "--content",
                                "Run the migrations before deploying.", "--memory-scope", "hive", agent="a", enforce=True)
    outputs["review list"] = run("review", "list")
    _hook_status_record(vault_path)
    outputs["hooks status"] = run("hooks", "status")
    assert outputs["get"]["meta"]["memory_key"]  # frontmatter keeps its snake_case keys
    assert outputs["review list"], "the agent's hive write should have queued a proposal"
    assert outputs["hooks status"]["last"], "the hook run should have been recorded"
    bad = {cmd: keys for cmd, data in outputs.items() if (keys := snake_keys(data))}
    assert bad == {}, f"snake_case keys in --json output (see docs/json.md): {bad}"


def test_hook_status_from_before_the_rename_is_read(tmp_path):
    """An upgrade keeps the last status: an old status.json with snake_case keys is read as camelCase."""
    import json

    from hive_brain.agents.hooks import _record, read_status, status_path

    state = tmp_path / "st"
    p = status_path(state)
    p.parent.mkdir(parents=True)
    old = {"event": "prompt", "ok": False, "error": "boom", "duration_ms": 12.5, "server_error": "down"}
    p.write_text(json.dumps({"runs": [old], "last": {"prompt": old}, "last_error": old}), encoding="utf-8")
    st = read_status(state)
    assert st["lastError"]["durationMs"] == 12.5 and st["lastError"]["serverError"] == "down"
    assert st["runs"][0]["durationMs"] == 12.5 and st["last"]["prompt"]["durationMs"] == 12.5
    assert snake_keys(st) == []
    _record(p.parent, {"event": "prompt", "ok": True, "durationMs": 3.0})
    st = read_status(state)
    assert len(st["runs"]) == 2 and st["lastError"]["error"] == "boom" and snake_keys(st) == []
