"""Codex CLI: the prompt, session-start and stop hooks in ``hooks.json``, their trust, and the MCP server.

Format, from Codex's hooks documentation (https://developers.openai.com/codex/hooks) and checked
against the real CLI (tests/test_agents_e2e.py): ``$CODEX_HOME/hooks.json`` (default ``~/.codex``)
holds Claude Code's layout, ``{"hooks": {"<Event>": [{"matcher"?, "hooks": [{"type": "command",
"command", "timeout": <s>}]}]}}``; ``UserPromptSubmit`` and ``SessionStart`` may answer
``{"hookSpecificOutput": {"hookEventName", "additionalContext"}}`` (our hook's answer as it is) and
``Stop`` gets the ``transcript_path`` of the session's rollout after every turn.

Codex runs a user-level hook only once it is trusted: ``config.toml`` must hold
``[hooks.state."<hooks.json>:<event_label>:<group>:<handler>"] trusted_hash = "sha256:..."``, the hash
of the hook's normalised identity (Codex's ``command_hook_hash``: the event label plus the group with
just this handler, as sorted compact JSON). Installing is the user's explicit choice to run these
hooks, so install records that trust for our entries only, inside our managed block of
``config.toml``; an edit that moves our entries (a group added before ours) makes Codex skip them
until ``hooks install --agent codex`` runs again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .settingsfile import hook_command, toml_str

AGENT = "codex"
# (Codex event, our hook event, timeout in seconds, Codex's snake_case label of the event).
EVENTS: tuple[tuple[str, str, int, str], ...] = (
    ("SessionStart", "session-start", 10, "session_start"),
    ("UserPromptSubmit", "prompt", 5, "user_prompt_submit"),
    ("Stop", "stop", 30, "stop"),
)


def codex_home() -> Path:
    """Codex's home as Codex spells it in trust keys: ``$CODEX_HOME`` canonicalised, else ``~/.codex``."""
    home = os.environ.get("CODEX_HOME")
    return Path(home).expanduser().resolve() if home else Path.home() / ".codex"


def hooks_path() -> Path:
    return codex_home() / "hooks.json"


def entries(vault: str | None, cred: str | None, state: str | None) -> dict[str, dict]:
    return {
        ev: {"type": "command", "command": hook_command(ours, AGENT, vault, cred, state_dir=state), "timeout": t}
        for ev, ours, t, _label in EVENTS
    }


def trusted_hash(label: str, group: dict, handler: dict) -> str:
    """Codex's hash of one command hook (``hooks/src/engine/discovery.rs``: ``command_hook_hash`` →
    ``config/src/fingerprint.rs``: ``version_for_toml``): what its trust state must hold."""
    normalized = {"type": "command", "command": handler["command"], "timeout": max(1, int(handler.get("timeout") or 600)),
                  "async": bool(handler.get("async", False))}
    if handler.get("statusMessage") is not None:
        normalized["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": label, "hooks": [normalized]}
    if group.get("matcher") is not None:
        identity["matcher"] = group["matcher"]
    raw = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(raw.encode("utf-8")).hexdigest()


def trust_tables(data: dict, path: Path, commands: dict[str, str]) -> list[str]:
    """The ``[hooks.state."..."]`` tables that trust our entries where they sit in ``data`` (hooks.json)."""
    lines: list[str] = []
    hooks = data.get("hooks")
    for event, _ours, _t, label in EVENTS:
        groups = hooks.get(event) if isinstance(hooks, dict) else None
        for gi, g in enumerate(groups if isinstance(groups, list) else []):
            handlers = g.get("hooks") if isinstance(g, dict) else None
            for hi, h in enumerate(handlers if isinstance(handlers, list) else []):
                if isinstance(h, dict) and h.get("command") == commands[event]:
                    key = f"{path}:{label}:{gi}:{hi}"
                    lines += [f"[hooks.state.{toml_str(key)}]", f"trusted_hash = {toml_str(trusted_hash(label, g, h))}"]
    return lines
