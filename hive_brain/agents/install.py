"""Install, remove and inspect the agent integrations: Claude Code hooks, the Codex MCP entry, and
(through their own modules) Cursor, Gemini CLI, Cline and an ``AGENTS.md`` instructions block.

Settings files belong to the user: we merge our entries without touching anything else, recognise
our own entries on re-install (idempotent), back the file up before every write, refuse to write
over a file we cannot parse, and ``--dry-run`` shows the unified diff and writes nothing (the shared
rules live in :mod:`.settingsfile`).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import HiveBrainError, UsageError
from .grouped import grouped_installed, merge_grouped, strip_grouped
from .settingsfile import (
    SettingsFileError,
    agent_credential,
    dump_json,
    hive_brain_executable,
    hook_command,
    hook_env,
    is_ours,
    mcp_server_entry,
    pinned_state_dir,
    pinned_vault,
    read_json,
    read_text,
    remove,
    split_block,
    toml_str,
    uninstalled_json,
    vault_of_env,
    write,
)

if TYPE_CHECKING:
    from ..config import Settings

# The agents `hooks install --agent` knows, in the order `--help` lists them.
AGENTS = ("claude-code", "codex", "cursor", "gemini", "cline", "agents-md")
# Agents whose settings have a user and a project file (`--project/--user`).
PROJECT_AGENTS = ("claude-code", "cursor", "gemini", "cline")
# (Claude Code event, our hook event, timeout in seconds). The prompt hook keeps its own 1.5 s deadline.
CLAUDE_EVENTS: tuple[tuple[str, str, int], ...] = (
    ("UserPromptSubmit", "prompt", 5),
    ("SessionStart", "session-start", 10),
    ("Stop", "stop", 30),
    # `/exit` or Ctrl-D while the last turn's Stop hook still runs: Claude Code kills that hook (exit 1,
    # the turn not captured; half of the interactive runs in tests/test_agents_e2e.py) and then runs
    # SessionEnd, with this timeout as its budget (at most 60 s).
    ("SessionEnd", "session-end", 30),
)
CODEX_BEGIN = (
    "# >>> hive-brain (managed by `hive-brain hooks install --agent codex`; edit outside this block) >>>"
)
CODEX_END = "# <<< hive-brain <<<"

__all__ = ["AGENTS", "SettingsFileError", "install", "status", "uninstall"]


# ---------------------------------------------------------------------------------------------- paths
def claude_settings_path(project: bool, cwd: Path | None = None) -> Path:
    return (
        (cwd or Path.cwd()) / ".claude" / "settings.json"
        if project
        else Path.home() / ".claude" / "settings.json"
    )


def codex_config_path() -> Path:
    from .codex import codex_home

    return codex_home() / "config.toml"


# ---------------------------------------------------------------------------------------------- claude code
def install_claude(
    settings: Settings, *, project: bool = False, dry_run: bool = False, cwd: Path | None = None
) -> dict:
    path = claude_settings_path(project, cwd)
    data, raw = read_json(path)
    vault = pinned_vault(settings)
    cred = agent_credential(settings, "claude-code", dry_run)
    state = pinned_state_dir(settings)
    commands = {ev: (hook_command(ours, "claude-code", vault, cred, state_dir=state), t)
                for ev, ours, t in CLAUDE_EVENTS}
    new = merge_grouped(
        data, {ev: {"type": "command", "command": c, "timeout": t} for ev, (c, t) in commands.items()}, path
    )
    env = new.get("env")
    if env is None or isinstance(env, dict):
        # Claude Code passes `env` to its tools too: a `hive-brain` the agent runs from its Bash tool
        # is then claude-code with its credential, in enforcement mode as much as in the hooks.
        new["env"] = {**(env or {}), "HIVE_AGENT_ID": "claude-code", "HIVE_AGENT_CREDENTIAL": cred,
                      **({"HIVE_BRAIN_STATE_DIR": state} if state else {})}
    new_raw = raw if new == data and raw else dump_json(new, raw)
    res = write(path, raw, new_raw, dry_run)
    res.update(
        agent="claude-code",
        action="install",
        vault=vault,
        events={ev: c for ev, (c, _t) in commands.items()},
        credential=cred,
        hint="for the MCP tools too, run: " + claude_mcp_add(vault, cred, state),
    )
    return res


def claude_mcp_add(vault: str | None, cred: str | None, state: str | None) -> str:
    """The `claude mcp add` command registering `hive-brain mcp` with the environment the hooks pin:
    without the vault, a server Claude Code starts from elsewhere finds none (VaultNotFound)."""
    entry = mcp_server_entry("claude-code", vault, cred, state)
    env = "".join(f"-e {k}={shlex.quote(v)} " for k, v in entry["env"].items())
    return f"claude mcp add hive-brain {env}-- " + " ".join(shlex.quote(x) for x in [entry["command"], *entry["args"]])


def strip_claude(data: dict, path: Path) -> tuple[dict, int]:
    """``data`` without our hook entries (and the identity install put in ``env``); (new data, number removed)."""
    out = json.loads(json.dumps(data))
    env = out.get("env")
    if isinstance(env, dict) and "HIVE_AGENT_CREDENTIAL" in env:
        for k in ("HIVE_AGENT_ID", "HIVE_AGENT_CREDENTIAL", "HIVE_BRAIN_STATE_DIR"):
            env.pop(k, None)
        if not env:
            del out["env"]
    return strip_grouped(out, path)


def uninstall_claude(*, project: bool = False, dry_run: bool = False, cwd: Path | None = None) -> dict:
    path = claude_settings_path(project, cwd)
    data, raw = read_json(path)
    new, removed = strip_claude(data, path)
    res = write(path, raw, uninstalled_json(path, new, raw, removed), dry_run)
    res.update(agent="claude-code", action="uninstall", removed=removed)
    return res


# ---------------------------------------------------------------------------------------------- codex
_toml_str = toml_str


def codex_block(vault: str | None, credential: str | None = None, state_dir: str | None = None,
                trust: list[str] | None = None) -> str:
    exe = hive_brain_executable()
    env_s = ", ".join(f"{k} = {_toml_str(v)}" for k, v in hook_env("codex", vault, credential, state_dir).items())
    args = [*exe[1:], "mcp"]
    return (
        "\n".join(
            [
                CODEX_BEGIN,
                "[mcp_servers.hive-brain]",
                f"command = {_toml_str(exe[0])}",
                f"args = [{', '.join(_toml_str(a) for a in args)}]",
                f"env = {{ {env_s} }}",
                *(trust or []),
                CODEX_END,
            ]
        )
        + "\n"
    )


def _codex_foreign(block: str | None, hooks_data: Any) -> str:
    """The tables inside our block that we did not write. Codex writes its own settings into
    config.toml with a TOML editor that keeps a file's last comment last: a table it adds
    (``[tui] screen_reader_detection_done = true``, a trust it records for the user's own hook) lands
    between our last table and our end marker, and reinstall or uninstall dropped it with our block.
    Ours: ``[mcp_servers.hive-brain]`` and the ``[hooks.state."<file>:<label>:<group>:<handler>"]``
    trust of a hook whose command is hive-brain's (looked up in ``hooks_data`` as it was before the
    change); anything else, or a trust we cannot place, is someone else's and is kept."""
    import tomllib

    from .codex import EVENTS

    if not block:
        return ""
    events = {label: ev for ev, _o, _t, label in EVENTS}
    hooks: Any = hooks_data.get("hooks") if isinstance(hooks_data, dict) else None

    def ours(header: str) -> bool:
        if header == "[mcp_servers.hive-brain]":
            return True
        try:
            state = tomllib.loads(header + "\n").get("hooks", {}).get("state", {})
            (key,) = state
            _file, label, gi, hi = key.rsplit(":", 3)
            cmd = hooks[events[label]][int(gi)]["hooks"][int(hi)]["command"]
        except (tomllib.TOMLDecodeError, ValueError, KeyError, IndexError, TypeError, AttributeError):
            return False
        return is_ours(cmd)

    kept: list[str] = []
    keep = False
    for line in block.splitlines(keepends=True)[1:-1]:  # between our markers
        if line.lstrip().startswith("["):
            keep = not ours(line.strip())
        if keep:
            kept.append(line)
    text = "".join(kept)
    return text if not text or text.endswith("\n") else text + "\n"


def _parse_toml(raw: str, path: Path) -> dict:
    import tomllib

    try:
        return tomllib.loads(raw)
    except tomllib.TOMLDecodeError as e:
        raise SettingsFileError(
            f"{path} is not valid TOML ({e}); nothing was changed",
            hint="fix the file (or move it away) and run the command again",
        ) from e


def install_codex(settings: Settings, *, dry_run: bool = False) -> dict:
    from . import codex
    from .settingsfile import combine, put_block

    path = codex_config_path()
    raw = read_text(path)
    _parse_toml(raw, path)
    before, old_block, after = split_block(raw, CODEX_BEGIN, CODEX_END, path)
    outside = _parse_toml(before + after, path)
    if "hive-brain" in (outside.get("mcp_servers") or {}):
        raise SettingsFileError(
            f"{path} already defines [mcp_servers.hive-brain] outside our block; nothing was changed",
            hint="remove that table (or keep it and skip this install)",
        )
    hooks_file = codex.hooks_path()
    hooks_data, hooks_raw = read_json(hooks_file)
    vault = pinned_vault(settings)
    cred = agent_credential(settings, "codex", dry_run)
    state = pinned_state_dir(settings)
    entries = codex.entries(vault, cred, state)
    new_hooks = merge_grouped(hooks_data, entries, hooks_file, group={})
    commands = {ev: e["command"] for ev, e in entries.items()}
    block = codex_block(vault, cred, state, codex.trust_tables(new_hooks, hooks_file, commands))
    new = put_block(raw, block + _codex_foreign(old_block, hooks_data), CODEX_BEGIN, CODEX_END, path)
    _parse_toml(new, path)  # never write a file Codex could not read
    res = combine(
        [
            write(hooks_file, hooks_raw,
                  hooks_raw if new_hooks == hooks_data and hooks_raw else dump_json(new_hooks, hooks_raw), dry_run),
            write(path, raw, new, dry_run),
        ],
        agent="codex",
        action="install",
        vault=vault,
        events=commands,
        credential=cred,
        mcpServer="hive-brain",
        note="Codex runs the hooks it trusts: install records that trust for ours in config.toml "
        "(edit hooks.json and Codex asks again: run this install once more).",
    )
    return res


def uninstall_codex(*, dry_run: bool = False) -> dict:
    from . import codex
    from .settingsfile import combine, drop_block

    path = codex_config_path()
    raw = read_text(path)
    hooks_file = codex.hooks_path()
    hooks_data, hooks_raw = read_json(hooks_file)
    _b, old_block, _a = split_block(raw, CODEX_BEGIN, CODEX_END, path)
    new, removed = drop_block(raw, CODEX_BEGIN, CODEX_END, path, keep=_codex_foreign(old_block, hooks_data))
    new_hooks, n_hooks = strip_grouped(hooks_data, hooks_file)
    results = [
        remove(hooks_file, hooks_raw, dry_run) if n_hooks and not new_hooks
        else write(hooks_file, hooks_raw, uninstalled_json(hooks_file, new_hooks, hooks_raw, n_hooks), dry_run),
        write(path, raw, new, dry_run),
    ]
    return combine(results, agent="codex", action="uninstall", removed=removed + n_hooks)


def codex_installed() -> dict:
    path = codex_config_path()
    out: dict[str, Any] = {"file": str(path), "exists": path.exists(), "mcpServer": False}
    try:
        raw = read_text(path)
        _, ours, _ = split_block(raw, CODEX_BEGIN, CODEX_END, path)
    except SettingsFileError as e:
        out["error"] = str(e)
        return out
    out["mcpServer"] = ours is not None
    from .codex import hooks_path

    hooks = grouped_installed(hooks_path())
    out["hooksFile"] = hooks["file"]
    out["events"] = hooks["events"]
    if hooks.get("error"):
        out["error"] = hooks["error"]
    if ours is not None:
        try:
            entry = _parse_toml(ours, path).get("mcp_servers", {}).get("hive-brain", {})
        except SettingsFileError:
            entry = {}
        out["vault"] = vault_of_env(entry.get("env") if isinstance(entry, dict) else None)
    return out


# ---------------------------------------------------------------------------------------------- front
def install(
    settings: Settings,
    *,
    agent: str = "claude-code",
    project: bool = False,
    dry_run: bool = False,
    path: Path | None = None,
) -> dict:
    from ..memory.layers import require_owner

    _check_agent(agent, project, path)
    # Installing issues an agent credential: in enforcement mode only the proved owner hands them out.
    require_owner(settings, "installing hooks (it issues agent credentials)")
    if agent == "claude-code":
        return install_claude(settings, project=project, dry_run=dry_run)
    if agent == "codex":
        return install_codex(settings, dry_run=dry_run)
    if agent == "cursor":
        from .cursor import install_cursor

        return install_cursor(settings, project=project, dry_run=dry_run)
    if agent == "gemini":
        from .gemini import install_gemini

        return install_gemini(settings, project=project, dry_run=dry_run)
    if agent == "cline":
        from .cline import install_cline

        return install_cline(settings, project=project, dry_run=dry_run)
    from .agentsmd import install_agents_md

    return install_agents_md(settings, path=path, dry_run=dry_run)


def uninstall(
    *, agent: str = "claude-code", project: bool = False, dry_run: bool = False, path: Path | None = None
) -> dict:
    _check_agent(agent, project, path)
    if agent == "claude-code":
        return uninstall_claude(project=project, dry_run=dry_run)
    if agent == "codex":
        return uninstall_codex(dry_run=dry_run)
    if agent == "cursor":
        from .cursor import uninstall_cursor

        return uninstall_cursor(project=project, dry_run=dry_run)
    if agent == "gemini":
        from .gemini import uninstall_gemini

        return uninstall_gemini(project=project, dry_run=dry_run)
    if agent == "cline":
        from .cline import uninstall_cline

        return uninstall_cline(project=project, dry_run=dry_run)
    from .agentsmd import uninstall_agents_md

    return uninstall_agents_md(path=path, dry_run=dry_run)


SERVER_WAIT_S = 60.0
LEXICAL_NOTE = ("the first prompts get lexical memory only (no search by meaning) until the server is up; "
                "`hive-brain server status` shows when it is")


def server_for_hooks(settings: Settings, timeout: float = SERVER_WAIT_S) -> dict:
    """After an install: the warm server the hooks answer from, started and waited for (``timeout``
    seconds) so the very first session gets hybrid memory; or, when it is off or slow, a plain note
    that the first prompts will be lexical. Never fails the install."""
    from ..rpc import client
    from ..store.vault import open_vault

    if not (settings.autostart and settings.use_server):
        return {"serverStarted": False, "serverReady": False,
                "serverNote": "the server does not start by itself here (autostart is off): prompts get "
                              "lexical memory only unless `hive-brain serve` runs"}
    vault = open_vault(settings)
    started = client.autostart(settings)
    if timeout <= 0:
        return {"serverStarted": started, "serverReady": client.server_ready(vault.state),
                "serverNote": None if client.server_ready(vault.state) else LEXICAL_NOTE}
    try:
        client.wait_ready(vault.state, timeout)
    except HiveBrainError as e:
        return {"serverStarted": started, "serverReady": False, "serverNote": f"{LEXICAL_NOTE} ({e.message})"}
    return {"serverStarted": started, "serverReady": True, "serverNote": None}


def _check_agent(agent: str, project: bool, path: Path | None) -> None:
    if agent not in AGENTS:
        raise UsageError(f"unknown agent {agent!r}", hint=f"use one of {', '.join(AGENTS)}")
    if project and agent not in PROJECT_AGENTS:
        raise UsageError(
            f"--project is not for {agent}",
            hint=f"it picks the project settings file of {', '.join(PROJECT_AGENTS)}"
            + ("; use --path DIR for agents-md" if agent == "agents-md" else ""),
        )
    if path is not None and agent != "agents-md":
        raise UsageError("--path is for --agent agents-md", hint="drop --path, or use --project for a project file")


def status(settings: Settings, cwd: Path | None = None) -> dict:
    from .agentsmd import agents_md_installed
    from .cline import cline_installed
    from .cursor import cursor_installed
    from .gemini import gemini_installed
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
            "user": grouped_installed(claude_settings_path(False)),
            "project": grouped_installed(claude_settings_path(True, cwd)),
        },
        "codex": codex_installed(),
        "cursor": {"user": cursor_installed(False, cwd), "project": cursor_installed(True, cwd)},
        "gemini": {"user": gemini_installed(False, cwd), "project": gemini_installed(True, cwd)},
        "cline": {"user": cline_installed(False, cwd), "project": cline_installed(True, cwd)},
        "agentsMd": agents_md_installed(cwd),
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


def installed_vaults(st: dict) -> list[dict]:
    """Every installed integration in a ``status`` result with the vault it uses: one row each
    (``doctor`` and ``hooks status`` print them; ``exists: false`` is a hook that fails every run)."""
    rows: list[dict] = []

    def add(agent: str, where: str, entry: dict, vault: dict | None) -> None:
        if vault is not None:
            rows.append({"agent": agent, "where": where, "file": entry["file"], "vault": vault})

    for key, agent in (("claudeCode", "claude-code"), ("cursor", "cursor"), ("gemini", "gemini"), ("cline", "cline")):
        for where in ("user", "project"):
            e = st[key][where]
            # All events of one install carry one command prefix: the first names the vault.
            add(agent, where, e, next(iter(e.get("vaults", {}).values()), None))
            if e.get("mcp"):
                add(agent, f"{where} mcp", e["mcp"], e["mcp"].get("vault"))
    add("codex", "user", st["codex"], st["codex"].get("vault"))
    add("agents-md", "project", st["agentsMd"], st["agentsMd"].get("vault"))
    return rows


def hook_vaults(settings: Settings, cwd: Path | None = None) -> list[dict]:
    """For ``doctor``: each installed integration and its vault (see :func:`installed_vaults`)."""
    return installed_vaults(status(settings, cwd))
