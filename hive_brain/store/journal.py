"""Journaled multi-note transactions: a change is fully applied or not at all, even across kill -9.

Order of a commit (each step fsynced before the next):

1. journal record ``state=preparing`` listing every op and the hashes of old and new content;
2. new contents written to staging files inside the vault (same file system, so step 4 is atomic),
   old contents of overwritten/deleted notes backed up in the journal dir;
3. record ``state=staged``;
4. staged files swapped with their targets (renameat2 RENAME_EXCHANGE) and what came out checked
   against the old hash, deleted notes moved aside and checked (a hand save found there: every op
   taken back, refused);
5. the index generation is published (callback);
6. record removed (done).

Recovery, on the next lock acquisition: a ``preparing`` record is rolled back (the vault was not
touched yet); a ``staged`` record is rolled forward when every op is intact (staged file with the
right hash, or target already carrying it), otherwise rolled back from the backups.
Tests kill the writer at each step with ``HIVE_BRAIN_CRASH_AT=<step>``.

A transaction that only creates one new note (every ``remember``) needs no record: the staged file
is renamed into place, which is atomic by itself, so a crash leaves either no note or the whole
note (a staging dir without a record is cleared by recovery, as is a journal folder without one). That saves the record's two atomic
writes and four fsyncs under the lock on the commonest write. One existing note rewritten (every
``update``) likewise: the staged file is swapped with it in one step (``Transaction._commit_one_note``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import JournalError, Refused, UsageError
from .fsutil import atomic_write_text, exchange, fsync_dir, rename_noreplace, sha256_bytes, write_fsync
from .lock import vault_lock
from .notes import new_ulid
from .vault import Vault

QUARANTINE_DIR = "damaged"  # journal/damaged/<txn>/: records recovery could not trust (see _quarantine_record)
STEPS = ("after-record", "mid-stage", "after-stage", "after-mark", "mid-apply", "after-apply", "after-publish")


def crash_point(step: str) -> None:
    """Test hook: die exactly like kill -9 at a named step."""
    if os.environ.get("HIVE_BRAIN_CRASH_AT") == step:
        os.kill(os.getpid(), signal.SIGKILL)


def before_rename(paths: list[Path]) -> None:
    """Test hook, called at the last moment before staged notes are renamed into place (tests edit a
    note here, as an editor racing the writer would)."""


@dataclass
class Op:
    kind: str  # "write" | "delete"
    path: str  # vault-relative
    data: bytes | None = None
    expect_old: str | None = None  # sha256 the target must still have ("" = must not exist); None = don't care


def _sha_of(path: Path) -> str | None:
    try:
        return sha256_bytes(path.read_bytes())
    except FileNotFoundError:
        return None


class Transaction:
    """Collect ops, then ``commit()``. Use through ``transaction(vault)`` which holds the lock."""

    def __init__(self, vault: Vault, label: str) -> None:
        self.vault = vault
        self.label = label
        self.ops: list[Op] = []
        self.id = new_ulid().lower()
        self.publish_error: str | None = None

    def write(self, path: str, text: str, *, expect_old: str | None = None) -> None:
        self.vault.abs(path)  # refuses paths that escape the vault
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            data = b"\x00"
        if b"\x00" in data:
            # The last guard (memory.model decides what text is refused or cleaned): a note that is not
            # UTF-8 or holds NUL would be read back as a binary file nothing can open or delete.
            raise UsageError(f"{path}: the note text holds NUL or a lone surrogate; nothing was written",
                             hint="remove it and run the command again")
        self.ops.append(Op("write", path, data, expect_old))

    def delete(self, path: str, *, expect_old: str | None = None) -> None:
        self.vault.abs(path)
        self.ops.append(Op("delete", path, None, expect_old))

    @property
    def paths(self) -> list[str]:
        return [op.path for op in self.ops]

    def commit(self, publish: Callable[[list[str]], None] | None = None) -> None:
        if not self.ops:
            return
        if len(self.ops) == 1 and self.ops[0].kind == "write" and self.ops[0].expect_old == "":
            self._commit_new_note(self.ops[0], publish)
            return
        if len(self.ops) == 1 and self.ops[0].kind == "write":
            old = _sha_of(self.vault.abs(self.ops[0].path))
            if old is not None:
                self._commit_one_note(self.ops[0], old, publish)
                return
        jdir = _journal_dir(self.vault)
        tdir = jdir / self.id
        sdir = self.vault.staging / self.id
        tdir.mkdir(parents=True)
        self.vault.keep_staging_local()
        sdir.mkdir(parents=True)
        record: dict[str, Any] = {"id": self.id, "label": self.label, "state": "preparing", "ops": []}
        for i, op in enumerate(self.ops):
            target = self.vault.abs(op.path)
            old = _sha_of(target)
            if op.expect_old is not None and (old or "") != op.expect_old:
                shutil.rmtree(tdir, ignore_errors=True)
                shutil.rmtree(sdir, ignore_errors=True)
                raise changed_on_disk(op.path)
            record["ops"].append(
                {
                    "kind": op.kind,
                    "path": op.path,
                    "staged": f"{i}.md" if op.kind == "write" else None,
                    "new_sha": sha256_bytes(op.data) if op.data is not None else None,
                    "old_sha": old,
                }
            )
        rec_path = jdir / f"{self.id}.json"
        atomic_write_text(rec_path, json.dumps(record))
        crash_point("after-record")
        for i, (op, rop) in enumerate(zip(self.ops, record["ops"], strict=True)):
            if rop["old_sha"] is not None:
                shutil.copyfile(self.vault.abs(op.path), tdir / f"{i}.bak")
            if op.kind == "write":
                assert op.data is not None
                write_fsync(sdir / rop["staged"], op.data)
            if i == 0:
                crash_point("mid-stage")
        fsync_dir(tdir)
        fsync_dir(sdir)
        crash_point("after-stage")
        record["state"] = "staged"
        atomic_write_text(rec_path, json.dumps(record))
        crash_point("after-mark")
        try:
            _apply(self.vault, record, sdir, crash=True)
        except _ChangedOnDisk as e:
            _finish(rec_path, tdir, sdir)  # nothing was renamed yet: dropping the record is the rollback
            raise changed_on_disk(e.path) from None
        crash_point("after-apply")
        self._publish(publish)
        crash_point("after-publish")
        _finish(rec_path, tdir, sdir)

    def _commit_new_note(self, op: Op, publish: Callable[[list[str]], None] | None) -> None:
        target = self.vault.abs(op.path)
        if target.exists():
            raise changed_on_disk(op.path)
        sdir, staged = self._stage_one(op)
        target.parent.mkdir(parents=True, exist_ok=True)
        before_rename([target])
        try:
            placed = rename_noreplace(staged, target)  # fails, in the same step, if the path was taken
        except FileExistsError:
            placed = False
        if not placed:
            if os.path.lexists(target):  # taken, or no renameat2 here: the last look before a plain rename
                shutil.rmtree(sdir, ignore_errors=True)
                raise changed_on_disk(op.path)
            os.replace(staged, target)
        fsync_dir(target.parent)
        crash_point("after-mark")  # the rename is this path's commit point: from here on it rolls forward
        crash_point("mid-apply")
        crash_point("after-apply")
        self._publish(publish)
        crash_point("after-publish")
        shutil.rmtree(sdir, ignore_errors=True)

    def _stage_one(self, op: Op) -> tuple[Path, Path]:
        """The one note of a record-less commit, written and fsynced in its staging dir: (dir, file)."""
        assert op.data is not None
        sdir = self.vault.staging / self.id
        self.vault.keep_staging_local()
        sdir.mkdir(parents=True)
        crash_point("after-record")
        staged = sdir / "0.md"
        write_fsync(staged, op.data)
        crash_point("mid-stage")
        crash_point("after-stage")
        return sdir, staged

    def _commit_one_note(self, op: Op, old: str, publish: Callable[[list[str]], None] | None) -> None:
        """One existing note rewritten (every ``update``): the staged file is swapped with the note in
        one atomic step, which is this path's commit point, and what came out is checked as ``_place``
        checks it (a hand save found there is swapped back, the update refused). No record and no
        backup: before the swap the note is untouched, after it the change is whole, and nothing else
        would need rolling back. A staging dir left by a crash holds the staged note or the old one,
        and recovery clears it as it does a new note's. Two fsyncs instead of eight (record twice,
        staged file, two journal dirs, the swap's dir): a server update at 1k notes 57.8 -> 16.6 ms at load ~13."""
        if op.expect_old is not None and old != op.expect_old:
            raise changed_on_disk(op.path)
        sdir, staged = self._stage_one(op)
        assert op.data is not None
        rop = {"kind": "write", "path": op.path, "staged": staged.name, "new_sha": sha256_bytes(op.data), "old_sha": old}
        try:
            _apply(self.vault, {"id": self.id, "ops": [rop]}, sdir, crash=True)  # swaps, checks, fsyncs the dir
        except _ChangedOnDisk as e:
            shutil.rmtree(sdir, ignore_errors=True)
            raise changed_on_disk(e.path) from None
        crash_point("after-mark")
        crash_point("after-apply")
        self._publish(publish)
        crash_point("after-publish")
        shutil.rmtree(sdir, ignore_errors=True)

    def _publish(self, publish: Callable[[list[str]], None] | None) -> None:
        if publish is not None:
            try:
                publish(self.paths)
            except Exception as e:  # noqa: BLE001
                # The notes are the truth and are safely written; the index catches up on the next read,
                # so a failed publish is reported, never turned into a failed (or rolled back) write.
                self.publish_error = f"{type(e).__name__}: {e}"


def _journal_dir(vault: Vault) -> Path:
    d = vault.state / "journal"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _apply(vault: Vault, record: dict, sdir: Path, *, crash: bool = False) -> None:
    """Put every staged note in place. Live (``crash=True``), each overwrite is an atomic swap of the
    staged file with its target followed by a look at what came out (``_place``): a hand save that
    landed at any moment before the swap is found there and swapped back, and the ops already placed
    are taken back (``_undo``), so the change is refused whole and the edit kept."""
    if not crash:
        _roll_forward(vault, record, sdir)
        return
    before_rename([vault.abs(rop["path"]) for rop in record["ops"]])
    _verify_targets(vault, record)  # the cheap early look: most races end here, before any rename
    done: list[tuple[int, str]] = []
    try:
        for n, rop in enumerate(record["ops"]):
            done.append((n, _place(vault, rop, sdir, n)))
            if n == 0:
                crash_point("mid-apply")
    except _ChangedOnDisk:
        _undo(vault, record, sdir, done)
        raise
    for d in {vault.abs(rop["path"]).parent for rop in record["ops"]}:
        fsync_dir(d)


def _place(vault: Vault, rop: dict, sdir: Path, n: int) -> str:
    """Put one op in place and check, after the fact, that the target still held the bytes backed
    up; how it was placed, for ``_undo``. Raises _ChangedOnDisk (with this op taken back)."""
    target = vault.abs(rop["path"])
    if rop["kind"] == "delete":
        if rop["old_sha"] is None:
            return "none"
        aside = sdir / f"{n}.deleted"
        try:
            os.rename(target, aside)
        except FileNotFoundError:
            raise _ChangedOnDisk(rop["path"]) from None
        if _sha_of(aside) != rop["old_sha"]:
            _put_back(aside, target)
            raise _ChangedOnDisk(rop["path"])
        return "deleted"
    staged = sdir / rop["staged"]
    target.parent.mkdir(parents=True, exist_ok=True)
    if rop["old_sha"] is None:
        try:
            if rename_noreplace(staged, target):
                return "created"
        except FileExistsError:
            raise _ChangedOnDisk(rop["path"]) from None
        if os.path.lexists(target):  # no renameat2 here: the last look before a plain rename
            raise _ChangedOnDisk(rop["path"])
        os.replace(staged, target)
        return "created"
    try:
        swapped = exchange(staged, target)
    except FileNotFoundError:  # the target was deleted by hand
        raise _ChangedOnDisk(rop["path"]) from None
    if not swapped:
        os.replace(staged, target)  # no renameat2 here: _verify_targets was the last look
        return "replaced"
    if _sha_of(staged) != rop["old_sha"]:  # staged now holds what the target held
        _swap_back(staged, target, rop["new_sha"])
        raise _ChangedOnDisk(rop["path"])
    return "exchanged"


def _swap_back(staged: Path, target: Path, new_sha: str) -> None:
    """Give the target back what the swap took out. If a save landed on the target between the two
    swaps, what comes out is that save, not our note: it is the newest hand edit, so it goes back."""
    exchange(staged, target)
    if _sha_of(staged) != new_sha:
        exchange(staged, target)


def _put_back(aside: Path, target: Path) -> None:
    """Return a note moved aside; a file that appeared at its path since is newer and stays."""
    try:
        if not rename_noreplace(aside, target) and not os.path.lexists(target):
            os.rename(aside, target)
    except FileExistsError:
        pass


def _undo(vault: Vault, record: dict, sdir: Path, done: list[tuple[int, str]]) -> None:
    """Take back the ops a later op's refusal left placed, newest first (nothing of the change stays)."""
    tdir = vault.state / "journal" / record["id"]
    for n, how in reversed(done):
        rop = record["ops"][n]
        target = vault.abs(rop["path"])
        if how == "exchanged":
            _swap_back(sdir / rop["staged"], target, rop["new_sha"])
        elif how == "created" and _sha_of(target) == rop["new_sha"]:
            os.replace(target, sdir / rop["staged"])
        elif how == "deleted":
            _put_back(sdir / f"{n}.deleted", target)
        elif how == "replaced" and _sha_of(target) == rop["new_sha"]:
            tmp = target.with_name(target.name + ".restore")
            shutil.copyfile(tdir / f"{n}.bak", tmp)
            os.replace(tmp, target)


def _roll_forward(vault: Vault, record: dict, sdir: Path) -> None:
    """Recovery: finish what a dead writer had verified and begun. A target that already holds its
    new bytes was swapped in (its staged name now holds the old note), so it is left alone."""
    touched: set[Path] = set()
    for rop in record["ops"]:
        target = vault.abs(rop["path"])
        if rop["kind"] == "write":
            staged = sdir / rop["staged"]
            if _sha_of(target) != rop["new_sha"] and staged.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staged, target)
        elif target.exists() and (rop["old_sha"] is None or _sha_of(target) == rop["old_sha"]):
            target.unlink()
        touched.add(target.parent)
    for d in touched:
        fsync_dir(d)


class _ChangedOnDisk(Exception):
    def __init__(self, path: str) -> None:
        self.path = path


def changed_on_disk(path: str) -> Refused:
    return Refused(f"{path} changed on disk while this change was being written; nothing was changed",
                   hint="your edit is kept: run the command again")


def _verify_targets(vault: Vault, record: dict) -> None:
    """Every target must still hold the bytes that were backed up (an editor takes no lock).

    The prepare step checked them too, but backups, staging and three fsyncs lie between it and the
    rename. This look refuses most races before anything is renamed; the swap in ``_place`` closes
    the window left between this look and the rename (tests/test_hand_edits.py). Where renameat2 is
    missing, this look is the last one and a window of a few renames stays.
    """
    for rop in record["ops"]:
        if _sha_of(vault.abs(rop["path"])) != rop["old_sha"]:
            raise _ChangedOnDisk(rop["path"])


def _finish(rec_path: Path, tdir: Path, sdir: Path) -> None:
    rec_path.unlink(missing_ok=True)
    shutil.rmtree(tdir, ignore_errors=True)
    shutil.rmtree(sdir, ignore_errors=True)


def _intact(vault: Vault, record: dict, sdir: Path) -> bool:
    for rop in record["ops"]:
        if rop["kind"] != "write":
            continue
        # Swapped in already (the staged name then holds the old note), or staged and not yet moved.
        if rop["new_sha"] not in (_sha_of(vault.abs(rop["path"])), _sha_of(sdir / rop["staged"])):
            return False
    return True


def _rollback(vault: Vault, record: dict, tdir: Path) -> None:
    for i, rop in enumerate(record["ops"]):
        target = vault.abs(rop["path"])
        bak = tdir / f"{i}.bak"
        cur = _sha_of(target)
        if rop["old_sha"] is None:
            if rop["kind"] == "write" and cur == rop["new_sha"]:
                target.unlink()
        elif cur != rop["old_sha"] and bak.exists() and _sha_of(bak) == rop["old_sha"]:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(bak, target.with_name(target.name + ".restore"))
            os.replace(target.with_name(target.name + ".restore"), target)


def _malformed(record: Any, tid: str) -> str | None:
    """What makes a (parsed) record unusable for recovery, or None."""
    if not isinstance(record, dict) or record.get("id") != tid or not isinstance(record.get("ops"), list):
        return "not a journal record for this transaction"
    for n, op in enumerate(record["ops"]):
        if not isinstance(op, dict) or op.get("kind") not in ("write", "delete") or not isinstance(op.get("path"), str):
            return f"op {n} is malformed"
        missing = [k for k in ("old_sha", "new_sha") + (("staged",) if op["kind"] == "write" else ()) if k not in op]
        if missing:
            return f"op {n} lacks {', '.join(missing)}"
        if op["kind"] == "write" and not isinstance(op["staged"], str):
            return f"op {n} names no staged file"
    return None


def _quarantine_record(vault: Vault, rec_path: Path, problem: str) -> dict:
    """A record that parses but cannot be trusted: neither roll it forward nor back (either could
    lose an acknowledged write). Its record, backups and staged files move to ``journal/damaged/``
    for a person to look at, and recovery goes on with the others."""
    tid = rec_path.stem
    dest = rec_path.parent / QUARANTINE_DIR / tid
    dest.mkdir(parents=True, exist_ok=True)
    for src, name in ((rec_path.parent / tid, "backups"), (vault.staging / tid, "staged")):
        if src.exists():
            shutil.move(str(src), str(dest / name))
    os.replace(rec_path, dest / rec_path.name)
    fsync_dir(rec_path.parent)
    return {"id": tid, "action": "quarantined", "problem": problem, "keptIn": str(dest),
            "hint": "the transaction was neither applied nor undone; its files are kept there"}


def recover(vault: Vault) -> list[dict]:
    """Finish or undo what a dead writer left behind. Call with the lock held."""
    jdir = vault.state / "journal"
    results: list[dict] = []
    for rec_path in sorted(jdir.glob("*.json")) if jdir.is_dir() else ():
        try:
            record = json.loads(rec_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            # A torn record means step 1 never finished: nothing in the vault was touched.
            tid = rec_path.stem
            _finish(rec_path, jdir / tid, vault.staging / tid)
            results.append({"id": tid, "action": "discarded"})
            continue
        problem = _malformed(record, rec_path.stem)
        if problem:
            results.append(_quarantine_record(vault, rec_path, problem))
            continue
        tid = record["id"]
        tdir, sdir = jdir / tid, vault.staging / tid
        if record.get("state") == "staged" and _intact(vault, record, sdir):
            _apply(vault, record, sdir)
            action = "rolled-forward"
        elif record.get("state") == "staged":
            _rollback(vault, record, tdir)
            action = "rolled-back"
        else:
            action = "rolled-back"
        _finish(rec_path, tdir, sdir)
        results.append({"id": tid, "label": record.get("label"), "action": action, "paths": [o["path"] for o in record["ops"]]})
    # Staging dirs without a record are leftovers of a transaction that never wrote its record.
    if vault.staging.is_dir():
        for d in vault.staging.iterdir():
            if not (jdir / f"{d.name}.json").exists():
                shutil.rmtree(d, ignore_errors=True)
    # So are a journal folder without a record and a half-written record's temp file (a writer killed
    # between its mkdir and its record, found by benchmarks/chaos.py): nothing in the vault was touched.
    for p in jdir.iterdir() if jdir.is_dir() else ():
        if p.name == QUARANTINE_DIR:
            continue
        if p.is_dir() and not (jdir / f"{p.name}.json").exists():
            shutil.rmtree(p, ignore_errors=True)
        elif p.name.startswith(".") and p.name.endswith(".tmp"):
            p.unlink(missing_ok=True)
    return results


@contextmanager
def write_session(vault: Vault, *, timeout: float, command: str) -> Iterator[list[dict]]:
    """Hold the vault lock and repair any unfinished transaction first; yields what recovery did."""
    with vault_lock(vault.state, timeout=timeout, command=command):
        try:
            recovered = recover(vault)
        except OSError as e:
            raise JournalError(f"could not recover an unfinished change: {e}", hint="run `hive-brain doctor`") from e
        yield recovered
