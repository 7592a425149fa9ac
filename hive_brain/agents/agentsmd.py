"""Agents without prompt hooks: a managed block in an ``AGENTS.md``-style instructions file.

AGENTS.md (https://agents.md) is the plain-Markdown instructions file many coding agents read at the
start of a session (Codex, Jules, Amp, opencode, Cursor, ...); ``--path`` may name any other such
file (``GEMINI.md``, ``CLAUDE.md``, ...). The block tells the agent to recall before it works and to
remember what it learns, with the CLI or the MCP server. It sits between two HTML comments (invisible
when rendered); install replaces only that block and uninstall removes only it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .settingsfile import (
    SettingsFileError,
    drop_block,
    pinned_vault,
    put_block,
    read_text,
    remove,
    split_block,
    vault_of_env,
    write,
)

if TYPE_CHECKING:
    from ..config import Settings

AGENT = "agents-md"
FILE_NAME = "AGENTS.md"
BEGIN = "<!-- >>> hive-brain (managed by `hive-brain hooks install --agent agents-md`; edit outside this block) >>> -->"
END = "<!-- <<< hive-brain <<< -->"


def agents_md_path(path: Path | None = None, cwd: Path | None = None) -> Path:
    """``--path``: a folder (its AGENTS.md) or a Markdown file; default: AGENTS.md here."""
    if path is None:
        return (cwd or Path.cwd()) / FILE_NAME
    p = Path(path).expanduser()
    if p.is_dir():
        return p / FILE_NAME
    if p.suffix.lower() in (".md", ".markdown") or p.is_file():
        return p
    raise SettingsFileError(
        f"--path {p} is neither a folder nor a Markdown file",
        hint="pass the project folder (its AGENTS.md is used) or an existing instructions file",
    )


def block(vault: str | None) -> str:
    # The command's name, not this machine's venv path: AGENTS.md is a file teams commit, and an
    # agent runs `hive-brain` from its PATH like any other tool.
    base = "hive-brain"
    # The agent runs these from the project folder: a vault not in the config file must be named.
    hb = f"{base} --vault {shlex.quote(vault)}" if vault else base
    return "\n".join(
        [
            BEGIN,
            "## Memory (hive-brain)",
            "",
            "Long-term memory for this work lives in a hive-brain vault (Markdown notes). Use it:",
            "",
            f'- Before a task, recall what is known: `{hb} recall "how do we deploy the API?"`'
            " (add `--json` for structured output).",
            f'- For a budgeted context pack to read first: `{hb} answer "<the task in a sentence>"`.',
            "- When you learn something worth keeping (a decision, a fix, a user preference, a gotcha), save it:",
            f'  `{hb} remember --type lesson --title "<short title>" --content "<what and why>"`'
            " (types: preference, instruction, decision, lesson, procedure, fact, quirk).",
            f"- If a memory is wrong or outdated, change it with `{hb} evolve` instead of adding a second one.",
            f"- If you can use MCP servers, `{base} mcp` serves the same as tools (recall, answer, remember, core, ...).",
            "",
            "Never store secrets (keys, tokens, passwords): hive-brain refuses them.",
            END,
            "",
        ]
    )


def install_agents_md(settings: Settings, *, path: Path | None = None, dry_run: bool = False, cwd: Path | None = None) -> dict:
    target = agents_md_path(path, cwd)
    raw = read_text(target)
    vault = pinned_vault(settings)
    new = put_block(raw, block(vault), BEGIN, END, target)
    res = write(target, raw, new, dry_run)
    res.update(
        agent=AGENT,
        action="install",
        vault=vault,
        note="Agents that read AGENTS.md now know to recall and remember through hive-brain; "
        "for one with MCP support, also add `hive-brain mcp` to its MCP servers.",
    )
    return res


def uninstall_agents_md(*, path: Path | None = None, dry_run: bool = False, cwd: Path | None = None) -> dict:
    target = agents_md_path(path, cwd)
    raw = read_text(target)
    new, removed = drop_block(raw, BEGIN, END, target)
    res = remove(target, raw, dry_run) if removed and not new else write(target, raw, new, dry_run)
    res.update(agent=AGENT, action="uninstall", removed=removed)
    return res


def agents_md_installed(cwd: Path | None = None, path: Path | None = None) -> dict:
    target = agents_md_path(path, cwd)
    out: dict[str, Any] = {"file": str(target), "exists": target.exists(), "installed": False}
    try:
        _, ours, _ = split_block(read_text(target), BEGIN, END, target)
    except SettingsFileError as e:
        out["error"] = str(e)
        return out
    if ours is not None:
        out["installed"] = True
        m = re.search(r"--vault ('[^']*'|\S+)", ours)
        pinned = shlex.split(m.group(1))[0] if m else None
        out["vault"] = vault_of_env({"HIVE_BRAIN_VAULT": pinned} if pinned else None)
    return out
