"""Install, remove and inspect the agent integration (Claude Code hooks, the Codex MCP entry).

Settings files belong to the user: we merge our entries without touching anything else, recognise
our own entries on re-install (idempotent), back the file up before every write, refuse to write
over a file we cannot parse, and ``--dry-run`` shows the unified diff and writes nothing.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import HiveBrainError, UsageError

AGENTS = ("claude-code", "codex")
# (Claude Code event, our hook event, timeout in seconds). The prompt hook keeps its own 1.5 s deadline.
CLAUDE_EVENTS: tuple[tuple[str, str, int], ...] = (
    ("UserPromptSubmit", "prompt", 5),
    ("SessionStart", "session-start", 10),
    ("Stop", "stop", 30),
)
CODEX_BEGIN = (
    "# >>> hive-brain (managed by `hive-brain hooks install --agent codex`; edit outside this block) >>>"
)
CODEX_END = "# <<< hive-brain <<<"
_OURS = re.compile(r"hive[-_]brain.*(?:\s|-)hook\s+(?:prompt|session-start|stop|session-end)\b")


class SettingsFileError(UsageError):
    """An agent settings file exists but cannot be read safely; we never overwrite it."""


def is_ours(command: Any) -> bool:
    return isinstance(command, str) and bool(_OURS.search(command))


# ---------------------------------------------------------------------------------------------- paths
def claude_settings_path(project: bool, cwd: Path | None = None) -> Path:
    return (
        (cwd or Path.cwd()) / ".claude" / "settings.json"
        if project
        else Path.home() / ".claude" / "settings.json"
    )


def codex_config_path() -> Path:
    home = os.environ.get("CODEX_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".codex") / "config.toml"


def hive_brain_executable() -> list[str]:
    """How to start this installation's ``hive-brain``: the script next to this Python, else on PATH."""
    sibling = Path(sys.executable).parent / "hive-brain"
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return [str(sibling)]
    found = shutil.which("hive-brain")
    if found:
        return [str(Path(found).resolve())]
    return [sys.executable, "-m", "hive_brain"]


def pinned_vault(settings: Any) -> str | None:
    """The vault to pin in the hook command: agents run hooks from the project folder, not the vault.

    A vault set in the config file is not pinned: every process reads that file anyway, and pinning
    would override a later change there.
    """
    from ..errors import VaultNotFound
    from ..store.vault import open_vault

    try:
        root = str(open_vault(settings).root)
    except VaultNotFound as e:
        # Hooks without a vault fail on every prompt; refuse now, while the user is looking.
        raise VaultNotFound(f"no vault to install the hooks for: {e.message}",
                            hint="set one for good with `hive-brain config set vault ~/brain` (or pass --vault)") from None
    return None if str(settings.sources.get("vault", "")).startswith("config:") else root


def hook_command(event: str, agent: str, vault: str | None, credential: str | None = None) -> str:
    env = f"HIVE_AGENT_ID={shlex.quote(agent)}"
    if credential:
        env += f" HIVE_AGENT_CREDENTIAL={shlex.quote(credential)}"
    if vault:
        env += f" HIVE_BRAIN_VAULT={shlex.quote(vault)}"
    exe = " ".join(shlex.quote(x) for x in hive_brain_executable())
    return f"{env} {exe} hook {event}"


# ---------------------------------------------------------------------------------------------- files
def _read_json(path: Path) -> tuple[dict, str]:
    if not path.exists():
        return {}, ""
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SettingsFileError(f"cannot read {path}: {e}", hint="fix its permissions or encoding") from e
    if not raw.strip():
        return {}, raw
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise SettingsFileError(
            f"{path} is not valid JSON ({e}); nothing was changed",
            hint="fix the file (or move it away) and run the command again",
        ) from e
    if not isinstance(data, dict):
        raise SettingsFileError(
            f"{path} does not hold a JSON object; nothing was changed", hint="fix the file"
        )
    return data, raw


def _diff(path: Path, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=str(path),
            tofile=f"{path} (new)",
        )
    )


def _backup(path: Path) -> str | None:
    if not path.exists():
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    bak = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while bak.exists():
        bak = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        n += 1
    shutil.copy2(path, bak)
    return str(bak)


def _write(path: Path, old: str, new: str, dry_run: bool) -> dict:
    res: dict[str, Any] = {"file": str(path), "changed": old != new, "dryRun": dry_run, "backup": None}
    if old == new:
        return res
    res["diff"] = _diff(path, old, new)
    if dry_run:
        return res
    from ..store.fsutil import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    # The temp file of an atomic write is 0600: keep the mode the user gave the file.
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644 & ~_umask()
    res["backup"] = _backup(path)
    atomic_write_text(path, new)
    os.chmod(path, mode)
    return res


def _umask() -> int:
    cur = os.umask(0)
    os.umask(cur)
    return cur


# ---------------------------------------------------------------------------------------------- claude code
def _hooks_table(data: dict, path: Path) -> dict:
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


def merge_claude(data: dict, commands: dict[str, tuple[str, int]], path: Path) -> dict:
    """``data`` with our hook entries set (in place of any old ones), everything else untouched."""
    out = json.loads(json.dumps(data))
    hooks = _hooks_table(out, path)
    for event, (command, timeout) in commands.items():
        groups = _groups(hooks, event, path)
        entry = {"type": "command", "command": command, "timeout": timeout}
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
            new_groups.append({"matcher": "", "hooks": [entry]})
        hooks[event] = new_groups
    out["hooks"] = hooks
    return out


def strip_claude(data: dict, path: Path) -> tuple[dict, int]:
    """``data`` without our hook entries (and the identity install put in ``env``); (new data, number removed)."""
    out = json.loads(json.dumps(data))
    env = out.get("env")
    if isinstance(env, dict) and "HIVE_AGENT_CREDENTIAL" in env:
        for k in ("HIVE_AGENT_ID", "HIVE_AGENT_CREDENTIAL"):
            env.pop(k, None)
        if not env:
            del out["env"]
    if "hooks" not in out:
        return out, 0
    hooks = _hooks_table(out, path)
    removed = 0
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        new_groups = []
        for g in groups:
            if not isinstance(g, dict) or not isinstance(g.get("hooks"), list):
                new_groups.append(g)
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


def _dump(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def install_claude(
    settings: Any, *, project: bool = False, dry_run: bool = False, cwd: Path | None = None
) -> dict:
    path = claude_settings_path(project, cwd)
    data, raw = _read_json(path)
    vault = pinned_vault(settings)
    cred = agent_credential(settings, "claude-code", dry_run)
    commands = {ev: (hook_command(ours, "claude-code", vault, cred), t) for ev, ours, t in CLAUDE_EVENTS}
    new = merge_claude(data, commands, path)
    env = new.get("env")
    if env is None or isinstance(env, dict):
        # Claude Code passes `env` to its tools too: a `hive-brain` the agent runs from its Bash tool
        # is then claude-code with its credential, in enforcement mode as much as in the hooks.
        new["env"] = {**(env or {}), "HIVE_AGENT_ID": "claude-code", "HIVE_AGENT_CREDENTIAL": cred}
    new_raw = raw if new == data and raw else _dump(new)
    res = _write(path, raw, new_raw, dry_run)
    res.update(
        agent="claude-code",
        action="install",
        vault=vault,
        events={ev: c for ev, (c, _t) in commands.items()},
        credential=cred,
        hint="for the MCP tools too, run: claude mcp add hive-brain -e HIVE_AGENT_ID=claude-code "
        + f"-e HIVE_AGENT_CREDENTIAL={shlex.quote(cred)} -- "
        + " ".join(shlex.quote(x) for x in hive_brain_executable())
        + " mcp",
    )
    return res


def uninstall_claude(*, project: bool = False, dry_run: bool = False, cwd: Path | None = None) -> dict:
    path = claude_settings_path(project, cwd)
    data, raw = _read_json(path)
    new, removed = strip_claude(data, path)
    new_raw = _dump(new) if removed else raw
    res = _write(path, raw, new_raw, dry_run)
    res.update(agent="claude-code", action="uninstall", removed=removed)
    return res


def claude_installed(path: Path) -> dict:
    """Which of our hook events a Claude Code settings file holds (and with what command)."""
    out: dict[str, Any] = {"file": str(path), "exists": path.exists(), "events": {}}
    try:
        data, _ = _read_json(path)
        hooks = _hooks_table(data, path)
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
    return out


# ---------------------------------------------------------------------------------------------- codex
def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def codex_block(vault: str | None, credential: str | None = None) -> str:
    exe = hive_brain_executable()
    env = {"HIVE_AGENT_ID": "codex"}
    if credential:
        env["HIVE_AGENT_CREDENTIAL"] = credential
    if vault:
        env["HIVE_BRAIN_VAULT"] = vault
    env_s = ", ".join(f"{k} = {_toml_str(v)}" for k, v in env.items())
    args = [*exe[1:], "mcp"]
    return (
        "\n".join(
            [
                CODEX_BEGIN,
                "[mcp_servers.hive-brain]",
                f"command = {_toml_str(exe[0])}",
                f"args = [{', '.join(_toml_str(a) for a in args)}]",
                f"env = {{ {env_s} }}",
                CODEX_END,
            ]
        )
        + "\n"
    )


def _split_codex(raw: str) -> tuple[str, str | None, str]:
    """(before, our block or None, after)."""
    b = raw.find(CODEX_BEGIN)
    if b < 0:
        return raw, None, ""
    e = raw.find(CODEX_END, b)
    if e < 0:
        raise SettingsFileError(
            f"{codex_config_path()}: the hive-brain block has no end marker; nothing was changed",
            hint=f"restore the line {CODEX_END!r} or remove the block by hand",
        )
    e += len(CODEX_END)
    if raw[e : e + 1] == "\n":
        e += 1
    return raw[:b], raw[b:e], raw[e:]


def _parse_toml(raw: str, path: Path) -> dict:
    import tomllib

    try:
        return tomllib.loads(raw)
    except tomllib.TOMLDecodeError as e:
        raise SettingsFileError(
            f"{path} is not valid TOML ({e}); nothing was changed",
            hint="fix the file (or move it away) and run the command again",
        ) from e


def install_codex(settings: Any, *, dry_run: bool = False) -> dict:
    path = codex_config_path()
    try:
        raw = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as e:
        raise SettingsFileError(f"cannot read {path}: {e}") from e
    _parse_toml(raw, path)
    before, ours, after = _split_codex(raw)
    outside = _parse_toml(before + after, path)
    if "hive-brain" in (outside.get("mcp_servers") or {}):
        raise SettingsFileError(
            f"{path} already defines [mcp_servers.hive-brain] outside our block; nothing was changed",
            hint="remove that table (or keep it and skip this install)",
        )
    vault = pinned_vault(settings)
    block = codex_block(vault, agent_credential(settings, "codex", dry_run))
    if ours is not None:
        new = before + block + after
    else:
        sep = "" if not raw or raw.endswith("\n\n") else ("\n" if raw.endswith("\n") else "\n\n")
        new = raw + sep + block
    _parse_toml(new, path)  # never write a file Codex could not read
    res = _write(path, raw, new, dry_run)
    res.update(
        agent="codex",
        action="install",
        vault=vault,
        mcp_server="hive-brain",
        note="Codex gets memory through the MCP tools (core, recall, answer, remember, ...); "
        "its hook support is too limited for automatic injection.",
    )
    return res


def uninstall_codex(*, dry_run: bool = False) -> dict:
    path = codex_config_path()
    try:
        raw = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as e:
        raise SettingsFileError(f"cannot read {path}: {e}") from e
    before, ours, after = _split_codex(raw)
    if ours is None:
        res = _write(path, raw, raw, dry_run)
        res.update(agent="codex", action="uninstall", removed=0)
        return res
    new = before + after
    if not after.strip():
        # Undo the blank line install put in front of the block.
        new = before.rstrip("\n") + "\n" if before.strip() else ""
    res = _write(path, raw, new, dry_run)
    res.update(agent="codex", action="uninstall", removed=1)
    return res


def codex_installed() -> dict:
    path = codex_config_path()
    out: dict[str, Any] = {"file": str(path), "exists": path.exists(), "mcpServer": False}
    try:
        raw = path.read_text(encoding="utf-8") if path.exists() else ""
        _, ours, _ = _split_codex(raw)
    except (OSError, UnicodeDecodeError, SettingsFileError) as e:
        out["error"] = str(e)
        return out
    out["mcpServer"] = ours is not None
    return out


# ---------------------------------------------------------------------------------------------- front
def agent_credential(settings: Any, agent: str, dry_run: bool) -> str:
    """The path of ``agent``'s credential file, issued (or kept, when still valid) unless ``dry_run``."""
    from ..store import identity

    if dry_run:
        return str(identity.credential_path(settings.state_dir, agent))
    return str(identity.issue_agent_credential(settings.state_dir, agent))


def install(
    settings: Any, *, agent: str = "claude-code", project: bool = False, dry_run: bool = False
) -> dict:
    from ..memory.layers import require_owner

    # Installing issues an agent credential: in enforcement mode only the proved owner hands them out.
    require_owner(settings, "installing hooks (it issues agent credentials)")
    if agent == "claude-code":
        return install_claude(settings, project=project, dry_run=dry_run)
    if agent == "codex":
        if project:
            raise UsageError("--project is for Claude Code; Codex reads ~/.codex/config.toml only")
        return install_codex(settings, dry_run=dry_run)
    raise UsageError(f"unknown agent {agent!r}", hint=f"use one of {', '.join(AGENTS)}")


def uninstall(*, agent: str = "claude-code", project: bool = False, dry_run: bool = False) -> dict:
    if agent == "claude-code":
        return uninstall_claude(project=project, dry_run=dry_run)
    if agent == "codex":
        return uninstall_codex(dry_run=dry_run)
    raise UsageError(f"unknown agent {agent!r}", hint=f"use one of {', '.join(AGENTS)}")


def status(settings: Any, cwd: Path | None = None) -> dict:
    from .hooks import read_status

    st = read_status(Path(settings.state_dir))
    pending = None
    try:
        from ..memory.conversations import read_pending
        from ..store.vault import open_vault

        pending = len(read_pending(open_vault(settings).state))
    except HiveBrainError:
        pass  # no vault here: nothing can be queued for it either
    runs = st.get("runs") or []
    recent = runs[-20:]
    ms = sorted(r.get("durationMs", 0) for r in recent if r.get("event") == "prompt" and r.get("ok"))
    return {
        "claudeCode": {
            "user": claude_installed(claude_settings_path(False)),
            "project": claude_installed(claude_settings_path(True, cwd)),
        },
        "codex": codex_installed(),
        "statusFile": str(Path(settings.state_dir) / "hooks" / "status.json"),
        "last": st.get("last") or {},
        "lastError": st.get("lastError"),
        "pendingConversations": pending,
        "recent": {
            "runs": len(recent),
            "errors": sum(1 for r in recent if not r.get("ok")),
            "timeouts": sum(1 for r in recent if r.get("mode") == "timeout"),
            "promptMedianMs": ms[len(ms) // 2] if ms else None,
        },
    }
