"""Claude Code's and Gemini CLI's shared hooks layout: ``hooks.<Event> = [{"matcher": ..., "hooks": [entry, ...]}]``.

Our entries are recognised by their command (:func:`~.settingsfile.is_ours`), replaced in place on
re-install, and removed without disturbing the user's own hooks, groups or other keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .settingsfile import SettingsFileError, command_env, is_ours, read_json, vault_of_env


def hooks_table(data: dict, path: Path) -> dict:
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsFileError(f'{path}: "hooks" is not an object; nothing was changed', hint="fix the file")
    return hooks


def _groups(hooks: dict, event: str, path: Path) -> list:
    groups = hooks.get(event, [])
    if not isinstance(groups, list):
        raise SettingsFileError(
            f"{path}: hooks.{event} is not a list; nothing was changed", hint="fix the file"
        )
    return groups


def merge_grouped(data: dict, entries: dict[str, dict], path: Path, group: dict | None = None) -> dict:
    """``data`` with our hook entry per event set (in place of any old ones), everything else untouched.
    ``group``: the keys of a group we add (default ``{"matcher": ""}``; Codex's has none)."""
    out = json.loads(json.dumps(data))
    hooks = hooks_table(out, path)
    for event, entry in entries.items():
        groups = _groups(hooks, event, path)
        placed = False
        new_groups = []
        for g in groups:
            if not isinstance(g, dict) or not isinstance(g.get("hooks"), list):
                new_groups.append(g)
                continue
            kept = []
            for h in g["hooks"]:
                if isinstance(h, dict) and is_ours(h.get("command")):
                    if not placed:
                        kept.append(entry)
                        placed = True
                    continue
                kept.append(h)
            if kept:
                new_groups.append({**g, "hooks": kept})
        if not placed:
            new_groups.append({**({"matcher": ""} if group is None else group), "hooks": [entry]})
        hooks[event] = new_groups
    out["hooks"] = hooks
    return out


def strip_grouped(data: dict, path: Path) -> tuple[dict, int]:
    """``data`` without our hook entries; (new data, number removed)."""
    out = json.loads(json.dumps(data))
    if "hooks" not in out:
        return out, 0
    hooks = hooks_table(out, path)
    removed = 0
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue  # Gemini keeps `enabled` (a flag) beside the events
        new_groups = []
        for g in groups:
            if not isinstance(g, dict) or not isinstance(g.get("hooks"), list):
                new_groups.append(g)  # also Gemini's `disabled` list of hook names
                continue
            kept = [h for h in g["hooks"] if not (isinstance(h, dict) and is_ours(h.get("command")))]
            removed += len(g["hooks"]) - len(kept)
            if kept:
                new_groups.append({**g, "hooks": kept})
        if new_groups or not groups:
            hooks[event] = new_groups
        else:
            del hooks[event]
    if not hooks and removed:
        del out["hooks"]
    return out, removed


def grouped_installed(path: Path) -> dict:
    """Which of our hook events a grouped settings file holds, with each command and its vault."""
    out: dict[str, Any] = {"file": str(path), "exists": path.exists(), "events": {}, "vaults": {}}
    try:
        data, _ = read_json(path)
        hooks = hooks_table(data, path)
    except SettingsFileError as e:
        out["error"] = str(e)
        return out
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            continue
        for g in groups:
            group_hooks = g.get("hooks") if isinstance(g, dict) else None
            for h in group_hooks if isinstance(group_hooks, list) else []:
                if isinstance(h, dict) and is_ours(h.get("command")):
                    out["events"][event] = h["command"]
                    out["vaults"][event] = vault_of_env(command_env(h["command"]))
    return out
