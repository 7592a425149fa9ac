"""The ``mcpServers`` table of a JSON settings file (Cursor's ``mcp.json``, Gemini CLI's ``settings.json``).

Both document the same entry (``command``, ``args``, ``env``) under ``mcpServers.<name>``; ours is
named ``hive-brain``. An entry of that name that does not start ``hive-brain mcp`` is the user's
own: install refuses to replace it and uninstall leaves it alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .settingsfile import SettingsFileError, vault_of_env

NAME = "hive-brain"


def _servers(data: dict, path: Path) -> dict:
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise SettingsFileError(f'{path}: "mcpServers" is not an object; nothing was changed', hint="fix the file")
    return servers


def _is_ours(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    words = [str(entry.get("command") or ""), *(str(a) for a in entry.get("args") or [])]
    return bool(words) and words[-1] == "mcp" and any("hive-brain" in w or "hive_brain" in w for w in words)


def merge(data: dict, entry: dict, path: Path) -> dict:
    """``data`` (a copy) with our server entry set; a foreign entry of our name is refused."""
    import json

    out = json.loads(json.dumps(data))
    servers = _servers(out, path)
    old = servers.get(NAME)
    if old is not None and not _is_ours(old):
        raise SettingsFileError(
            f"{path} already has an MCP server named {NAME!r} that does not run `hive-brain mcp`; nothing was changed",
            hint="rename or remove that entry, then install again",
        )
    servers[NAME] = entry
    out["mcpServers"] = servers
    return out


def strip(data: dict, path: Path) -> tuple[dict, int]:
    import json

    out = json.loads(json.dumps(data))
    servers = out.get("mcpServers")
    if not isinstance(servers, dict) or not _is_ours(servers.get(NAME)):
        return out, 0
    del servers[NAME]
    if not servers:
        del out["mcpServers"]
    return out, 1


def installed(data: dict) -> dict[str, Any] | None:
    """Our entry's vault (as :func:`~.settingsfile.vault_of_env`), or None when not installed."""
    servers = data.get("mcpServers")
    entry = servers.get(NAME) if isinstance(servers, dict) else None
    if not _is_ours(entry):
        return None
    assert isinstance(entry, dict)
    env = entry.get("env")
    return vault_of_env(env if isinstance(env, dict) else None)
