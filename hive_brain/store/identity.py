"""Who is calling, in enforcement mode: agent credentials and the owner key (threat model: docs/security.md).

* An **agent credential** is a random token issued by ``hive-brain hooks install`` into a 0600 file
  (``<state dir>/credentials/<agent>.key``); the agent's hook commands and MCP config name that file
  in ``HIVE_AGENT_CREDENTIAL``. Setting ``HIVE_AGENT_ID`` to another agent's id is not enough to act
  as it: the CLI, the in-process fallback of the hook and the server all check the token.
* The **owner key** is a random token in a 0600 file outside the vault and the state dir
  (``hive-brain owner init``; by default ``~/.config/hive-brain/owner.key``), presented with
  ``--owner-key PATH`` or ``HIVE_BRAIN_OWNER_KEY=PATH`` for one command. No hook or MCP config ever
  names it, and a config file cannot set it (every process, agents included, reads that file).
* Only SHA-256 digests are kept in the registry (``<state dir>/identity.json``), compared in
  constant time. Nothing here can separate processes of one OS user that read each other's files:
  that boundary is the OS's (see docs/security.md).

Outside enforcement mode identity stays declared (``HIVE_AGENT_ID``; none = the owner), except that an
agent's own environment (Claude Code's ``CLAUDECODE=1``, Codex's sandbox variables) names that agent.

Standard library only: the prompt hook calls :func:`establish` in enforcement mode.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import Settings, agent_from_environment, validate_agent_id
from ..errors import PermissionDenied, UsageError

REGISTRY = "identity.json"
CREDENTIALS_DIR = "credentials"
MAX_KEY_BYTES = 4096


# -- the agent an environment names ---------------------------------------------------------------
# -- registry -------------------------------------------------------------------------------------
def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _registry_path(state_root: Path) -> Path:
    return Path(state_root) / REGISTRY


def load_registry(state_root: Path) -> dict[str, Any]:
    p = _registry_path(state_root)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"agents": {}}
    except (OSError, ValueError) as e:
        raise PermissionDenied(f"the identity registry {p} is unreadable ({e}); nobody can be verified",
                               hint="restore it, or remove it and run `hive-brain owner init` and "
                                    "`hive-brain hooks install` again") from e
    if not isinstance(data, dict):
        return {"agents": {}}
    if not isinstance(data.get("agents"), dict):
        data["agents"] = {}
    return data


def _save_registry(state_root: Path, data: dict[str, Any]) -> None:
    _write_private(_registry_path(state_root), json.dumps(data, indent=2, sort_keys=True) + "\n")


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to a new 0600 file atomically (temp file + rename)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_key(path: Path, what: str) -> str:
    """The token in a key file (its first line), refusing files others may read."""
    p = Path(path).expanduser()
    try:
        st = os.stat(p)
        if st.st_size > MAX_KEY_BYTES:
            raise PermissionDenied(f"{what} file {p} is too large to be a key")
        if st.st_mode & 0o077:
            raise PermissionDenied(f"{what} file {p} can be read by other users (mode {st.st_mode & 0o777:o})",
                                   hint=f"run `chmod 600 {p}`; a key others can read proves nothing")
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PermissionDenied(f"{what} file {p} does not exist",
                               hint="check the path (`hive-brain owner init` / `hive-brain hooks install` create it)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PermissionDenied(f"cannot read {what} file {p}: {e}") from e
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not token:
        raise PermissionDenied(f"{what} file {p} is empty")
    return token


def _matches(stored: Any, token: str | None) -> bool:
    if not token or not isinstance(stored, dict) or not isinstance(stored.get("sha256"), str):
        return False
    return hmac.compare_digest(stored["sha256"], _digest(token))


def owner_registered(state_root: Path) -> bool:
    return isinstance(load_registry(state_root).get("owner"), dict)


def is_owner(state_root: Path, key: str | None) -> bool:
    return _matches(load_registry(state_root).get("owner"), key)


def _now_utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _expired(stored: Any) -> bool:
    """A credential past its ``expires`` (an ISO-8601 UTC instant, ``...Z``: compared as text)."""
    expires = stored.get("expires") if isinstance(stored, dict) else None
    return isinstance(expires, str) and expires <= _now_utc()


def is_agent(state_root: Path, agent: str, token: str | None) -> bool:
    stored = load_registry(state_root)["agents"].get(agent)
    return _matches(stored, token) and not _expired(stored)


def _live(stored: Any) -> bool:
    """An issued credential (a revoked one stays in the registry as a dated mark, without its digest)."""
    return isinstance(stored, dict) and isinstance(stored.get("sha256"), str)


def _refusal(state_root: Path, agent: str, what: str) -> str:
    """Why ``agent``'s credential was not taken, in words: revoked, expired or not its own."""
    stored = load_registry(state_root)["agents"].get(agent)
    if isinstance(stored, dict) and stored.get("revoked") and not _live(stored):
        return f"agent {agent!r}'s credential was revoked at {stored['revoked']}"
    if not _live(stored):
        return f"agent {agent!r} has no credential on this device (never issued, or revoked)"
    if _expired(stored):
        return f"agent {agent!r}'s credential expired at {stored['expires']}"
    return f"agent {agent!r} presented no valid credential{what}"


# -- setup ------------------------------------------------------------------------------------------
def default_owner_key_path() -> Path:
    from ..config import _user_config_dir

    return _user_config_dir() / "owner.key"


def credential_path(state_root: Path, agent: str) -> Path:
    # Absolute: the path is written into agents' configs, which run from other folders.
    return Path(state_root).expanduser().resolve() / CREDENTIALS_DIR / f"{validate_agent_id(agent)}.key"


def init_owner(state_root: Path, key_file: Path | None = None) -> dict[str, Any]:
    """Create the owner key (0600) and register its digest. Idempotent for the same key file; a second
    owner key is refused (the first one is the proof needed to replace it)."""
    path = Path(key_file or default_owner_key_path()).expanduser().resolve()
    state = Path(state_root).expanduser().resolve()
    if path == state or state in path.parents:
        raise UsageError(f"the owner key must live outside the state dir ({state})",
                         hint="every agent's process can be pointed at the state dir; choose e.g. ~/.config/hive-brain/owner.key")
    reg = load_registry(state)
    if isinstance(reg.get("owner"), dict):
        if path.exists() and _matches(reg["owner"], read_key(path, "the owner key")):
            return {"status": "exists", "keyFile": str(path)}
        raise PermissionDenied("an owner key is already registered on this device",
                               hint=f"present it with --owner-key (recorded at {reg['owner'].get('keyFile')}); "
                                    f"to start over, remove {_registry_path(state)} and every credential")
    if path.exists():
        raise UsageError(f"{path} already exists and is not the registered owner key",
                         hint="choose another --key-file, or move that file away")
    import secrets  # only setup makes keys: the hook must not import `random`

    token = "hbo_" + secrets.token_urlsafe(32)
    _write_private(path, token + "\n")
    reg["owner"] = {"sha256": _digest(token), "keyFile": str(path), "created": _now_utc()}
    _save_registry(state, reg)
    return {"status": "created", "keyFile": str(path)}


def issue_agent_credential(state_root: Path, agent: str, *, rotate: bool = False, expires: str | None = None) -> Path:
    """The credential file of ``agent``: reused when it is still valid (and no new expiry is asked
    for), else a new token, which revokes any earlier one. ``rotate``: a new token whatever the old
    one's state; a rotation keeps the old token's expiry when that is still ahead (a new secret under
    the same time limit; revoke and issue to lift it). ``expires``: an ISO-8601 UTC instant (``...Z``)
    after which the token proves nothing."""
    agent = validate_agent_id(agent)
    path = credential_path(state_root, agent)
    reg = load_registry(state_root)
    stored = reg["agents"].get(agent)
    if path.exists() and not rotate and expires is None and not _expired(stored):
        try:
            if _matches(stored, read_key(path, "agent credential")):
                return path
        except PermissionDenied:
            pass  # unreadable or loose: replace it
    if expires is None and rotate and _live(stored) and not _expired(stored):
        expires = stored.get("expires")
    import secrets

    token = "hba_" + secrets.token_urlsafe(32)
    _write_private(path, token + "\n")
    reg["agents"][agent] = {"sha256": _digest(token), "created": _now_utc(),
                            **({"expires": expires} if expires else {})}
    _save_registry(state_root, reg)
    return path


def revoke_agent_credential(state_root: Path, agent: str) -> dict[str, Any]:
    """Forget ``agent``'s credential (its token proves nothing from now on) and delete its file. The
    registry keeps when it was revoked (no digest): ``owner list`` shows it, and a refusal says so."""
    agent = validate_agent_id(agent)
    reg = load_registry(state_root)
    stored = reg["agents"].get(agent)
    known = _live(stored)
    if known:
        reg["agents"][agent] = {"revoked": _now_utc(), "created": stored.get("created")}
        _save_registry(state_root, reg)
    path = credential_path(state_root, agent)
    had_file = path.exists()
    path.unlink(missing_ok=True)
    if not known and not had_file:
        was = f" (revoked at {stored['revoked']})" if isinstance(stored, dict) and stored.get("revoked") else ""
        raise UsageError(f"agent {agent!r} has no credential on this device{was}",
                         hint="`hive-brain owner list` shows them")
    return {"agent": agent, "revoked": known, "credentialFile": str(path), "fileRemoved": had_file}


def list_agent_credentials(state_root: Path) -> list[dict[str, Any]]:
    """Every agent credential the registry knows: when issued, when it expires or was revoked, whether
    its file is there."""
    reg = load_registry(state_root)
    return [{"agent": agent, "created": stored.get("created"), "expires": stored.get("expires"),
             "expired": _expired(stored), "revoked": None if _live(stored) else stored.get("revoked"),
             "credentialFile": str(credential_path(state_root, agent)),
             "fileExists": credential_path(state_root, agent).exists()}
            for agent, stored in sorted(reg["agents"].items()) if isinstance(stored, dict)]


# -- checking a caller --------------------------------------------------------------------------------
def establish(settings: Settings, environ: Mapping[str, str] | None = None) -> Settings:
    """Decide who the caller of this process is; mutates and returns ``settings``.

    Sets ``agent_id`` from the environment an agent runs us in (when no id was given), and in
    enforcement mode proves it: a verified owner key makes ``owner_verified`` true (and may act as any
    agent it names); an agent id needs its credential; a caller that is neither is refused, so an
    absent or empty id is never the owner. ``settings.auth`` is what a server request carries.
    """
    env = os.environ if environ is None else environ
    if settings.agent_id is None:
        inferred = agent_from_environment(env)
        if inferred:
            settings.agent_id = inferred
            settings.sources["agent_id"] = "environment"
    settings.auth = {}
    if not settings.scoped_permissions:
        settings.owner_verified = not settings.agent_id
        return settings
    state = Path(settings.state_dir)
    if settings.owner_key is not None:
        key = read_key(settings.owner_key, "the owner key")
        if not is_owner(state, key):
            raise PermissionDenied(f"{settings.owner_key} is not this device's owner key",
                                   hint="pass the file `hive-brain owner init` created")
        settings.owner_verified = True
        settings.auth = {"ownerKey": key}
        if settings.sources.get("agent_id") == "environment":
            settings.agent_id = None  # the owner proved itself inside an agent's shell: it acts as the owner
        return settings
    settings.owner_verified = False
    if not settings.agent_id:
        raise PermissionDenied(
            "in enforcement mode every caller proves who it is; this one named no agent and no owner key",
            hint="agents: set HIVE_AGENT_ID and HIVE_AGENT_CREDENTIAL (`hive-brain hooks install` does); "
                 "the owner: pass --owner-key PATH",
        )
    cred = settings.agent_credential
    if not _live(load_registry(state)["agents"].get(settings.agent_id)):
        # Before its file is read: a revoked credential's file is gone, and that is not the news.
        raise PermissionDenied(_refusal(state, settings.agent_id, ""),
                               hint=f"the owner issues one: `hive-brain --owner-key PATH owner issue --agent "
                                    f"{settings.agent_id}` (`hooks install` does for claude-code and codex)")
    token = read_key(cred, "agent credential") if cred is not None else None
    if token is None or not is_agent(state, settings.agent_id, token):
        raise PermissionDenied(
            _refusal(state, settings.agent_id,
                     " (HIVE_AGENT_CREDENTIAL is not set)" if cred is None else f" ({cred} is not its credential)"),
            hint=f"the owner issues it: `hive-brain --owner-key PATH owner issue --agent {settings.agent_id}` "
                 "(`hooks install` does for claude-code and codex)",
        )
    settings.auth = {"credential": token}
    return settings


def check_request(state_root: Path, agent: str | None, auth: Any) -> None:
    """The server's check of one request in enforcement mode: the credential of ``agent``, or the owner
    key (which may read as any agent it names). Raises PermissionDenied."""
    auth = auth if isinstance(auth, dict) else {}
    owner_key = auth.get("ownerKey")
    if isinstance(owner_key, str) and is_owner(state_root, owner_key):
        return
    if agent is None:
        raise PermissionDenied("in enforcement mode a request needs an agent and its credential, or the owner key",
                               hint="clients send args.auth; see docs/security.md")
    token = auth.get("credential")
    if not isinstance(token, str) or not is_agent(state_root, agent, token):
        raise PermissionDenied(_refusal(state_root, agent, ""),
                               hint="`hive-brain hooks install` issues one; see docs/security.md")
