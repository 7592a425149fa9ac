"""Cline (3.36+): ``UserPromptSubmit`` and ``TaskStart`` hook scripts.

Format, from Cline's hook reference (https://docs.cline.bot/features/hooks/hook-reference, source
https://github.com/cline/cline/blob/main/docs/features/hooks/hook-reference.mdx) and hooks page
(https://docs.cline.bot/customization/hooks): a hook is an executable file named after its event,
no extension, in ``~/Documents/Cline/Hooks/`` (global) or ``<project>/.clinerules/hooks/``. It reads
``{"hookName", "taskId", "workspaceRoots", ..., "userPromptSubmit": {"prompt": ...}}`` on stdin and
answers ``{"cancel": false, "contextModification": "..."}``, which is added to the conversation;
a non-zero exit or unreadable JSON cancels the action, so our hook always answers ``cancel: false``.
Hooks run on macOS and Linux, once "Enable Hooks" is on in Cline's settings.

A file of that name that is not ours is the user's hook: install refuses to replace it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .settingsfile import (
    SettingsFileError,
    agent_credential,
    combine,
    command_env,
    hook_command,
    is_ours,
    pinned_state_dir,
    pinned_vault,
    read_text,
    remove,
    umask,
    vault_of_env,
    write,
)

if TYPE_CHECKING:
    from ..config import Settings

AGENT = "cline"
# (Cline hook file, our hook event). TaskStart takes context too: the core memory; a task that ends
# (TaskComplete, TaskCancel) becomes a conversation note from its task history.
EVENTS: tuple[tuple[str, str], ...] = (
    ("UserPromptSubmit", "prompt"), ("TaskStart", "session-start"), ("TaskComplete", "stop"), ("TaskCancel", "stop"),
)
FORMAT = ("--format", "cline")
HEADER = "# hive-brain: managed by `hive-brain hooks install --agent cline`; `hooks uninstall --agent cline` removes it"


def hooks_dir(project: bool, cwd: Path | None = None) -> Path:
    if project:
        return (cwd or Path.cwd()) / ".clinerules" / "hooks"
    return Path.home() / "Documents" / "Cline" / "Hooks"


def script(command: str) -> str:
    return f"#!/bin/sh\n{HEADER}\n{command}\n"


def _command_of(text: str) -> str | None:
    """Our hook command in a hook file, or None when the file is not ours."""
    if HEADER not in text:
        return None
    return next((line for line in text.splitlines() if is_ours(line)), None)


def install_cline(settings: Settings, *, project: bool = False, dry_run: bool = False, cwd: Path | None = None) -> dict:
    folder = hooks_dir(project, cwd)
    vault = pinned_vault(settings)
    cred = agent_credential(settings, AGENT, dry_run)
    state = pinned_state_dir(settings)
    commands = {name: hook_command(ours, AGENT, vault, cred, FORMAT, state) for name, ours in EVENTS}
    olds = {name: read_text(folder / name) for name, _ours in EVENTS}
    for name, old in olds.items():
        if old and _command_of(old) is None:
            # Checked for every file before writing any: a refusal leaves nothing half installed.
            raise SettingsFileError(
                f"{folder / name} is a Cline hook of yours; nothing was changed",
                hint="Cline runs one script per event and folder: merge ours into it by hand, or move it away",
            )
    results = []
    for name, old in olds.items():
        res = write(folder / name, old, script(commands[name]), dry_run)
        if res["changed"] and not dry_run:
            os.chmod(folder / name, 0o755 & ~umask())
        results.append(res)
    return combine(
        results,
        agent=AGENT,
        action="install",
        vault=vault,
        events=commands,
        credential=cred,
        note="Cline runs hooks once they are enabled (Settings → Enable Hooks; CLI: "
        "`cline config set hooks-enabled=true`); for the MCP tools add `hive-brain mcp` in Cline's MCP servers.",
    )


def uninstall_cline(*, project: bool = False, dry_run: bool = False, cwd: Path | None = None) -> dict:
    folder = hooks_dir(project, cwd)
    results = []
    removed = 0
    for name, _ours in EVENTS:
        path = folder / name
        old = read_text(path)
        if old and _command_of(old) is not None:
            # Ours entirely (an empty hook file would still be run): removed, not emptied or backed up.
            results.append(remove(path, old, dry_run))
            removed += 1
        else:
            results.append(write(path, old, old, dry_run))
    return combine(results, agent=AGENT, action="uninstall", removed=removed)


def cline_installed(project: bool, cwd: Path | None = None) -> dict:
    folder = hooks_dir(project, cwd)
    out: dict[str, Any] = {"file": str(folder), "exists": folder.is_dir(), "events": {}, "vaults": {}}
    for name, _ours in EVENTS:
        try:
            command = _command_of(read_text(folder / name))
        except SettingsFileError as e:
            out["error"] = str(e)
            continue
        if command:
            out["events"][name] = command
            out["vaults"][name] = vault_of_env(command_env(command))
    return out
