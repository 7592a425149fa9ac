"""Settings, resolved in one place: flags > ``HIVE_BRAIN_*`` env > config file > defaults.

Kept import-light: the prompt hook imports this module.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from .errors import InvalidAgentId, UsageError

TYPE_CHECKING = False  # typing for the type checker only: the prompt hook's process imports this module
if TYPE_CHECKING:
    from typing import Any

APP = "hive-brain"

# Hand-written rather than platformdirs: these three paths are all we need, they must not move for
# existing users, and importing platformdirs (it pulls in tempfile, shutil, random) cost ~5 ms of
# every prompt-hook process when measured.  tests/test_config_paths.py pins the Linux layout.


def _user_data_dir() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / APP
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / APP


def _user_config_dir() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / APP
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / APP


def user_cache_dir() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / APP
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / APP


class Settings:
    """Every setting, resolved by :func:`resolve`. A plain class, not a dataclass: the prompt hook
    resolves settings in every process, and ``dataclasses`` (with ``inspect``, ``ast``, ``dis`` and
    ``tokenize`` behind it) was the largest import of the hook's process. ``_FIELDS`` lists the
    settings in order with their kind and default."""

    vault: Path | None
    state_dir: Path
    model_dir: Path
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
    "agent_credential": "HIVE_AGENT_CREDENTIAL",
    "owner_key": "HIVE_BRAIN_OWNER_KEY",
}


def config_file() -> Path:
    explicit = os.environ.get("HIVE_BRAIN_CONFIG")
    return Path(explicit) if explicit else _user_config_dir() / "config.toml"


def _coerce(name: str, value: Any) -> Any:
    kind = _FIELDS[name][0]
    try:
        if kind == "path":
            return Path(os.path.expanduser(str(value))) if value not in (None, "") else None
        if kind == "bool":
            if isinstance(value, bool):
                return value
            return str(value).strip().lower() in ("1", "true", "yes", "on")
        if kind == "float":
            return float(value)
        if kind == "int":
            return int(value)
    except (TypeError, ValueError) as e:
        raise UsageError(f"setting {name!r} has an invalid value {value!r}", hint="fix the env var or config file") from e
    return value


def resolve(**flags: Any) -> Settings:
    """Build settings from flags (None = not given), env, the config file and defaults."""
    s = Settings()
    path = config_file()
    if path.is_file():
        try:
            text = path.read_text(encoding="utf-8")
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
            if k in _FIELDS and k not in _NOT_FROM_CONFIG:
                setattr(s, k, _coerce(k, v))
                s.sources[k] = f"config:{path}"
    for k, env in _ENV.items():
        if env in os.environ:
            setattr(s, k, _coerce(k, os.environ[env]))
            s.sources[k] = f"env:{env}"
    for k, v in flags.items():
        if v is not None:
            setattr(s, k, _coerce(k, v))
            s.sources[k] = "flag"
    if s.state_dir is None:
        s.state_dir = _user_data_dir()
    if s.model_dir is None:
        s.model_dir = user_cache_dir() / "models"
    if "agent_id" in s.sources:
        s.agent_id = validate_agent_id(s.agent_id)
    return s


# ---------------------------------------------------------------------------------------------- the file
_SIMPLE_LINE: Any = None


def _simple_toml(text: str) -> dict[str, Any] | None:
    """The config file as ``tomllib`` reads it, when it holds only what ``config set`` writes: top-level
    ``key = value`` lines (a string without escapes, true/false, a plain integer or decimal), comments
    and blank lines. None for anything else (tables, escapes, dates, a repeated key ...), which
    ``tomllib`` then reads. Every process resolves settings, the prompt hook's too, and ``tomllib``
    (with ``typing`` behind it) was the largest import left on that path."""
    global _SIMPLE_LINE
    if _SIMPLE_LINE is None:
        import re

        comment = r"(?:#[^\x00-\x08\x0a-\x1f\x7f]*)?"  # TOML: no control characters but tab
        _SIMPLE_LINE = re.compile(
            r'[ \t]*(?:([A-Za-z0-9_-]+)[ \t]*=[ \t]*(?:"([^"\\\x00-\x1f\x7f]*)"|\'([^\'\x00-\x08\x0a-\x1f\x7f]*)\''
            r"|(true|false)|([+-]?(?:0|[1-9][0-9]*))|([+-]?(?:0|[1-9][0-9]*)\.[0-9]+))[ \t]*)?" + comment
        )
    out: dict[str, Any] = {}
    lines = text.split("\n")
    for i, line in enumerate(lines):
        # CRLF ends a line; a CR anywhere else (the end of the file too) is left to tomllib, which refuses it
        m = _SIMPLE_LINE.fullmatch(line[:-1] if line.endswith("\r") and i < len(lines) - 1 else line)
        if m is None:
            return None
        key, basic, literal, boolean, integer, decimal = m.groups()
        if key is None:
            continue  # blank or a comment
        if key in out:
            return None  # tomllib says why
        if basic is not None or literal is not None:
            out[key] = basic if basic is not None else literal
        elif boolean is not None:
            out[key] = boolean == "true"
        elif integer is not None:
            out[key] = int(integer)
        else:
            out[key] = float(decimal)
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

    v = _coerce(k, value)
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


def validate_agent_id(agent_id: str | None) -> str:
    """An agent id that was given must be real: empty or odd ids never mean "everyone"."""
    import re

    if agent_id is None or not str(agent_id).strip():
        raise InvalidAgentId(
            "agent id is empty", hint="set HIVE_AGENT_ID to a name like 'claude-code', or unset it"
        )
    a = str(agent_id).strip()
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", a) or ".." in a:
        raise InvalidAgentId(
            f"agent id {a!r} is malformed", hint="use letters, digits, '.', '_' or '-' (at most 64 characters)"
        )
    return a
