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
    │   └── StateDamaged           a per-device state file is damaged: it was moved aside and is
    │                              rebuilt from the notes (readers answer lexically meanwhile)
    └── ModelError                 the embedding pack is missing or broken

``*``: defined beside the code that raises it (the module named), still part of this one tree.
The CLI maps every subclass to exit code 1 (``UsageError``: 2) and prints ``str(e)``.
"""

from __future__ import annotations


class HiveBrainError(Exception):
    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if not hint else f"{message} ({hint})")

    def to_dict(self) -> dict:
        return {"error": type(self).__name__, "message": self.message, "hint": self.hint}


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
    def __init__(self, path: str, problem: str, *, hint: str | None = None) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}", hint=hint)


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

    def __init__(self, check: str, message: str, *, hint: str | None = None) -> None:
        self.check = check
        super().__init__(f"capsule refused ({check} check): {message}", hint=hint)

    def to_dict(self) -> dict:
        return {**super().to_dict(), "check": self.check}


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


class ModelError(HiveBrainError):
    pass


__all__ = [
    "CapsuleRefused", "ChainProtected", "DuplicateContent", "DuplicateKey", "GenerationCorrupt",
    "HiveBrainError", "IndexError_", "InvalidAgentId", "InvalidText", "JournalError", "LockTimeout",
    "ModelError", "NotConfirmed", "NotFound", "NoteError", "PermissionDenied", "Refused", "SecretDetected",
    "StateDamaged", "UsageError", "VaultError", "VaultNotFound", "WriteUnconfirmed",
]
