"""Cursor (1.7+): a ``sessionStart`` hook in ``hooks.json`` and the MCP server in ``mcp.json``.

Format, from Cursor's hooks documentation (https://cursor.com/docs/agent/hooks): ``~/.cursor/hooks.json``
(user) or ``<project>/.cursor/hooks.json`` holds ``{"version": 1, "hooks": {"<event>": [{"command":
"..."}]}}``; a hook reads the event's JSON on stdin and answers JSON on stdout. ``sessionStart`` may
answer ``{"additional_context": "..."}``, which Cursor adds to the conversation; ``beforeSubmitPrompt``
may only answer ``{"continue": ..., "user_message": ...}`` (allow or block the prompt), so Cursor has
no prompt-time context: it gets the core memory at session start (our ``hook session-start --format
cursor``) and recall/remember through the MCP tools. MCP servers live in ``~/.cursor/mcp.json`` /
``<project>/.cursor/mcp.json`` as ``{"mcpServers": {"<name>": {"command", "args", "env"}}}``
(https://cursor.com/docs/context/mcp).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import mcpjson
from .settingsfile import (
    SettingsFileError,
    agent_credential,
    combine,
    command_env,
    dump_json,
    hook_command,
    is_ours,
    mcp_server_entry,
    pinned_state_dir,
    pinned_vault,
    read_json,
    remove,
    uninstalled_json,
    vault_of_env,
    write,
)

if TYPE_CHECKING:
    from ..config import Settings

AGENT = "cursor"
# (Cursor event, our hook event). sessionStart is the one Cursor event that takes context.
EVENTS: tuple[tuple[str, str], ...] = (("sessionStart", "session-start"),)
FORMAT = ("--format", "cursor")


def cursor_dir(project: bool, cwd: Path | None = None) -> Path:
    return ((cwd or Path.cwd()) if project else Path.home()) / ".cursor"


def _hooks(data: dict, path: Path) -> dict:
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsFileError(f'{path}: "hooks" is not an object; nothing was changed', hint="fix the file")
    for event, _ours in EVENTS:
        if not isinstance(hooks.get(event, []), list):
            raise SettingsFileError(f"{path}: hooks.{event} is not a list; nothing was changed", hint="fix the file")
    return hooks


def merge_hooks(data: dict, commands: dict[str, str], path: Path) -> dict:
    """``data`` (a copy) with our command per event (in place of an old one of ours), the rest untouched."""
    out = json.loads(json.dumps(data))
    hooks = _hooks(out, path)
    for event, command in commands.items():
        entries = hooks.get(event, [])
        mine = [i for i, h in enumerate(entries) if isinstance(h, dict) and is_ours(h.get("command"))]
        if mine:
            entries[mine[0]] = {**entries[mine[0]], "command": command}
            entries = [h for i, h in enumerate(entries) if i not in mine[1:]]
        else:
            entries.append({"command": command})
        hooks[event] = entries
    out.setdefault("version", 1)
    out["hooks"] = hooks
    return out


def strip_hooks(data: dict, path: Path) -> tuple[dict, int]:
    out = json.loads(json.dumps(data))
    if "hooks" not in out:
        return out, 0
    hooks = out["hooks"]
    if not isinstance(hooks, dict):
        raise SettingsFileError(f'{path}: "hooks" is not an object; nothing was changed', hint="fix the file")
    removed = 0
    for event in list(hooks):
        entries = hooks[event]
        if not isinstance(entries, list):
            continue
        kept = [h for h in entries if not (isinstance(h, dict) and is_ours(h.get("command")))]
        removed += len(entries) - len(kept)
        if kept or not entries:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks and removed:
        del out["hooks"]
    return out, removed


def install_cursor(settings: Settings, *, project: bool = False, dry_run: bool = False, cwd: Path | None = None) -> dict:
    folder = cursor_dir(project, cwd)
    hooks_path, mcp_path = folder / "hooks.json", folder / "mcp.json"
    hooks_data, hooks_raw = read_json(hooks_path)
    mcp_data, mcp_raw = read_json(mcp_path)
    vault = pinned_vault(settings)
    cred = agent_credential(settings, AGENT, dry_run)
    state = pinned_state_dir(settings)
    commands = {ev: hook_command(ours, AGENT, vault, cred, FORMAT, state) for ev, ours in EVENTS}
    # Both merges first: a file we refuse leaves the other one unwritten too.
    new_hooks = merge_hooks(hooks_data, commands, hooks_path)
    new_mcp = mcpjson.merge(mcp_data, mcp_server_entry(AGENT, vault, cred, state), mcp_path)
    results = [
        write(hooks_path, hooks_raw, hooks_raw if new_hooks == hooks_data and hooks_raw else dump_json(new_hooks, hooks_raw), dry_run),
        write(mcp_path, mcp_raw, mcp_raw if new_mcp == mcp_data and mcp_raw else dump_json(new_mcp, mcp_raw), dry_run),
    ]
    return combine(
        results,
        agent=AGENT,
        action="install",
        vault=vault,
        events=commands,
        credential=cred,
        mcpServer=mcpjson.NAME,
        note="Cursor adds the core memory at session start (its sessionStart hook takes context; "
        "beforeSubmitPrompt cannot), and recall/remember come from the hive-brain MCP tools.",
    )


def uninstall_cursor(*, project: bool = False, dry_run: bool = False, cwd: Path | None = None) -> dict:
    folder = cursor_dir(project, cwd)
    hooks_path, mcp_path = folder / "hooks.json", folder / "mcp.json"
    hooks_data, hooks_raw = read_json(hooks_path)
    mcp_data, mcp_raw = read_json(mcp_path)
    new_hooks, n_hooks = strip_hooks(hooks_data, hooks_path)
    new_mcp, n_mcp = mcpjson.strip(mcp_data, mcp_path)
    # A file left with nothing but what install puts in a new one was created by install: removed.
    results = [
        remove(hooks_path, hooks_raw, dry_run) if n_hooks and new_hooks in ({}, {"version": 1})
        else write(hooks_path, hooks_raw, uninstalled_json(hooks_path, new_hooks, hooks_raw, n_hooks), dry_run),
        remove(mcp_path, mcp_raw, dry_run) if n_mcp and not new_mcp
        else write(mcp_path, mcp_raw, uninstalled_json(mcp_path, new_mcp, mcp_raw, n_mcp), dry_run),
    ]
    return combine(results, agent=AGENT, action="uninstall", removed=n_hooks + n_mcp)


def cursor_installed(project: bool, cwd: Path | None = None) -> dict:
    folder = cursor_dir(project, cwd)
    hooks_path, mcp_path = folder / "hooks.json", folder / "mcp.json"
    out: dict[str, Any] = {"file": str(hooks_path), "exists": hooks_path.exists(), "events": {}, "vaults": {}}
    try:
        data, _ = read_json(hooks_path)
        hooks = data.get("hooks")
        for event, entries in hooks.items() if isinstance(hooks, dict) else ():
            for h in entries if isinstance(entries, list) else []:
                if isinstance(h, dict) and is_ours(h.get("command")):
                    out["events"][event] = h["command"]
                    out["vaults"][event] = vault_of_env(command_env(h["command"]))
        mcp_data, _ = read_json(mcp_path)
    except SettingsFileError as e:
        out["error"] = str(e)
        return out
    vault = mcpjson.installed(mcp_data)
    out["mcp"] = {"file": str(mcp_path), "installed": vault is not None, "vault": vault}
    return out
