"""Gemini CLI: ``BeforeAgent`` and ``SessionStart`` hooks and the MCP server, all in ``settings.json``.

Format, from Gemini CLI's hooks reference (https://geminicli.com/docs/hooks/reference, source
https://github.com/google-gemini/gemini-cli/blob/main/docs/hooks/reference.md): ``~/.gemini/settings.json``
(user) or ``<project>/.gemini/settings.json`` holds ``"hooks": {"<Event>": [{"matcher": "...", "hooks":
[{"type": "command", "command": "...", "name": "...", "timeout": <ms>}]}]}`` - Claude Code's layout
with Gemini's event names and a timeout in milliseconds. ``BeforeAgent`` (after the user submits a
prompt) reads ``{"prompt": ...}`` and may answer ``{"hookSpecificOutput": {"hookEventName":
"BeforeAgent", "additionalContext": "..."}}`` (appended to the prompt for that turn); ``SessionStart``
answers the same way. That is the envelope our hook already prints, so the commands need no format
flag. MCP servers sit in the same file under ``mcpServers`` (https://geminicli.com/docs/tools/mcp-server).
The hooks system itself may be turned off (``/settings`` → "Enable Hooks System"); we do not flip it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from . import mcpjson
from .settingsfile import (
    agent_credential,
    dump_json,
    hook_command,
    mcp_server_entry,
    pinned_state_dir,
    pinned_vault,
    read_json,
    uninstalled_json,
    write,
)

if TYPE_CHECKING:
    from ..config import Settings

AGENT = "gemini"
# (Gemini event, our hook event, timeout in milliseconds). AfterAgent ends every turn with the chat's
# transcript_path (JSONL): the conversation note, as Claude Code's Stop.
EVENTS: tuple[tuple[str, str, int], ...] = (
    ("BeforeAgent", "prompt", 5000),
    ("SessionStart", "session-start", 10000),
    ("AfterAgent", "stop", 30000),
)


def gemini_settings_path(project: bool, cwd: Path | None = None) -> Path:
    return ((cwd or Path.cwd()) if project else Path.home()) / ".gemini" / "settings.json"


def install_gemini(settings: Settings, *, project: bool = False, dry_run: bool = False, cwd: Path | None = None) -> dict:
    from .grouped import merge_grouped

    path = gemini_settings_path(project, cwd)
    data, raw = read_json(path)
    vault = pinned_vault(settings)
    cred = agent_credential(settings, AGENT, dry_run)
    state = pinned_state_dir(settings)
    commands = {ev: hook_command(ours, AGENT, vault, cred, state_dir=state) for ev, ours, _t in EVENTS}
    entries = {
        ev: {"name": f"hive-brain-{ours}", "type": "command", "command": commands[ev], "timeout": t,
             "description": "hive-brain memory"}
        for ev, ours, t in EVENTS
    }
    new = mcpjson.merge(merge_grouped(data, entries, path), mcp_server_entry(AGENT, vault, cred, state), path)
    res = write(path, raw, raw if new == data and raw else dump_json(new, raw), dry_run)
    res.update(
        agent=AGENT,
        action="install",
        vault=vault,
        events=commands,
        credential=cred,
        mcpServer=mcpjson.NAME,
        note="Gemini CLI runs hooks only while its hooks system is on (/settings → Enable Hooks System); "
        "`/hooks panel` lists ours.",
    )
    return res


def uninstall_gemini(*, project: bool = False, dry_run: bool = False, cwd: Path | None = None) -> dict:
    from .grouped import strip_grouped

    path = gemini_settings_path(project, cwd)
    data, raw = read_json(path)
    new, n_hooks = strip_grouped(data, path)
    new, n_mcp = mcpjson.strip(new, path)
    res = write(path, raw, uninstalled_json(path, new, raw, n_hooks + n_mcp), dry_run)
    res.update(agent=AGENT, action="uninstall", removed=n_hooks + n_mcp)
    return res


def gemini_installed(project: bool, cwd: Path | None = None) -> dict:
    from .grouped import grouped_installed

    path = gemini_settings_path(project, cwd)
    out = grouped_installed(path)
    if "error" not in out:
        data, _ = read_json(path)
        vault = mcpjson.installed(data)
        out["mcp"] = {"file": str(path), "installed": vault is not None, "vault": vault}
    return out
