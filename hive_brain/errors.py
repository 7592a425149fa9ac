"""One exception hierarchy for everything hive-brain refuses or fails to do.

    HiveBrainError                 base; ``str(e)`` is a one-line message that says what to do next
    ├── UsageError                 the caller asked for something malformed (exit 2)
    │   ├── InvalidAgentId         empty/whitespace/malformed agent id: never widens what may be read
    │   ├── InvalidText            text hive-brain will not store: NUL/control characters, lone
    │   │                          surrogates (invalid UTF-8); says which field and where
    │   └── SettingsFileError*     an agent's settings file cannot be merged (agents/settingsfile.py)
    ├── VaultError                 the vault cannot be found, created or read
    │   ├── VaultNotFound
    │   └── NoteError              one note is unreadable (broken YAML, binary, too large)
    ├── Refused                    a write was refused on purpose; nothing changed (exit 1)
    │   ├── DuplicateKey           an active memory already has this memory_key (use evolve)
    │   ├── DuplicateContent       identical content already stored
    │   ├── SecretDetected         content looks like a secret (the secret is never echoed)
    │   ├── ChainProtected         delete would break an evolution chain (use --force)
    │   ├── PermissionDenied       layer/agent rules forbid this caller
    │   ├── NotConfirmed           a destructive command without --confirm
    │   ├── CapsuleRefused         a capsule failed a check; ``check`` names which (format,
    │   │                          truncated, passphrase, integrity, manifest, records, expiry)
    │   └── AlreadyRunning*        a server already serves this vault (daemon/server.py)
    ├── NotFound                   no memory/generation with that id
    ├── LockTimeout                another process holds the vault lock; names the holder pid (a
    │                              write that meets it is kept as a pending write instead)
    ├── ServerUnavailable*         no answer from the vault's server (rpc/client.py): work goes local
    │   ├── ServerNotReady*        still building its first index view
    │   ├── WritesRefused*         it takes no writes (enforcement mode): the caller writes itself
    │   └── ServerError*           the server answered with an internal error
    ├── WriteUnconfirmed           the server took a write but never confirmed it: it may be applied
    ├── JournalError               a transaction could not be applied or recovered
    ├── IndexError_                the index or a generation is missing or corrupt
    │   ├── GenerationCorrupt      a generation's receipt does not verify
    │   ├── StateDamaged           a per-device state file is damaged: it was moved aside and is
    │   │                          rebuilt from the notes (readers answer lexically meanwhile)
    │   └── StateUnusable          the state dir itself cannot be used (a file in its place, not
    │                              writable): names it and the fix; recall answers by a scan
    └── ModelError                 the embedding pack is missing or broken

``*``: defined beside the code that raises it (the module named), still part of this one tree.
The CLI maps every subclass to exit code 1 (``UsageError``: 2) and prints ``str(e)``.

**Errors carry their data across every boundary** (as httpx's exceptions carry their request): what
an error knows beyond its message goes into the constructor as keyword data (``path``/``problem`` of
a ``NoteError``, ``records`` of a refused batch, ``pending`` of a write kept for later), lives in
``e.details``, and ``e.to_dict()`` is the one shape every surface shows::

    {"error": "NoteError", "message": "...", "hint": "...", "path": "...", "problem": "..."}

:meth:`HiveBrainError.from_dict` rebuilds the same class with the same data from that shape, for any
subclass defined anywhere in the package (each registers itself by name when its module is imported).
The server's socket sends ``to_dict()``, the client rebuilds it, and ``--json`` and MCP print it: an
error says the same type and details whether it crossed a process or not.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing for the type checker only: the prompt hook and the thin client import this
if TYPE_CHECKING:  # module, and `typing` (with re, functools, contextlib behind it) was ~18 ms of theirs
    from typing import Any, ClassVar

# Keys of the shape itself: no error's data may use them.
_RESERVED = frozenset({"ok", "error", "type", "message", "hint"})


class HiveBrainError(Exception):
    exit_code = 1
    # Every subclass by its class name (the ``error`` of :meth:`to_dict`), filled as classes are defined.
    registry: ClassVar[dict[str, type[HiveBrainError]]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        HiveBrainError.registry.setdefault(cls.__name__, cls)

    def __init__(self, message: str, *, hint: str | None = None, **details: Any) -> None:
        self.message = message
        self.hint = hint
        clash = _RESERVED & set(details)
        if clash:
            raise TypeError(f"error data may not be named {sorted(clash)}")
        # Data is also readable as attributes (``e.path``, ``e.records``): what the code raising it set.
        self.details = {k: v for k, v in details.items() if v is not None}
        for k, v in self.details.items():
            setattr(self, k, v)
        super().__init__(message if not hint else f"{message} ({hint})")

    @property
    def kind(self) -> str:
        """The error's type name; a rebuilt error of a class this process does not know keeps its name."""
        return self.__dict__.get("_kind") or type(self).__name__

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.kind, "message": self.message, "hint": self.hint, **self.details}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HiveBrainError:
        """The error ``to_dict`` described, as the same class with the same data. A name this process
        has no class for comes back as a ``HiveBrainError`` that keeps the name (``kind``)."""
        if not isinstance(data, dict):
            raise TypeError(f"an error is a JSON object, not {type(data).__name__}")
        name = str(data.get("error") or data.get("type") or "HiveBrainError")
        klass = HiveBrainError.registry.get(name) or (HiveBrainError if name == "HiveBrainError" else None)
        message = str(data.get("message") or "hive-brain reported an error")
        hint = data.get("hint")
        hint = str(hint) if hint is not None else None
        details = {str(k): v for k, v in data.items() if k not in _RESERVED}
        err = (klass or HiveBrainError).__new__(klass or HiveBrainError)
        # The base constructor, not the subclass's: a NoteError's own (path, problem) made the message
        # the dict already holds; its data comes back as the same attributes.
        HiveBrainError.__init__(err, message, hint=hint, **details)
        if klass is None:
            err.__dict__["_kind"] = name
        return err


class UsageError(HiveBrainError):
    exit_code = 2


class InvalidAgentId(UsageError):
    pass


class InvalidText(UsageError):
    pass


class VaultError(HiveBrainError):
    pass


class VaultNotFound(VaultError):
    pass


class NoteError(VaultError):
    path: str
    problem: str

    def __init__(self, path: str, problem: str, *, hint: str | None = None) -> None:
        super().__init__(f"{path}: {problem}", hint=hint, path=path, problem=problem)


class Refused(HiveBrainError):
    pass


class DuplicateKey(Refused):
    pass


class DuplicateContent(Refused):
    pass


class SecretDetected(Refused):
    pass


class ChainProtected(Refused):
    pass


class PermissionDenied(Refused):
    pass


class NotConfirmed(Refused):
    pass


class CapsuleRefused(Refused):
    """A capsule (store/capsule.py) was refused; ``check`` names the check it failed."""

    check: str

    def __init__(self, check: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"capsule refused ({check} check): {message}", hint=hint, check=check)


class NotFound(HiveBrainError):
    pass


class LockTimeout(HiveBrainError):
    # True only when raised while *taking* the lock for a write (not inside one): such a write can be
    # kept as a pending write instead (memory.store's _deferrable).
    acquiring: bool = False


class WriteUnconfirmed(HiveBrainError):
    pass


class JournalError(HiveBrainError):
    pass


class IndexError_(HiveBrainError):  # noqa: N801 - avoid shadowing the builtin IndexError
    pass


class GenerationCorrupt(IndexError_):
    pass


class StateDamaged(IndexError_):
    pass


class StateUnusable(IndexError_):
    pass


class ModelError(HiveBrainError):
    pass


__all__ = [
    "CapsuleRefused", "ChainProtected", "DuplicateContent", "DuplicateKey", "GenerationCorrupt",
    "HiveBrainError", "IndexError_", "InvalidAgentId", "InvalidText", "JournalError", "LockTimeout",
    "ModelError", "NotConfirmed", "NotFound", "NoteError", "PermissionDenied", "Refused", "SecretDetected",
    "StateDamaged", "StateUnusable", "UsageError", "VaultError", "VaultNotFound", "WriteUnconfirmed",
]
