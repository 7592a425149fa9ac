"""Agents' settings files, read and written the careful way every installer shares.

Settings files belong to the user: a file we cannot parse is refused (never overwritten), every
write is backed up first and keeps the file's mode, ``--dry-run`` gives the unified diff and writes
nothing, and a JSON file keeps the indentation it had. Also here: how an installed entry starts
hive-brain (the command line, the pinned vault, the agent credential) and which vault an installed
entry will use, for ``hooks status`` and ``doctor``.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    from ..config import Settings

_OURS = re.compile(r"hive[-_]brain.*(?:\s|-)hook\s+(?:prompt|session-start|stop|session-end)\b")


class SettingsFileError(UsageError):
    """An agent settings file exists but cannot be read safely; we never overwrite it."""


def is_ours(command: Any) -> bool:
    """Whether a hook command is one hive-brain installed (any event, any agent, any install path)."""
    return isinstance(command, str) and bool(_OURS.search(command))


# ---------------------------------------------------------------------------------------------- commands
def hive_brain_executable() -> list[str]:
    """How to start this installation's ``hive-brain``: the script next to this Python, else on PATH."""
    sibling = Path(sys.executable).parent / "hive-brain"
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return [str(sibling)]
    found = shutil.which("hive-brain")
    if found:
        return [str(Path(found).resolve())]
    return [sys.executable, "-m", "hive_brain"]


def pinned_vault(settings: Settings) -> str | None:
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


def pinned_state_dir(settings: Settings) -> str | None:
    """The state dir to pin in an installed command, or None for the default (or the config file's,
    which every process reads anyway). An agent started without this ``HIVE_BRAIN_STATE_DIR`` would
    otherwise build a second, empty index and miss the credential install issued."""
    from ..config import default

    if str(settings.sources.get("state_dir", "")).startswith("config:"):
        return None
    state = Path(settings.state_dir).expanduser()
    if state.resolve() == Path(default("state_dir")).expanduser().resolve():
        return None
    return str(state)


def agent_credential(settings: Settings, agent: str, dry_run: bool) -> str:
    """The path of ``agent``'s credential file, issued (or kept, when still valid) unless ``dry_run``."""
    from ..store import identity

    if dry_run:
        return str(identity.credential_path(settings.state_dir, agent))
    return str(identity.issue_agent_credential(settings.state_dir, agent))


def hook_env(agent: str, vault: str | None, credential: str | None = None,
             state_dir: str | None = None) -> dict[str, str]:
    """The environment an installed entry starts hive-brain with (identity, credential, pinned vault
    and state dir)."""
    env = {"HIVE_AGENT_ID": agent}
    if credential:
        env["HIVE_AGENT_CREDENTIAL"] = credential
    if vault:
        env["HIVE_BRAIN_VAULT"] = vault
    if state_dir:
        env["HIVE_BRAIN_STATE_DIR"] = state_dir
    return env


def hook_executable() -> list[str]:
    """How an installed hook starts: this Python with ``-S`` on the hook entry's file
    (:mod:`.hookentry` says why), else the ``hive-brain`` command. ``sys.executable`` is kept as it is,
    not resolved: a venv's ``python`` is a link, and ``site`` finds the venv through that path."""
    from . import hookentry

    entry = Path(hookentry.__file__)
    if sys.executable and os.access(sys.executable, os.X_OK) and entry.is_file():
        return [sys.executable, "-S", str(entry.resolve())]
    return hive_brain_executable()


def hook_command(
    event: str, agent: str, vault: str | None, credential: str | None = None, extra: tuple[str, ...] = (),
    state_dir: str | None = None,
) -> str:
    """The shell command line of one hook: ``VAR=... <python> -S <...>/hookentry.py hook <event> [extra...]``."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in hook_env(agent, vault, credential, state_dir).items())
    exe = " ".join(shlex.quote(x) for x in [*hook_executable(), "hook", event, *extra])
    return f"{env} {exe}"


def toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def mcp_server_entry(agent: str, vault: str | None, credential: str | None,
                     state_dir: str | None = None) -> dict[str, Any]:
    """The ``mcpServers`` entry (command, args, env) the JSON-configured agents share."""
    exe = hive_brain_executable()
    return {"command": exe[0], "args": [*exe[1:], "mcp"], "env": hook_env(agent, vault, credential, state_dir)}


# ---------------------------------------------------------------------------------------------- which vault
def vault_of_env(env: dict[str, Any] | None) -> dict[str, Any]:
    """Which vault an installed entry uses: the pinned ``HIVE_BRAIN_VAULT``, else the config file's.

    ``exists`` is False when that vault is gone (moved, deleted, never created): the entry then fails
    on every run, so ``hooks status`` and ``doctor`` flag it.
    """
    from ..config import config_file
    from ..store.vault import MARKER_DIR, MARKER_FILE

    pinned = (env or {}).get("HIVE_BRAIN_VAULT")
    if isinstance(pinned, str) and pinned:
        path: str | None = pinned
        source = "pinned"
    else:
        cfg = config_file()
        source = f"config file: {cfg}"
        path = _config_vault(cfg)
    exists = bool(path) and (Path(os.path.expanduser(str(path))) / MARKER_DIR / MARKER_FILE).is_file()
    return {"path": path, "source": source, "exists": exists}


def _config_vault(cfg: Path) -> str | None:
    import tomllib

    try:
        value = tomllib.loads(cfg.read_text(encoding="utf-8")).get("vault")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return str(value) if value else None


def command_env(command: str) -> dict[str, str]:
    """The ``VAR=value`` assignments in front of a shell command line (how our hooks pin a vault)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return {}
    env: dict[str, str] = {}
    for w in words:
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", w, flags=re.S)
        if not m:
            break
        env[m.group(1)] = m.group(2)
    return env


def describe_vault(v: dict[str, Any] | None) -> str:
    """One line for a human: ``vault /x (pinned)`` / ``vault /x (config file: ...)`` / ``MISSING``."""
    if not v:
        return ""
    where = "pinned" if v["source"] == "pinned" else v["source"]
    if not v["path"]:
        return f"no vault ({where} sets none)"
    return f"vault {v['path']} ({where})" + ("" if v["exists"] else " - DOES NOT EXIST")


# ---------------------------------------------------------------------------------------------- files
def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as e:
        raise SettingsFileError(f"cannot read {path}: {e}", hint="fix its permissions or encoding") from e


def read_json(path: Path) -> tuple[dict, str]:
    """(the JSON object, the raw text); ``({}, "")`` for a missing file; refuses anything else."""
    raw = read_text(path)
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


def dump_json(data: dict, like: str = "") -> str:
    """``data`` as JSON, indented the way ``like`` (the file's old text) was, else by 2 spaces, and
    with ``like``'s own text kept for every value that did not change (:mod:`.jsonedit`)."""
    from .jsonedit import dump_like

    m = re.search(r"\n([ \t]+)\S", like)
    indent: int | str = 2
    if m:
        ws = m.group(1)
        indent = len(ws) if set(ws) == {" "} else ws
    return dump_like(data, like, indent)


def diff(path: Path, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=str(path),
            tofile=f"{path} (new)",
        )
    )


BACKUP_SUFFIX = ".bak-hive-brain"
_MENTIONS_US = re.compile(r"hive[-_]brain")


def backup_path(path: Path) -> Path:
    """The one backup a settings file gets (never one per write: they would pile up for good)."""
    return path.with_name(path.name + BACKUP_SUFFIX)


def backup(path: Path, old: str) -> str | None:
    """Copy ``path`` (now holding ``old``) to its backup before we write it, mode kept.

    The backup is the user's file before hive-brain was in it: a file without a trace of us
    replaces an older backup, while one that already holds our entries only makes a backup when
    there is none, so a re-install or an uninstall keeps the pre-install bytes there.
    """
    if not path.exists():
        return None
    bak = backup_path(path)
    if bak.exists() and _MENTIONS_US.search(old):
        return str(bak)
    shutil.copy2(path, bak)
    return str(bak)


def pre_install_text(path: Path, data: Any) -> str | None:
    """The backup's text when it holds exactly ``data`` (what uninstall leaves) and nothing of ours:
    uninstall then gives back the very bytes the user had, not an equal reformatting of them."""
    bak = backup_path(path)
    try:
        text = bak.read_text(encoding="utf-8")
        if _MENTIONS_US.search(text) or json.loads(text) != data:
            return None
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return text


def uninstalled_json(path: Path, data: dict, raw: str, removed: int) -> str:
    """The text of a JSON settings file after uninstall: ``raw`` when nothing of ours was there, the
    pre-install bytes when nothing else changed since, else ``raw`` with only our values taken out."""
    if not removed:
        return raw
    return pre_install_text(path, data) or dump_json(data, raw)


def write(path: Path, old: str, new: str, dry_run: bool) -> dict:
    """Write ``new`` over ``old`` (backup first, mode kept); the result every installer reports."""
    res: dict[str, Any] = {"file": str(path), "changed": old != new, "dryRun": dry_run, "backup": None}
    if old == new:
        return res
    res["diff"] = diff(path, old, new)
    if dry_run:
        return res
    from ..store.fsutil import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    # The temp file of an atomic write is 0600: keep the mode the user gave the file.
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644 & ~umask()
    res["backup"] = backup(path, old)
    atomic_write_text(path, new)
    os.chmod(path, mode)
    return res


def remove(path: Path, old: str, dry_run: bool) -> dict:
    """Delete a file that held nothing but our entries (install created it): no empty file is left."""
    res: dict[str, Any] = {"file": str(path), "changed": True, "dryRun": dry_run, "backup": None,
                           "diff": diff(path, old, ""), "deleted": True}
    if not dry_run:
        path.unlink()
    return res


def umask() -> int:
    """The process umask (read without changing it for good)."""
    cur = os.umask(0)
    os.umask(cur)
    return cur


def combine(results: list[dict], **extra: Any) -> dict:
    """One result for an install that touched several files (hooks file + MCP file)."""
    head = dict(results[0])
    head["changed"] = any(r["changed"] for r in results)
    head["files"] = results
    head["diff"] = "".join(r.get("diff") or "" for r in results) or None
    head["backup"] = next((r["backup"] for r in results if r.get("backup")), None)
    head.update(extra)
    return head


# ---------------------------------------------------------------------------------------------- marked blocks
def split_block(raw: str, begin: str, end: str, path: Path) -> tuple[str, str | None, str]:
    """(text before, our managed block or None, text after) of a file with a marked block."""
    b = raw.find(begin)
    if b < 0:
        return raw, None, ""
    e = raw.find(end, b)
    if e < 0:
        raise SettingsFileError(
            f"{path}: the hive-brain block has no end marker; nothing was changed",
            hint=f"restore the line {end!r} or remove the block by hand",
        )
    e += len(end)
    if raw[e : e + 1] == "\n":
        e += 1
    return raw[:b], raw[b:e], raw[e:]


def put_block(raw: str, block: str, begin: str, end: str, path: Path) -> str:
    """``raw`` with ``block`` in place of the old one, or appended after a blank line."""
    before, ours, after = split_block(raw, begin, end, path)
    if ours is not None:
        return before + block + after
    sep = "" if not raw or raw.endswith("\n\n") else ("\n" if raw.endswith("\n") else "\n\n")
    return raw + sep + block


def drop_block(raw: str, begin: str, end: str, path: Path, *, keep: str = "") -> tuple[str, int]:
    """``raw`` without our block (and the blank line install put before it); (text, blocks removed).
    ``keep``: what another writer put inside the block, left where the block was."""
    before, ours, after = split_block(raw, begin, end, path)
    if ours is None:
        return raw, 0
    if keep:
        return before + keep + after, 1
    if not after.strip():
        return (before.rstrip("\n") + "\n" if before.strip() else ""), 1
    if before.endswith("\n\n") and after.startswith("\n"):
        before = before[:-1]  # the blank line install put in front, now doubled by the one after
    return before + after, 1
