"""The vault on disk: where it is, its stable id, and the per-device state dir that belongs to it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..config import Settings
from ..errors import StateUnusable, VaultError, VaultNotFound

MARKER_DIR = ".hive-brain"
MARKER_FILE = "vault.json"
MEMORY_DIR = "Memory/Distillations/Agent Memory"
CORE_MEMORY = "Memory/Core Memory.md"
CONVERSATIONS_DIR = "Memory/Conversations"
AGENTS_DIR = "Agents"
BRAIN_SERVICES_DIR = "Operations/Brain Services"  # generated views for Obsidian (DESIGN); never indexed as notes
# The default Open Knowledge Format bundle (memory/okf.py): copies of shared notes, so never indexed.
OKF_EXPORT_DIR = BRAIN_SERVICES_DIR + "/OKF Export"
# Folders that never hold notes to index: our own marker, Obsidian's config, VCS and trash.
IGNORED_DIRS = {MARKER_DIR, ".obsidian", ".git", ".trash", ".stfolder", ".stversions", "node_modules"}
# Syncthing's per-device ignore file (never synced itself) and the line that keeps staged files local.
STIGNORE = ".stignore"
STIGNORE_STAGING = f"/{MARKER_DIR}/staging"


def template_dir() -> Path:
    here = Path(__file__).resolve().parent
    for cand in (here / "vault_template", here.parent / "vault_template"):
        if cand.is_dir():
            return cand
    raise VaultError("vault template is missing from the installation", hint="reinstall hive-brain")


class Vault:
    """An opened vault: its root, id and per-device state dir. Immutable. A plain class, not a
    dataclass: the prompt hook opens one, and ``dataclasses`` (with ``inspect``, ``ast`` and ``dis``
    behind it) was the largest import of the hook's process."""

    __slots__ = ("root", "state", "vault_id")
    root: Path
    vault_id: str
    state: Path  # per-device state dir for this vault

    def __init__(self, root: Path, vault_id: str, state: Path) -> None:
        object.__setattr__(self, "root", root)
        object.__setattr__(self, "vault_id", vault_id)
        object.__setattr__(self, "state", state)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Vault is immutable (cannot set {name})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vault):
            return NotImplemented
        return (self.root, self.vault_id, self.state) == (other.root, other.vault_id, other.state)

    def __hash__(self) -> int:
        return hash((self.root, self.vault_id, self.state))

    def __repr__(self) -> str:
        return f"Vault(root={self.root!r}, vault_id={self.vault_id!r}, state={self.state!r})"

    def rel(self, path: Path) -> str:
        return path.resolve().relative_to(self.root).as_posix()

    def abs(self, rel: str) -> Path:
        """Resolve a vault-relative path, refusing anything that escapes the vault."""
        p = (self.root / rel).resolve()
        if p != self.root and self.root not in p.parents:
            raise VaultError(f"path {rel!r} escapes the vault")
        return p

    @property
    def staging(self) -> Path:
        # Staged files live inside the vault so the final rename is atomic (same file system).
        return self.root / MARKER_DIR / "staging"

    def keep_staging_local(self) -> None:
        """Before staging: in a Syncthing folder (it marks each with ``.stfolder``) make sure the
        device-local ``.stignore`` excludes staging. Syncthing would carry a write's staged files to the
        other device, whose recovery clears them as leftovers, and bring that deletion back here
        mid-write. Git needs nothing: ``init`` leaves a ``.gitignore`` in the marker dir, which syncs."""
        if (self.root / ".stfolder").exists():
            ensure_stignore(self.root)


def ensure_stignore(root: Path) -> None:
    """Add :data:`STIGNORE_STAGING` to ``root/.stignore`` unless it is there (the user's lines stay)."""
    f = root / STIGNORE
    try:
        text = f.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    if STIGNORE_STAGING in text.splitlines():
        return
    from .fsutil import atomic_write_text

    atomic_write_text(f, text + ("" if not text or text.endswith("\n") else "\n") + STIGNORE_STAGING + "\n")


def _read_marker(root: Path) -> str | None:
    f = root / MARKER_DIR / MARKER_FILE
    if not f.is_file():
        return None
    try:
        vid = json.loads(f.read_text(encoding="utf-8"))["vault_id"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise VaultError(f"{f} is damaged: {e}", hint="restore it from sync/backup or delete it and run `hive-brain init`") from e
    if not isinstance(vid, str) or not vid.replace("-", "").isalnum():
        raise VaultError(f"{f} holds an invalid vault id", hint="restore it from sync/backup")
    return vid


def find_root(start: Path) -> Path | None:
    cur = start.resolve()
    for p in (cur, *cur.parents):
        if (p / MARKER_DIR / MARKER_FILE).is_file():
            return p
    return None


PRIVATE_UMASK = 0o077  # state is the owner's alone: new dirs 0700, new files 0600


def secure_state(state: Path) -> None:
    """Make a vault's state dir the owner's alone: the one place state permissions are set.

    Every front end (CLI, server, hook, MCP) finds the state dir through :func:`open_vault`, which
    calls this before anything below ``state`` is created. The process umask becomes 0o077, so what
    SQLite, tantivy, LanceDB and our own writers create next is 0600/0700 without each being told;
    the state dir is created (or, made by an older version, tightened) to 0700, so files made before
    are unreachable to other users too. A parent the user chose (``HIVE_BRAIN_STATE_DIR``) is created
    0700 when missing and otherwise left alone: it may be a folder with other uses. (Lives here, not
    in ``fsutil``: the prompt hook imports this module and must not pay for tempfile/sqlite3.)
    """
    os.umask(PRIVATE_UMASK)
    try:
        st = os.stat(state)
    except FileNotFoundError:
        state.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            os.mkdir(state, 0o700)
        except FileExistsError:
            pass
        return
    except OSError:
        return  # reported by whoever needs the dir
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        try:
            os.chmod(state, 0o700)
        except OSError:
            pass


def unusable_state(state: Path) -> str | None:
    """Why ``state`` cannot hold this device's index, catalog and generations (a file in its place or
    in place of a parent, no write permission), or None when it can. Asked only once something under
    it failed, to tell a state dir that cannot be used from a damaged file inside it."""
    p = state
    while not os.path.lexists(p) and p.parent != p:
        p = p.parent
    if not p.is_dir():
        return f"{p} is a file, not a folder" if p.exists() else f"{p} is a broken link"
    if not os.access(p, os.W_OK | os.X_OK):
        return f"{p} is not writable" + (f" (it should hold {state})" if p != state else "")
    return None


def state_unusable_error(state: Path, cause: BaseException | None = None) -> StateUnusable | None:
    """The one-line error for a state dir that cannot be used (None when it can: ``cause`` is then
    something else, a damaged file, and is left to whoever handles that)."""
    problem = unusable_state(state)
    if problem is None:
        return None
    return StateUnusable(
        f"the state dir cannot be used: {problem}",
        hint="move that aside or make it a writable folder, or set HIVE_BRAIN_STATE_DIR to one; the index is "
             "rebuilt from the notes, and `hive-brain recall` answers by scanning them meanwhile",
        stateDir=str(state), problem=problem, cause=str(cause)[:200] if cause is not None else None)


def open_vault(settings: Settings, *, cwd: Path | None = None) -> Vault:
    """The vault of ``settings``: ``--vault`` or ``HIVE_BRAIN_VAULT``, else the nearest vault above the
    current folder, else the config file's ``vault`` (as ``--help`` says). The config file's vault is
    a default for folders outside any vault: standing in another vault, a write lands there, not in the
    vault the file names (issue 28)."""
    from_file = str(settings.sources.get("vault", "")).startswith("config:")
    here = find_root(cwd or Path.cwd()) if settings.vault is not None and from_file else None
    if here is not None:
        root = here
    elif settings.vault is not None:
        root = Path(settings.vault).expanduser().resolve()
        if not (root / MARKER_DIR / MARKER_FILE).is_file():
            raise VaultNotFound(f"{root} is not a hive-brain vault", hint=f"run `hive-brain init {root}`")
    else:
        found = find_root(cwd or Path.cwd())
        if found is None:
            raise VaultNotFound(
                "no vault here or above", hint="pass --vault PATH, set HIVE_BRAIN_VAULT, or run `hive-brain init PATH`"
            )
        root = found
    vid = _read_marker(root)
    assert vid is not None
    state = Path(settings.state_dir).expanduser().resolve() / vid
    secure_state(state)
    return Vault(root=root, vault_id=vid, state=state)


def init_vault(path: Path, settings: Settings, *, nest: bool = False) -> tuple[Vault, bool]:
    """Create a vault from the template; idempotent. Returns (vault, created). A vault inside another
    one is refused unless ``nest``: the outer vault would index the inner one's notes (a second Core
    Memory among them)."""
    root = path.expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise VaultError(f"{root} exists and is not a directory")
    existing = _read_marker(root) if root.is_dir() else None
    created = existing is None
    outer = find_root(root.parent) if created else None
    if outer is not None and not nest:
        raise VaultError(f"{root} is inside the vault {outer}; a nested vault's notes would be indexed twice",
                         hint=f"use the vault {outer} (or a folder outside it), or pass --force to nest anyway")
    root.mkdir(parents=True, exist_ok=True)
    import shutil  # only `init` copies files or makes ids: the prompt hook imports this module
    import uuid

    tpl = template_dir()
    for src in sorted(tpl.rglob("*")):
        dst = root / src.relative_to(tpl)
        if src.is_dir():
            dst.mkdir(parents=True, exist_ok=True)
        elif not dst.exists() and src.name != ".gitkeep":
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
    if existing is None:
        marker = root / MARKER_DIR
        marker.mkdir(exist_ok=True)
        from .fsutil import atomic_write_text

        atomic_write_text(marker / MARKER_FILE, json.dumps({"vault_id": uuid.uuid4().hex, "format": 1}, indent=2) + "\n")
        # Staging is per-device scratch; sync tools should not carry it.
        atomic_write_text(marker / ".gitignore", "staging/\n")
    ensure_stignore(root)
    s = Settings(**{**settings.__dict__, "vault": root})
    return open_vault(s), created


def is_ignored_dir(name: str) -> bool:
    return name in IGNORED_DIRS or (name.startswith(".") and name != ".")


def walk_markdown(root: Path):
    """Yield (relpath, os.stat_result) for every .md file, skipping ignored folders; cheap (scandir,
    string paths: pathlib objects cost more than the stat calls on a 100k-note vault)."""
    base = str(root).rstrip(os.sep) + os.sep
    cut = len(base)
    stack = [base]
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        if not is_ignored_dir(e.name):
                            stack.append(e.path)
                    elif e.name.endswith(".md") and e.is_file(follow_symlinks=False):
                        rel = e.path[cut:]
                        yield (rel if os.sep == "/" else rel.replace(os.sep, "/")), e.stat(follow_symlinks=False)
                except OSError:
                    continue
