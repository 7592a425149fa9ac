"""Settings, resolved in one place: flags > ``HIVE_BRAIN_*`` env > config file > defaults.

Kept import-light: the prompt hook imports this module, and its fast path (:mod:`.agents.quick`) reads
settings through :func:`values` without ``pathlib``, ``re`` or ``tomllib`` being imported (each is a
few ms of a process that should cost the interpreter and the server's answer).
"""

from __future__ import annotations

import os
import sys

from .errors import InvalidAgentId, UsageError

TYPE_CHECKING = False  # typing for the type checker only: the prompt hook's process imports this module
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping
    from pathlib import Path
    from typing import Any

APP = "hive-brain"

# Hand-written rather than platformdirs: these three paths are all we need, they must not move for
# existing users, and importing platformdirs (it pulls in tempfile, shutil, random) cost ~5 ms of
# every prompt-hook process when measured.  tests/test_config_paths.py pins the Linux layout.


def _home_dir(xdg: str, default: str, mac: str) -> str:
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        return os.path.join(home, "Library", mac, APP)
    return os.path.join(os.environ.get(xdg) or os.path.join(home, default), APP)


def data_dir() -> str:
    """Where per-vault state lives by default (``HIVE_BRAIN_STATE_DIR`` moves it)."""
    return _home_dir("XDG_DATA_HOME", os.path.join(".local", "share"), "Application Support")


def _user_data_dir() -> Path:
    from pathlib import Path

    return Path(data_dir())


def _user_config_dir() -> Path:
    from pathlib import Path

    return Path(_home_dir("XDG_CONFIG_HOME", ".config", "Application Support"))


def user_cache_dir() -> Path:
    from pathlib import Path

    return Path(_home_dir("XDG_CACHE_HOME", ".cache", "Caches"))


class Settings:
    """Every setting, resolved by :func:`resolve`. A plain class, not a dataclass: the prompt hook
    resolves settings in every process, and ``dataclasses`` (with ``inspect``, ``ast``, ``dis`` and
    ``tokenize`` behind it) was the largest import of the hook's process. ``_FIELDS`` lists the
    settings in order with their kind and default."""

    vault: Path | None
    state_dir: Path
    model_dir: Path
    # The embedding pack that answers (its id under model_dir); "" = the default pack.
    embedding_pack: str
    # Where `model install --download` fetches a model from (a Hugging Face-style hub).
    hub_endpoint: str
    agent_id: str | None
    lock_timeout: float
    hook_deadline: float
    hook_budget_chars: int
    scoped_permissions: bool
    semantic: bool
    use_server: bool
    # Start the vault's server in the background when a session starts, hooks are installed, or a
    # recall had to work in-process: the warm server is what makes recall hybrid and fast.
    autostart: bool
    max_note_bytes: int
    # Memory types a write accepts besides the built-in ones (memory/model.py), comma-separated.
    memory_types: str
    # How often the server runs the promotion pass (Brain Review proposals only; 0 = never).
    promotion_every_s: float
    # Seconds without a request after which the server exits (0 = never): any prompt starts it again.
    # Set as "2h", "30m", "90s" or a number of hours; "off" or 0 turns it off.
    idle_exit: float
    # Seconds a transcript file of an installed agent must go untouched before the server captures
    # it (the net under the end-of-session hooks; memory/conversations.capture_quiet). "2m", "90s";
    # "off" or 0 turns it off.
    transcript_quiet: float
    # Proofs of identity (enforcement mode; store/identity.py): file paths, from the environment or a
    # flag only, never the config file (which every process, agents included, reads).
    agent_credential: Path | None
    owner_key: Path | None
    # Derived by store.identity.establish, never set by the user:
    owner_verified: bool
    auth: dict[str, str]  # what a server request carries
    sources: dict[str, str]

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - set(_FIELDS)
        if unknown:
            raise TypeError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        for name, (_kind, default) in _FIELDS.items():
            setattr(self, name, values[name] if name in values else default())

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (as ``dataclasses.replace`` did)."""
        return Settings(**{**self.__dict__, **changes})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Settings) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it was

    def __repr__(self) -> str:
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items()) + ")"


_FIELDS: dict[str, tuple[str, Callable[[], Any]]] = {
    "vault": ("path", lambda: None),
    "state_dir": ("path", _user_data_dir),
    "model_dir": ("path", lambda: user_cache_dir() / "models"),
    "embedding_pack": ("str", lambda: ""),
    "hub_endpoint": ("str", lambda: "https://huggingface.co"),
    "agent_id": ("str", lambda: None),
    "lock_timeout": ("float", lambda: 30.0),
    "hook_deadline": ("float", lambda: 1.5),
    "hook_budget_chars": ("int", lambda: 8000),
    "scoped_permissions": ("bool", lambda: False),
    "semantic": ("bool", lambda: True),
    "use_server": ("bool", lambda: True),
    "autostart": ("bool", lambda: True),
    "max_note_bytes": ("int", lambda: 5 * 1024 * 1024),
    "memory_types": ("str", lambda: ""),
    "promotion_every_s": ("float", lambda: 86400.0),
    "idle_exit": ("duration", lambda: 0.0),
    "transcript_quiet": ("duration", lambda: 120.0),
    "agent_credential": ("path", lambda: None),
    "owner_key": ("path", lambda: None),
    "owner_verified": ("bool", lambda: False),
    "auth": ("dict", dict),
    "sources": ("dict", dict),
}


# Not settable from the config file: proofs of identity and what is derived from them.
_NOT_FROM_CONFIG = frozenset({"sources", "agent_credential", "owner_key", "owner_verified", "auth"})


_ENV = {
    "vault": "HIVE_BRAIN_VAULT",
    "state_dir": "HIVE_BRAIN_STATE_DIR",
    "model_dir": "HIVE_BRAIN_MODEL_DIR",
    "embedding_pack": "HIVE_BRAIN_EMBEDDING_PACK",
    "hub_endpoint": "HIVE_BRAIN_HUB_ENDPOINT",
    "agent_id": "HIVE_AGENT_ID",
    "lock_timeout": "HIVE_BRAIN_LOCK_TIMEOUT",
    "hook_deadline": "HIVE_BRAIN_HOOK_DEADLINE",
    "hook_budget_chars": "HIVE_BRAIN_HOOK_BUDGET",
    "scoped_permissions": "HIVE_BRAIN_AGENT_SCOPED_PERMISSIONS",
    "semantic": "HIVE_BRAIN_SEMANTIC",
    "use_server": "HIVE_BRAIN_USE_SERVER",
    "autostart": "HIVE_BRAIN_AUTOSTART",
    "max_note_bytes": "HIVE_BRAIN_MAX_NOTE_BYTES",
    "memory_types": "HIVE_BRAIN_MEMORY_TYPES",
    "promotion_every_s": "HIVE_BRAIN_PROMOTION_EVERY",
    "idle_exit": "HIVE_BRAIN_IDLE_EXIT",
    "transcript_quiet": "HIVE_BRAIN_TRANSCRIPT_QUIET",
    "agent_credential": "HIVE_AGENT_CREDENTIAL",
    "owner_key": "HIVE_BRAIN_OWNER_KEY",
}


def config_path() -> str:
    return os.environ.get("HIVE_BRAIN_CONFIG") or os.path.join(
        _home_dir("XDG_CONFIG_HOME", ".config", "Application Support"), "config.toml")


def config_file() -> Path:
    from pathlib import Path

    return Path(config_path())


def _coerce(name: str, value: Any, *, paths: bool = True) -> Any:
    """``value`` as setting ``name`` holds it; a path as a ``Path``, or (``paths=False``) the expanded
    string :func:`values` returns."""
    kind = _FIELDS[name][0]
    try:
        if kind == "path":
            if value in (None, ""):
                return None
            if not paths:
                return os.path.expanduser(str(value))
            from pathlib import Path

            return Path(os.path.expanduser(str(value)))
        if kind == "bool":
            if isinstance(value, bool):
                return value
            return str(value).strip().lower() in ("1", "true", "yes", "on")
        if kind == "float":
            return float(value)
        if kind == "duration":
            return duration_seconds(value)
        if kind == "int":
            return int(value)
    except (TypeError, ValueError) as e:
        raise UsageError(f"setting {name!r} has an invalid value {value!r}", hint="fix the env var or config file") from e
    return value


_UNITS = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def duration_seconds(value: Any) -> float:
    """A duration setting in seconds: "2h", "30m", "90s", "1d", or a bare number of hours; "off",
    false and 0 are 0 (off). ValueError for anything else, or a negative one."""
    if isinstance(value, bool):
        if value:
            raise ValueError("a duration, not true")
        return 0.0
    if isinstance(value, int | float):
        secs = float(value) * 3600.0
    else:
        text = str(value).strip().lower()
        if text in ("off", "false", "no", "never", ""):
            return 0.0
        unit = next((u for u in sorted(_UNITS, key=len, reverse=True) if text.endswith(u)), None)
        secs = float(text[: -len(unit)].strip()) * _UNITS[unit] if unit else float(text) * 3600.0
    if not secs >= 0 or secs == float("inf"):
        raise ValueError("a duration must be 0 or more")
    return secs


def values(names: Collection[str] | None = None, **flags: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The settings given by flags (None = not given), env or the config file, in that order, coerced
    (paths as expanded strings), and where each came from; defaults are not applied. ``names``: only
    these (all by default). :func:`resolve` builds ``Settings`` on this; the prompt hook's fast path
    reads the few it needs without building them."""
    want = set(_FIELDS) if names is None else set(names)
    out: dict[str, Any] = {}
    sources: dict[str, str] = {}
    path = config_path()
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"config file {path} is not readable: {e}", hint="fix or remove it") from e
        data = _simple_toml(text)
        if data is None:
            import tomllib

            try:
                data = tomllib.loads(text)
            except tomllib.TOMLDecodeError as e:
                raise UsageError(f"config file {path} is not valid TOML: {e}", hint="fix or remove it") from e
        for k, v in data.items():
            k = k.replace("-", "_")
            if k in want and k in _FIELDS and k not in _NOT_FROM_CONFIG:
                out[k] = _coerce(k, v, paths=False)
                sources[k] = f"config:{path}"
    for k, env in _ENV.items():
        if k in want and env in os.environ:
            out[k] = _coerce(k, os.environ[env], paths=False)
            sources[k] = f"env:{env}"
    for k, v in flags.items():
        if v is not None and k in want:
            out[k] = _coerce(k, v, paths=False)
            sources[k] = "flag"
    return out, sources


def default(name: str) -> Any:
    """Setting ``name``'s default (the prompt hook's fast path reads a few without building Settings)."""
    return _FIELDS[name][1]()


def resolve(**flags: Any) -> Settings:
    """Build settings from flags (None = not given), env, the config file and defaults."""
    from pathlib import Path

    s = Settings()
    got, sources = values(None, **flags)
    for k, v in got.items():
        setattr(s, k, Path(v) if _FIELDS[k][0] == "path" and v is not None else v)
    s.sources.update(sources)
    if s.state_dir is None:
        s.state_dir = _user_data_dir()
    if s.model_dir is None:
        s.model_dir = user_cache_dir() / "models"
    if "agent_id" in s.sources:
        s.agent_id = validate_agent_id(s.agent_id)
    return s


# ---------------------------------------------------------------------------------------------- the file
_BARE_KEY = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_DIGITS = frozenset("0123456789")


def _control(text: str, *, tab: bool) -> bool:
    """TOML allows no control characters in strings and comments (a tab only where ``tab``)."""
    return any((c < " " and not (tab and c == "\t")) or c == "\x7f" for c in text)


def _number(text: str) -> int | float | None:
    """A plain TOML integer or decimal (``-3``, ``+8000``, ``2.5``), or None for any other form."""
    body = text[1:] if text[:1] in ("+", "-") else text
    whole, dot, frac = body.partition(".")
    if not whole or not set(whole) <= _DIGITS or (len(whole) > 1 and whole[0] == "0"):
        return None
    if dot:
        return float(text) if frac and set(frac) <= _DIGITS else None
    return int(text)


def _simple_value(raw: str) -> tuple[bool, Any]:
    """(True, value) for the value part of a line ``config set`` could have written (a comment may
    follow), (False, None) for anything else."""
    v = raw.strip(" \t")
    if v[:1] in ('"', "'"):
        end = v.find(v[0], 1)
        body, rest = v[1:end], v[end + 1:].strip(" \t")
        if end < 0 or (v[0] == '"' and ("\\" in body or _control(body, tab=False))) or _control(body, tab=True):
            return False, None
        value: Any = body
    else:
        cut = v.find("#")
        value_text = (v if cut < 0 else v[:cut]).rstrip(" \t")
        rest = "" if cut < 0 else v[cut:]
        if value_text in ("true", "false"):
            value = value_text == "true"
        elif (value := _number(value_text)) is None:
            return False, None
    if rest and not (rest[0] == "#" and not _control(rest, tab=True)):
        return False, None
    return True, value


def _simple_toml(text: str) -> dict[str, Any] | None:
    """The config file as ``tomllib`` reads it, when it holds only what ``config set`` writes: top-level
    ``key = value`` lines (a string without escapes, true/false, a plain integer or decimal), comments
    and blank lines. None for anything else (tables, escapes, dates, a repeated key ...), which
    ``tomllib`` then reads. Every process resolves settings, the prompt hook's too, and ``tomllib``
    (with ``typing`` behind it) was the largest import left on that path; written without ``re`` for
    the same reason (tests/test_config_paths.py checks it against tomllib)."""
    out: dict[str, Any] = {}
    lines = text.split("\n")
    for i, line in enumerate(lines):
        # CRLF ends a line; a CR anywhere else (the end of the file too) is left to tomllib, which refuses it
        if line.endswith("\r") and i < len(lines) - 1:
            line = line[:-1]
        stripped = line.strip(" \t")
        if not stripped:
            continue
        if stripped[0] == "#":
            if _control(stripped, tab=True):
                return None
            continue
        key, eq, raw = line.partition("=")
        key = key.strip(" \t")
        if not eq or not key or not set(key) <= _BARE_KEY or key in out:
            return None  # not a simple line, or a repeated key: tomllib says why
        ok, value = _simple_value(raw)
        if not ok:
            return None
        out[key] = value
    return out


def settable() -> list[str]:
    """The settings ``hive-brain config set`` accepts (proofs of identity never live in the file)."""
    return [k for k in _FIELDS if k not in _NOT_FROM_CONFIG]


def check_key(key: str) -> str:
    k = key.replace("-", "_")
    if k not in settable():
        raise UsageError(f"unknown setting {key!r}", hint="one of: " + ", ".join(settable()))
    return k


def _toml_value(k: str, value: Any) -> str:
    import json
    from pathlib import Path

    v = _coerce(k, value)
    if _FIELDS[k][0] == "duration":
        return json.dumps(str(value).strip())  # as the user wrote it ("2h"); checked just above
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, Path):
        v = str(v.expanduser().resolve())  # a vault set from one folder must mean the same from any other
    return json.dumps(str(v), ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _key_of(line: str) -> str | None:
    head = line.split("=", 1)[0].strip() if "=" in line and not line.lstrip().startswith("#") else ""
    return head.replace("-", "_") if head and " " not in head and not head.startswith("[") else None


def set_in_file(key: str, value: Any | None) -> Path:
    """Set (``value`` not None) or remove one top-level setting in the config file, keeping the user's
    other lines and comments; the result must still parse. Returns the file's path."""
    import tomllib

    k = check_key(key)
    path = config_file()
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    kept = [ln for ln in lines if _key_of(ln) != k]
    if value is not None:
        # Top-level keys must come before the first [table]: insert there.
        at = next((i for i, ln in enumerate(kept) if ln.lstrip().startswith("[")), len(kept))
        kept.insert(at, f"{k} = {_toml_value(k, value)}")
    text = "\n".join(kept) + "\n"
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path} would not be valid TOML ({e}); nothing was changed", hint="fix the file by hand") from e
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)  # a reader never sees half a file
    return path


def agent_from_environment(environ: Mapping[str, str]) -> str | None:
    """The agent whose tool is running us when no id is given: inside Claude Code's Bash tool
    (``CLAUDECODE=1``) that is ``claude-code``, inside Codex's sandboxed shell ``codex``. Never the
    owner: a process an agent started is the agent's. (``CODEX_HOME`` is not a sign: users set it.)
    Here, not in store/identity.py, so that the thin client (cli/thin.py) reads it without that module's imports."""
    if environ.get("CLAUDECODE", "").strip() not in ("", "0"):
        return "claude-code"
    if environ.get("CODEX_SANDBOX") or environ.get("CODEX_SANDBOX_NETWORK_DISABLED"):
        return "codex"
    return None


def validate_agent_id(agent_id: str | None) -> str:
    """An agent id that was given must be real: empty or odd ids never mean "everyone"."""
    if agent_id is None or not str(agent_id).strip():
        raise InvalidAgentId(
            "agent id is empty", hint="set HIVE_AGENT_ID to a name like 'claude-code', or unset it"
        )
    a = str(agent_id).strip()
    # [A-Za-z0-9][A-Za-z0-9._-]{0,63}, checked by hand: the prompt hook's process does not import re
    if not (a.isascii() and a[0].isalnum() and len(a) <= 64 and set(a) <= _AGENT_CHARS) or ".." in a:
        raise InvalidAgentId(
            f"agent id {a!r} is malformed", hint="use letters, digits, '.', '_' or '-' (at most 64 characters)"
        )
    return a


_AGENT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
