"""Every per-device state file is disposable (issue 16, second defect).

Each case damages one kind of state file in a small real vault (real tantivy, LanceDB and model),
then runs the commands a user would: none may print a traceback, ``doctor`` must name the damage,
``rebuild-index`` must succeed from the notes and give back the same recall, and the notes stay
byte-identical. The journal and the pending-writes queue are not derived: a damaged record there is
kept aside and reported, never dropped.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from hive_brain.cli.app import main
from hive_brain.engine import Engine

from .helpers import remember

QUESTION = "which package manager for javascript"


def _cli(*args: str) -> tuple[int, dict, str]:
    """Run the CLI with --json: (exit code, JSON, stderr). An exception escaping is a traceback."""
    res = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    try:
        data = json.loads(res.stdout)
    except ValueError:
        data = {"raw": res.stdout}
    assert "Traceback" not in res.stdout + res.stderr, res.stdout + res.stderr
    return res.exit_code, data, res.stderr


def _half(p: Path) -> None:
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


def _garbage(p: Path) -> None:
    p.write_bytes(os.urandom(max(p.stat().st_size, 4096)))


def _flip(p: Path) -> None:
    data = bytearray(p.read_bytes())
    for i in range(len(data) // 3, min(len(data), len(data) // 3 + 32)):
        data[i] ^= 0xFF
    p.write_bytes(bytes(data))


def _files(state: Path, pattern: str) -> list[Path]:
    found = sorted(p for p in state.glob(pattern) if p.is_file())
    assert found, f"nothing matches {pattern}"
    return found


def _each(pattern: str, how: Callable[[Path], None]) -> Callable[[Path], None]:
    return lambda state: [how(p) for p in _files(state, pattern)]


def _journal_missing_field(state: Path) -> None:
    # A record that parses but lacks a field recovery needs (the red team's KeyError: 'staged').
    jdir = state / "journal"
    jdir.mkdir(exist_ok=True)
    (jdir / "01deadbeef.json").write_text(json.dumps({
        "id": "01deadbeef", "label": "remember", "state": "staged",
        "ops": [{"kind": "write", "path": "Memory/x.md", "new_sha": "0" * 64, "old_sha": None}]}))
    (jdir / "01deadbeef").mkdir()


def _pending_write_garbage(state: Path) -> None:
    d = state / "pending-writes"
    d.mkdir(exist_ok=True)
    (d / "pw-01garbage.json").write_bytes(b"\xff\x00 not json")


# (case, damage, a word doctor's report must contain)
CASES: list[tuple[str, Callable[[Path], None], str]] = [
    ("catalog-half", _each("catalog.sqlite", _half), "catalog.sqlite"),
    ("catalog-garbage", _each("catalog.sqlite", _garbage), "catalog.sqlite"),
    ("objects-half", _each("generations/objects.sqlite", _half), "objects.sqlite"),
    ("objects-garbage", _each("generations/objects.sqlite", _garbage), "objects.sqlite"),
    ("vector-queue-half", _each("index/pending.sqlite", _half), "pending.sqlite"),
    ("vector-queue-garbage", _each("index/pending.sqlite", _garbage), "pending.sqlite"),
    ("embcache-half", _each("embcache.sqlite", _half), "embcache.sqlite"),
    ("embcache-garbage", _each("embcache.sqlite", _garbage), "embcache.sqlite"),
    ("tantivy-segment-garbage", _each("index/lexical/*.store", _garbage), "index/lexical"),
    ("tantivy-segment-half", _each("index/lexical/*.idx", _half), "index/lexical"),
    ("tantivy-meta-garbage", _each("index/lexical/meta.json", _garbage), "index/lexical"),
    ("lance-data-garbage", _each("index/vectors/*/data/*.lance", _garbage), "index/vectors"),
    ("lance-manifest-garbage", _each("index/vectors/*/_versions/*.manifest", _garbage), "index/vectors"),
    ("generation-flip", _each("generations/gens/*.json", _flip), "generation"),
    ("current-garbage", _each("generations/current", _garbage), "current"),
    ("journal-missing-field", _journal_missing_field, "journal"),
    ("pending-write-garbage", _pending_write_garbage, "pw-01garbage"),
]


def _notes(vault: Path) -> dict[str, bytes]:
    return {p.relative_to(vault).as_posix(): p.read_bytes() for p in vault.rglob("*.md")
            if ".hive-brain" not in p.parts}


def _ranked(res: dict) -> list[tuple[str, float]]:
    return [(h["path"], round(h["score"], 6)) for h in res["hits"]]


@pytest.mark.slow
@pytest.mark.parametrize("case,damage,named", CASES, ids=[c[0] for c in CASES])
def test_damaged_state_file_is_detected_reported_and_rebuilt(vault_path, with_model, case, damage, named):
    remember("Package manager", "Use pnpm, never npm, for JavaScript projects.")
    remember("Release steps", "Tag the commit, push the tag; CI publishes the wheel.", "procedure")
    remember("Analytics database", "Analytics events live in ClickHouse; Postgres was too slow.", "decision")
    (vault_path / "Projects/Deploy.md").write_text("# Deploy\n\nWe deploy with Kamal to Hetzner.\n")
    code, built, _ = _cli("rebuild-index")
    assert code == 0 and built["vectors"]["pending"] == 0
    code, before, _ = _cli("recall", QUESTION)
    assert code == 0 and before["hits"] and not before["warnings"]
    notes = _notes(vault_path)
    state = Engine.open().vault.state
    gc.collect()  # as when those commands' processes exit: SQLite connections close, WAL files fold in
    assert not list(state.rglob("*.sqlite-wal")), list(state.rglob("*.sqlite-wal"))

    damage(state)

    code, _status, _ = _cli("status")
    assert code == 0
    code, doc, _ = _cli("doctor")
    # doctor exits 1 when it found (and fixed) damage itself; status may have moved the file aside first.
    assert code == (1 if doc["damagedNow"] or doc["problems"] or doc["conflicts"] else 0), doc
    assert named in json.dumps(doc), doc  # doctor names what was damaged
    code, meanwhile, _ = _cli("recall", QUESTION)
    assert code == 0 and meanwhile["hits"], meanwhile  # answers meanwhile
    code, rebuilt, _ = _cli("rebuild-index")
    assert code == 0, rebuilt
    code, after, _ = _cli("recall", QUESTION)
    assert code == 0 and _ranked(after) == _ranked(before), (before, after)
    assert not [w for w in after["warnings"] if "damaged" in w]
    code, wrote, _ = _cli("remember", "--type", "fact", "--title", "After damage", "--content", "Writes still work.")
    assert code == 0 and wrote["status"] == "created"
    now = _notes(vault_path)
    assert {p: now[p] for p in notes} == notes  # recovery never touched a note
    assert set(now) - set(notes) == {wrote["path"]}


def test_journal_record_missing_a_field_is_kept_aside_not_dropped(vault_path):
    remember("Package manager", "Use pnpm.")
    state = Engine.open().vault.state
    _journal_missing_field(state)
    staged = vault_path / ".hive-brain/staging/01deadbeef"
    staged.mkdir(parents=True)
    (staged / "0.md").write_text("an acknowledged write's staged bytes\n")
    code, doc, _ = _cli("doctor")
    assert code == 0
    q = [r for r in doc["recovered"] if r["id"] == "01deadbeef"]
    assert q and q[0]["action"] == "quarantined" and "staged" in q[0]["problem"]
    kept = state / "journal/damaged/01deadbeef"
    assert (kept / "01deadbeef.json").exists()
    assert (kept / "staged/0.md").read_text() == "an acknowledged write's staged bytes\n"
    assert not staged.exists() and not (state / "journal/01deadbeef.json").exists()
    assert any(d["movedTo"] == "journal/damaged/01deadbeef" for d in doc["damaged"])
    code, wrote, _ = _cli("remember", "--type", "fact", "--title", "Still writable", "--content", "Yes.")
    assert code == 0 and wrote["status"] == "created"


# -- the operational-events and usage logs (stop 19's gap) -------------------------------------------

def _oplog_torn(p: Path) -> None:
    data = p.read_bytes()
    p.write_bytes(data[: len(data) - 25])  # the last record loses its tail and its newline


def _oplog_garbage_line(p: Path) -> None:
    lines = p.read_bytes().splitlines(keepends=True)
    p.write_bytes(b"".join([lines[0], b"\xff\x00{not json at all\n", *lines[1:]]))


def _oplog_garbage_file(p: Path) -> None:
    p.write_bytes(os.urandom(3000).replace(b"\n", b"x"))  # no newline: one long unreadable "line"


def _record_op(n: int) -> dict:
    return _cli("record-operation", "--title", f"Deploy run {n}", "--content", f"Deploy {n} went fine.",
                "--operation-key", "deploy.web", "--outcome", "success", "--task-id", f"TASK-{n}")[1]


@pytest.mark.parametrize("damage,kept", [(_oplog_torn, 2), (_oplog_garbage_line, 3), (_oplog_garbage_file, 0)],
                         ids=["torn-last-line", "garbage-line", "garbage-file"])
def test_damaged_operational_log_is_read_around_reported_and_still_appended_to(vault_path, damage, kept):
    from hive_brain.memory.operations import operation_log, visible_events

    ids = [_record_op(n)["id"] for n in range(3)]
    state = Engine.open().vault.state
    log = operation_log(state)
    damage(log.path)
    assert [e["id"] for e in visible_events(state, None)] == ids[:kept]  # readable records survive
    after = _record_op(9)  # an append after the damage is a whole, readable record
    assert [e["id"] for e in visible_events(state, None)] == [*ids[:kept], after["id"]]
    code, doc, _ = _cli("doctor")
    assert code == 0
    assert any("operational-events.jsonl" in w and "unreadable" in w for w in doc["warnings"]), doc["warnings"]
    code, res, _ = _cli("recall", "deploy run", "--include-operational", "--lexical")
    assert code == 0 and after["id"] in {e["id"] for e in res["operational"]}


def test_a_damaged_pending_write_record_is_moved_aside_and_reported(vault_path):
    remember("Package manager", "Use pnpm.")
    state = Engine.open().vault.state
    _pending_write_garbage(state)
    code, doc, _ = _cli("doctor")
    d = state / "pending-writes"
    assert not (d / "pw-01garbage.json").exists()  # not left in place to be tripped over again
    aside = [p for p in d.iterdir() if p.name.startswith("pw-01garbage.json.damaged-")]
    assert len(aside) == 1 and aside[0].read_bytes() == b"\xff\x00 not json"  # kept, byte for byte
    assert any(x["file"] == "pending-writes/pw-01garbage.json" for x in doc["damaged"]), doc["damaged"]
    code, status, _ = _cli("status")
    assert any(x["file"] == "pending-writes/pw-01garbage.json" for x in status["damaged"])
    assert not [p for p in status["pendingWrites"] if p["id"] == "pw-01garbage"]
    code, wrote, _ = _cli("remember", "--type", "fact", "--title", "Still writable", "--content", "Yes.")
    assert code == 0 and wrote["status"] == "created"


def test_a_folder_where_the_lock_file_belongs_is_moved_aside_and_writes_go_on(vault_path):
    """A `lock` that is a directory (a mistaken mkdir, a sync tool) gave every write and doctor a
    traceback and needed a manual fix; it is moved aside, kept with what it held, and reported."""
    remember("Package manager", "Use pnpm.")
    state = Engine.open().vault.state
    lock = state / "lock"
    lock.unlink()
    lock.mkdir()
    (lock / "something.txt").write_text("kept", encoding="utf-8")
    code, wrote, _ = _cli("remember", "--type", "fact", "--title", "Still writable", "--content", "Yes.")
    assert code == 0 and wrote["status"] == "created", wrote
    assert lock.is_file()
    aside = [p for p in state.iterdir() if p.name.startswith("lock.damaged-")]
    assert len(aside) == 1 and (aside[0] / "something.txt").read_text(encoding="utf-8") == "kept"
    code, status, _ = _cli("status")
    assert code == 0 and any(x["file"] == "lock" for x in status["damaged"]), status["damaged"]
    code, doc, _ = _cli("doctor")
    assert code == 0, doc
    # What status and doctor say of it is what happened at the repair: a lock is replaced by a new
    # lock file, not "rebuilt from the notes" (which they said of every file moved aside).
    assert [x["fate"] for x in doc["damaged"] if x["file"] == "lock"] == ["replaced by a new lock file"]
    for cmd in ("status", "doctor"):
        shown = CliRunner().invoke(main, [cmd], catch_exceptions=False).output
        assert "lock was moved aside as lock.damaged-" in shown and "replaced by a new lock file" in shown, shown
        assert "rebuilt from the notes" not in shown, shown


def test_a_damaged_generation_is_warned_of_once(vault_path):
    """The fall-back to the newest verified generation is found at each of a command's looks at
    `current` (its catch-up, the publish, the view); recall printed the same warning twice."""
    remember("Package manager", "Use pnpm.")
    remember("Release steps", "Tag the commit, push the tag.", "procedure")
    state = Engine.open().vault.state
    newest = sorted((state / "generations" / "gens").glob("*.json"))[-1]
    newest.write_text("junk", encoding="utf-8")
    code, res, _ = _cli("recall", "package manager")
    assert code == 0 and res["hits"]
    damaged = [w for w in res["warnings"] if "is damaged" in w]
    assert len(damaged) == 1, res["warnings"]
