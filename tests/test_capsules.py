"""Brain capsules on real files: scope, round trip through Brain Review proposals, any flipped byte
refused naming its check, encryption (no plaintext, wrong passphrase), expiry by the clock alone,
truncated and wrong-format files, private layers, secrets, owner-only locking."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pytest

from hive_brain.config import resolve
from hive_brain.errors import CapsuleRefused, PermissionDenied
from hive_brain.memory.capsules import read_capsule
from hive_brain.store import capsule as fmt
from hive_brain.store.vault import init_vault
from tests.helpers import cli_as, remember, run

CHECKS = {"format", "truncated", "integrity", "manifest", "records", "passphrase", "expiry"}
ATLAS = [
    ("fact", "Atlas deploy window", "Atlas deploys with `make ship` on Tuesdays after the freeze lifts."),
    ("decision", "Atlas database", "Atlas stays on Postgres 16; the Mongo experiment was dropped."),
    ("procedure", "Atlas rollback", "Roll back Atlas with `make rollback TAG=previous`, then page #atlas."),
    ("preference", "Atlas code style", "Atlas uses black with line length 100 and isort profile black."),
]


@pytest.fixture
def atlas(vault_path) -> list[dict]:
    out = [remember(t, c, ty, "--project", "atlas", "--tags", "atlas,ops") for ty, t, c in ATLAS]
    remember("Zephyr deploy", "Zephyr deploys by hand.", "fact", "--project", "zephyr")
    return out


def _export(tmp_path: Path, *args: str, name: str = "atlas.hivebrain", ok: bool = True) -> dict:
    return run("capsule-export", "--project", "atlas", "--output", str(tmp_path / name), *args, ok=ok)


def _other_vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault-b"
    init_vault(root, resolve(vault=str(root)))
    return root


def test_export_needs_an_explicit_scope(vault_path, atlas, tmp_path):
    res = run("capsule-export", "--output", str(tmp_path / "x.hivebrain"), ok=False)
    assert res["_exit"] == 2 and "explicit scope" in res["message"]
    assert not (tmp_path / "x.hivebrain").exists()
    none = run("capsule-export", "--project", "nope", "--output", str(tmp_path / "x.hivebrain"), ok=False)
    assert "nothing to export" in none["message"]


def test_round_trip_any_flipped_byte_is_refused_and_proposals_equal_the_exports(vault_path, atlas, tmp_path):
    res = _export(tmp_path, "--expires", "30d")
    assert res["records"] == 4 and not res["encrypted"]
    path = Path(res["capsule"])
    opened = run("capsule-open", "--capsule", str(path))
    assert opened["verified"] and opened["manifest"]["recordCount"] == 4
    assert opened["provenance"]["exporter"] == "owner" and opened["provenance"]["generation"] is not None
    assert {r["title"] for r in opened["records"]} == {t for _, t, _ in ATLAS}  # Zephyr stays home

    data = path.read_bytes()
    settings = resolve()
    positions = sorted(set(range(0, 256, 3)) | set(range(0, len(data), 89)) | {len(data) - 1})
    for pos in positions:
        bad = bytearray(data)
        bad[pos] ^= 0x01
        path.write_bytes(bytes(bad))
        with pytest.raises(CapsuleRefused) as exc:
            read_capsule(settings, path)
        assert exc.value.check in CHECKS, (pos, exc.value)
    bad = bytearray(data)
    bad[len(data) // 2] ^= 0x20
    path.write_bytes(bytes(bad))
    refused = run("capsule-import", "--capsule", str(path), ok=False)
    assert refused["_exit"] == 1 and refused["error"] == "CapsuleRefused" and refused["check"] == "integrity"
    path.write_bytes(data)

    # Into another vault: a preview first (nothing written), then Brain Review proposals only.
    other = _other_vault(tmp_path)
    memory_before = sorted((other / "Memory").rglob("*.md"))
    preview = run("--vault", str(other), "capsule-import", "--capsule", str(path))
    assert preview["dryRun"] and preview["counts"] == {"propose": 4}
    assert not list((other / "Operations" / "Brain Review").glob("*.md"))
    queued = run("--vault", str(other), "capsule-import", "--capsule", str(path), "--enqueue")
    assert queued["counts"] == {"proposed": 4}
    assert sorted((other / "Memory").rglob("*.md")) == memory_before  # never written as memory
    listed = {p["id"]: p for p in run("--vault", str(other), "review", "list")}
    for r in queued["records"]:
        src = run("get", r["memoryId"])
        prop = run("--vault", str(other), "review", "show", r["proposal"])
        pm = prop["meta"]
        assert listed[r["proposal"]]["kind"] == "import"
        for k in ("type", "title", "memory_key", "project", "tags", "aliases", "confidence"):
            assert pm.get(k) == src["meta"].get(k), (k, pm.get(k), src["meta"].get(k))
        assert prop["content"].strip("\n") == src["content"]

    # The same capsule again: each record says it is already waiting.
    again = run("--vault", str(other), "capsule-import", "--capsule", str(path))
    assert again["counts"] == {"skip": 4} and all("already waiting" in r["reason"] for r in again["records"])


def test_import_says_when_a_memory_already_exists(vault_path, atlas, tmp_path):
    path = _export(tmp_path)["capsule"]
    res = run("capsule-import", "--capsule", path)
    assert all(r["exists"]["by"] == "content" and r["action"] == "skip" for r in res["records"])
    # Same key, new content: proposed as an evolution of the memory that has it.
    run("evolve", atlas[1]["id"], "--content", "Atlas moves to Postgres 17 in Q1.")
    res = run("capsule-import", "--capsule", path)
    db = next(r for r in res["records"] if r["title"] == "Atlas database")
    assert db["action"] == "propose" and db["exists"]["by"] == "memoryKey" and db["evolves"]


def test_encrypted_capsule_hides_everything_and_refuses_the_wrong_passphrase(vault_path, atlas, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPSULE_PASS", "correct horse battery staple")
    res = _export(tmp_path, "--passphrase-env", "CAPSULE_PASS", "--expires", "7d")
    assert res["encrypted"]
    data = Path(res["capsule"]).read_bytes()
    for _ty, title, content in ATLAS:
        for text in (title, content, *content.split()):
            if len(text) >= 5:
                assert text.encode() not in data, text
    assert b"atlas" not in data.lower() and b"SQLite" not in data
    ok = run("capsule-open", "--capsule", res["capsule"], "--passphrase-env", "CAPSULE_PASS")
    assert ok["encrypted"] and "passphrase" in ok["checks"] and ok["manifest"]["recordCount"] == 4

    monkeypatch.setenv("WRONG", "correct horse battery stapler")
    wrong = run("capsule-open", "--capsule", res["capsule"], "--passphrase-env", "WRONG", ok=False)
    assert wrong["check"] == "passphrase" and wrong["_exit"] == 1
    missing = run("capsule-search", "deploy", "--capsule", res["capsule"], ok=False)
    assert missing["check"] == "passphrase"
    monkeypatch.setenv("EMPTY", "")
    empty = run("capsule-open", "--capsule", res["capsule"], "--passphrase-env", "EMPTY", ok=False)
    assert empty["_exit"] == 2 and "empty" in empty["message"]
    unset = _export(tmp_path, "--passphrase-env", "NOT_SET_ANYWHERE", name="u.hivebrain", ok=False)
    assert unset["_exit"] == 2 and "not set" in unset["message"] and not (tmp_path / "u.hivebrain").exists()

    # Tampering under the encryption is caught by the AEAD tag, whatever byte it is.
    path = Path(res["capsule"])
    for pos in range(0, len(data), max(1, len(data) // 40)):
        bad = bytearray(data)
        bad[pos] ^= 0x04
        path.write_bytes(bytes(bad))
        with pytest.raises(CapsuleRefused) as exc:
            read_capsule(resolve(), path, passphrase="correct horse battery staple")
        assert exc.value.check in CHECKS
    path.write_bytes(data)

    # Only the owner locks or opens a locked capsule.
    denied = cli_as("capsule-open", "--capsule", res["capsule"], "--passphrase-env", "CAPSULE_PASS", agent="codex", ok=False)
    assert denied["error"] == "PermissionDenied"
    denied = cli_as("capsule-export", "--project", "atlas", "--output", str(tmp_path / "c.hivebrain"),
                    "--passphrase-env", "CAPSULE_PASS", agent="codex", ok=False)
    assert denied["error"] == "PermissionDenied"
    agent_ok = cli_as("capsule-export", "--project", "atlas", "--output", str(tmp_path / "c.hivebrain"), agent="codex")
    assert agent_ok["records"] == 4 and not agent_ok["encrypted"]


def test_expired_capsule_refused_when_only_the_clock_moves(vault_path, atlas, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPSULE_PASS", "pw-for-expiry")
    plain = Path(_export(tmp_path, "--expires", "30d")["capsule"])
    locked = Path(_export(tmp_path, "--expires", "30d", "--passphrase-env", "CAPSULE_PASS", name="l.hivebrain")["capsule"])
    before = (plain.read_bytes(), locked.read_bytes())
    now = dt.datetime.now(dt.UTC)
    assert read_capsule(resolve(), plain, now=now + dt.timedelta(days=29)).manifest["record_count"] == 4
    for path, pw in ((plain, None), (locked, "pw-for-expiry")):
        with pytest.raises(CapsuleRefused) as exc:
            read_capsule(resolve(), path, passphrase=pw, now=now + dt.timedelta(days=30, minutes=1))
        assert exc.value.check == "expiry"
    assert (plain.read_bytes(), locked.read_bytes()) == before
    past = _export(tmp_path, "--expires", "2020-01-01", name="p.hivebrain", ok=False)
    assert "already past" in past["message"]


def test_truncated_and_wrong_format_files_are_refused(vault_path, atlas, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPSULE_PASS", "pw")
    settings = resolve()
    for name, pw in (("t.hivebrain", None), ("e.hivebrain", "pw")):
        data = Path(_export(tmp_path, *(("--passphrase-env", "CAPSULE_PASS") if pw else ()), name=name)["capsule"]).read_bytes()
        cut = tmp_path / ("cut-" + name)
        for n in (0, 1, 10, 20, 99, 100, 4096, len(data) // 2, len(data) - 1):
            cut.write_bytes(data[:n])
            with pytest.raises(CapsuleRefused) as exc:
                read_capsule(settings, cut, passphrase=pw)
            assert exc.value.check == "truncated", (name, n, exc.value)
        cut.write_bytes(data + b"\x00")
        with pytest.raises(CapsuleRefused) as exc:
            read_capsule(settings, cut, passphrase=pw)
        assert exc.value.check == "integrity"

    junk = tmp_path / "junk.hivebrain"
    junk.write_bytes(b"# just a markdown note\n" * 20)
    other_db = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other_db)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    for f in (junk, other_db):
        res = run("capsule-open", "--capsule", str(f), ok=False)
        assert res["check"] == "format", res
    newer = bytearray(Path(tmp_path / "t.hivebrain").read_bytes())
    newer[len(fmt.ENC_MAGIC)] = 9
    (tmp_path / "n.hivebrain").write_bytes(fmt.ENC_MAGIC + b"\x09" + bytes(newer[len(fmt.ENC_MAGIC) + 1:]))
    assert run("capsule-open", "--capsule", str(tmp_path / "n.hivebrain"), ok=False)["check"] == "format"


def test_private_and_task_memories_leave_only_when_the_owner_names_them(vault_path, atlas, tmp_path):
    mine = cli_as("remember", "--type", "fact", "--title", "Codex atlas scratch", "--content",
                  "Codex keeps its atlas scratch notes here.", "--project", "atlas", agent="codex")
    res = _export(tmp_path)
    assert res["records"] == 4 and res["privateLeftOut"] == 1
    titles = {r["title"] for r in run("capsule-open", "--capsule", res["capsule"])["records"]}
    assert "Codex atlas scratch" not in titles
    by_id = run("capsule-export", "--memory-ids", mine["id"], "--output", str(tmp_path / "m.hivebrain"), ok=False)
    assert "--include-private" in by_id["hint"] and not (tmp_path / "m.hivebrain").exists()
    full = _export(tmp_path, "--include-private", name="full.hivebrain")
    opened = run("capsule-open", "--capsule", full["capsule"])
    assert full["records"] == 5 and opened["layers"] == {"shared": 4, "private": 1}
    denied = cli_as("capsule-export", "--project", "atlas", "--include-private", "--output",
                    str(tmp_path / "a.hivebrain"), agent="codex", ok=False)
    assert denied["error"] == "PermissionDenied"
    agent_export = cli_as("capsule-export", "--project", "atlas", "--output", str(tmp_path / "a.hivebrain"), agent="codex")
    assert agent_export["records"] == 4 and "privateLeftOut" not in agent_export


def test_secrets_never_leave_in_a_capsule(vault_path, atlas, tmp_path):
    note = vault_path / atlas[0]["path"]
    secret = "AKIAIOSFODNN7EXAMPLE"
    note.write_text(note.read_text(encoding="utf-8") + f"\nHand-edited: aws key {secret}\n", encoding="utf-8")
    res = _export(tmp_path)
    assert res["secretsRedacted"] == 1
    data = Path(res["capsule"]).read_bytes()
    assert secret.encode() not in data and b"[redacted" in data


def test_search_ranks_inside_the_capsule_without_importing(vault_path, atlas, tmp_path):
    path = _export(tmp_path)["capsule"]
    res = run("capsule-search", "rollback previous tag", "--capsule", path)
    assert res["hits"][0]["title"] == "Atlas rollback"
    assert run("capsule-search", "kubernetes", "--capsule", path)["hits"] == []
    # A word every record holds ("atlas") still counts, and scores say how well each hit matched: with
    # FTS5's clamped idf every score of a small capsule was 0.000.
    hits = run("capsule-search", "atlas rollback", "--capsule", path)["hits"]
    assert len(hits) == len(ATLAS) and hits[0]["title"] == "Atlas rollback"
    scores = [h["score"] for h in hits]
    assert all(x >= 0.001 for x in scores) and scores == sorted(scores, reverse=True), scores
    assert scores[0] > 2 * scores[1]


def test_an_agent_may_not_open_a_locked_capsule(vault_path, tmp_path):
    p = tmp_path / "lk.hivebrain"
    p.write_bytes(fmt.lock(fmt.build([], {"encrypted": True}), "pw"))
    assert read_capsule(resolve(), p, passphrase="pw").records == []
    with pytest.raises(PermissionDenied):
        read_capsule(resolve().replace(agent_id="codex"), p, passphrase="pw")


def test_capsule_json_is_camel_case(vault_path, atlas, tmp_path):
    from tests.test_json_casing import snake_keys

    exp = _export(tmp_path, "--expires", "3d")
    outputs = {"export": exp, "open": run("capsule-open", "--capsule", exp["capsule"]),
               "search": run("capsule-search", "atlas deploy", "--capsule", exp["capsule"]),
               "import": run("capsule-import", "--capsule", exp["capsule"]),
               "refused": run("capsule-open", "--capsule", str(tmp_path / "none.hivebrain"), ok=False)}
    assert {k: snake_keys(v) for k, v in outputs.items() if snake_keys(v)} == {}


def test_memory_ids_scope_takes_current_memories_only(vault_path, atlas, tmp_path):
    ids = f"{atlas[0]['id']},{atlas[2]['id']}"
    res = run("capsule-export", "--memory-ids", ids, "--output", str(tmp_path / "two.hivebrain"))
    opened = run("capsule-open", "--capsule", res["capsule"])
    assert [r["memoryId"] for r in opened["records"]] == [atlas[0]["id"], atlas[2]["id"]]
    assert opened["scope"]["memoryIds"] == [atlas[0]["id"], atlas[2]["id"]]
    new = run("evolve", atlas[0]["id"], "--content", "Atlas deploys on Wednesdays now.")
    old = run("capsule-export", "--memory-ids", atlas[0]["id"], "--output", str(tmp_path / "old.hivebrain"), ok=False)
    assert "current memories only" in old["message"] and new["id"] in old["hint"]
    again = run("capsule-export", "--memory-ids", ids, "--output", str(tmp_path / "two.hivebrain"), ok=False)
    assert "already exists" in again["message"]


def test_a_hostile_capsule_record_is_refused_by_the_write_rules_not_proposed(vault_path, tmp_path):
    def rec(i: int, title: str, content: str) -> dict:
        return {"memory_id": f"mem-{i}", "memory_key": None, "type": "fact", "title": title, "project": "x",
                "layer": "shared", "agent": None, "task": None, "tags": "[]", "aliases": "[]", "confidence": None,
                "created": None, "updated": None, "content": content, "content_hash": ""}

    p = tmp_path / "hostile.hivebrain"
    p.write_bytes(fmt.build([rec(1, "Fine", "A fine memory."), rec(2, "Bell\x07title", "Rings."),
                             rec(3, "Key", "aws AKIAIOSFODNN7EXAMPLE here")], {"encrypted": False}))
    res = run("capsule-import", "--capsule", str(p), "--enqueue")
    by_id = {r["memoryId"]: r for r in res["records"]}
    assert by_id["mem-1"]["action"] == "proposed"
    assert by_id["mem-2"]["action"] == "refused" and "U+0007" in by_id["mem-2"]["reason"]
    assert by_id["mem-3"]["action"] == "proposed" and by_id["mem-3"]["redacted"]
    shown = run("review", "show", by_id["mem-3"]["proposal"])
    assert "AKIAIOSFODNN7EXAMPLE" not in shown["content"] and "[redacted" in shown["content"]


def test_an_unreadable_expiry_date_is_treated_as_expired(vault_path, tmp_path):
    p = tmp_path / "odd.hivebrain"
    p.write_bytes(fmt.build([], {"encrypted": False, "expires": "next tuesday"}))
    assert run("capsule-open", "--capsule", str(p), ok=False)["check"] == "expiry"


def test_a_capsule_may_be_named_as_an_argument_as_well_as_with_capsule(vault_path, atlas, tmp_path):
    """``capsule-search QUERY FILE`` (or a lone ``capsule-search FILE``) was refused as "Missing option
    '--capsule'": the path given as most commands take one was not read as the capsule. It is now, in
    either order beside the query, and in ``capsule-open``/``capsule-import``; ``--capsule`` stays."""
    from click.testing import CliRunner

    from hive_brain.cli.app import main

    path = _export(tmp_path)["capsule"]
    want = run("capsule-search", "rollback previous tag", "--capsule", path)
    assert want["hits"][0]["title"] == "Atlas rollback"
    assert run("capsule-search", "rollback previous tag", path) == want  # as grep: the query, then the file
    assert run("capsule-search", path, "rollback previous tag") == want  # the file first reads as meant too
    assert run("capsule-open", path) == run("capsule-open", "--capsule", path)
    assert run("capsule-import", path) == run("capsule-import", "--capsule", path)
    for args, says in (((path,), "what to search for"), (("rollback",), "which capsule"),
                       (("rollback", path, "--capsule", str(tmp_path / "other.hivebrain")), "two capsules")):
        res = run("capsule-search", *args, ok=False)
        assert res["_exit"] == 2 and res["error"] == "UsageError" and says in res["message"], res
        assert "\n" not in res["message"] and ("--capsule" in res["message"] + res["hint"] or args == (path,)), res
        assert f'capsule-search "deploy checklist" {path}' in res["hint"] or args != (path,), res
    res = run("capsule-open", ok=False)
    assert res["_exit"] == 2 and "which capsule" in res["message"] and "capsule-open FILE" in res["hint"], res
    for cmd in ("capsule-search", "capsule-open", "capsule-import"):
        usage = CliRunner().invoke(main, [cmd, "--help"]).output
        assert "[FILE]" in usage and f"hive-brain {cmd} " in usage, usage
    assert 'capsule-search "deploy checklist" atlas.hivebrain' in CliRunner().invoke(main, ["capsule-search", "--help"]).output
