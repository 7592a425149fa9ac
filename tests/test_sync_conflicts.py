"""Sync conflicts on real files: a superseded note that a sync (or an undo) brought back as
``status: active``, and copies of a note (Obsidian "Make a copy", Syncthing, Dropbox, iCloud) that
share its memory id. Status is derived from the whole chain, one id is one memory, and
`repair-conflicts` leaves one active head per key and per id without deleting a file."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hive_brain.engine import Engine
from hive_brain.store.copies import copy_kind, has_git_markers, original_of

from .helpers import doctor, remember, run


def _hits_for(res: dict, *ids: str) -> list[dict]:
    return [h for h in res["hits"] if h["id"] in ids]


def test_resurrected_superseded_note_is_not_current(vault_path: Path) -> None:
    v1 = remember("Deploy region", "Production deploys go to region eu-west-1 on Fridays.", "decision")
    old = vault_path / v1["path"]
    before = old.read_bytes()
    v2 = run("evolve", "--memory-id", v1["id"], "--content", "Production deploys go to region eu-central-1 on Fridays.")
    old.write_bytes(before)  # a sync (or an undo) restores the old version's note: status active again
    res = run("recall", "which region do production deploys go to on fridays", "--scope", "full-vault")
    hits = _hits_for(res, v1["id"], v2["id"])
    assert [h["id"] for h in hits] == [v2["id"]], hits
    assert hits[0]["status"] == "active"
    assert "eu-central-1" in hits[0]["passage"]["text"]
    # The prompt hook (its own process, the index as it stands) injects only the current fact.
    from .test_hooks import context_of, hook

    code, out, err, _ = hook("prompt", {"session_id": "s1", "hook_event_name": "UserPromptSubmit",
                                        "prompt": "which region do production deploys go to on fridays?",
                                        "cwd": str(vault_path)})
    assert code == 0, err
    assert "eu-central-1" in context_of(out) and "eu-west-1" not in context_of(out)
    # Replaying the generation derives the same status from the notes it holds.
    rep = run("replay", "which region do production deploys go to on fridays", "--generation",
              str(res["generation"]))
    assert [h["id"] for h in _hits_for(rep, v1["id"], v2["id"])] == [v2["id"]], rep
    got = run("get", "--memory-id", v1["id"])
    assert got["status"] == "superseded" and got["meta"]["status"] == "active"
    assert any(c["kind"] == "resurrected" for c in got["syncConflicts"])
    doc = doctor()
    assert [(c["kind"], c["id"]) for c in doc["conflicts"]] == [("resurrected", v1["id"])]
    assert run("health")["conflicts"] == 1
    assert [c["kind"] for c in run("conflicts")] == ["resurrected"]
    refused = run("evolve", "--memory-id", v1["id"], "--content", "Deploys go to us-east-1.", ok=False)
    assert refused["_exit"] != 0 and v2["id"] in json.dumps(refused)  # "evolve the head of the chain (<v2>)"


def _copies(vault_path: Path, rel: str) -> list[Path]:
    src = vault_path / rel
    stem = src.name.removesuffix(".md")
    made = [src.with_name(f"{stem} 1.md"), src.with_name(f"{stem}.sync-conflict-20261130-101010-ABCDEFG.md")]
    for p in made:
        shutil.copyfile(src, p)
    return made


def test_copies_share_one_id_and_evolve_covers_them(vault_path: Path) -> None:
    m = remember("Prod region", "The production cluster runs in region ap-south-1 behind Cloudflare.", "decision")
    _copies(vault_path, m["path"])
    res = run("recall", "which region does the production cluster run in", "--scope", "full-vault")
    hits = _hits_for(res, m["id"])
    assert len(hits) == 1, hits
    assert hits[0]["path"] == m["path"]
    assert len(hits[0]["idConflict"]["copies"]) == 2
    doc = doctor()
    assert [(c["kind"], c["id"]) for c in doc["conflicts"]] == [("duplicateId", m["id"])]
    assert len(doc["conflicts"][0]["copies"]) == 2
    assert run("health")["conflicts"] == 1
    new = run("evolve", "--memory-id", m["id"], "--content", "The production cluster moved to region ap-east-1.")
    res = run("recall", "which region does the production cluster run in", "--scope", "full-vault")
    assert [h["id"] for h in res["hits"] if h["id"] in (m["id"], new["id"])] == [new["id"]]
    eng = Engine.open()
    eng.catalog.refresh()
    assert {e.status for e in eng.catalog.select("id = ?", (m["id"],))} == {"superseded"}


def test_copy_names_of_every_sync_tool() -> None:
    assert copy_kind("Memory/a-b-1x2y3z 1.md") == "numbered-copy"  # Obsidian "Make a copy"
    assert copy_kind("Memory/a 2.md") == "numbered-copy"  # iCloud
    assert copy_kind("Memory/a (1).md") == "numbered-copy"  # Google Drive
    assert copy_kind("Memory/a.sync-conflict-20261130-101010-ABCDEFG.md") == "syncthing"
    assert copy_kind("Memory/a (Jane's conflicted copy 2026-11-30).md") == "conflicted-copy"  # Dropbox
    assert copy_kind("Memory/a (Conflicted copy Laptop 202611301010).md") == "conflicted-copy"  # Obsidian Sync
    assert copy_kind("Memory/prod-region-1swvvg.md") is None
    assert copy_kind("Memory/Release 2.0 plan.md") is None
    assert original_of("Memory/a.sync-conflict-20261130-101010-ABCDEFG.md") == "Memory/a.md"
    assert original_of("Memory/a (Jane's conflicted copy 2026-11-30).md") == "Memory/a.md"
    assert original_of("a 1.md") == "a.md"
    assert has_git_markers("x\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> main\n")
    assert not has_git_markers("Title\n=======\n\nbody")


# -- two devices, synced by copying files both ways --------------------------------------------------
class Device:
    """One device: its own vault folder and its own state dir, driven by real `hive-brain` processes."""

    def __init__(self, root: Path, name: str) -> None:
        self.name = name
        self.vault = root / name / "vault"
        self.env = {**os.environ, "HIVE_BRAIN_VAULT": str(self.vault), "HIVE_BRAIN_STATE_DIR": str(root / name / "state"),
                    "HIVE_BRAIN_USE_SERVER": "0", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}

    def cli(self, *args: str) -> Any:
        p = subprocess.run([sys.executable, "-m", "hive_brain", *args, "--json"], env=self.env, capture_output=True,
                           text=True, timeout=300)
        # `doctor` exits 1 when it found something to fix: that is its answer, not a failure.
        assert p.returncode == 0 or (args[:1] == ("doctor",) and p.returncode == 1), (self.name, args, p.stdout, p.stderr)
        return json.loads(p.stdout)

    def files(self) -> dict[str, str]:
        """Every file of the vault that sync carries (the staging folder is transient) -> sha256."""
        out = {}
        for f in sorted(self.vault.rglob("*")):
            rel = f.relative_to(self.vault).as_posix()
            if f.is_file() and not rel.startswith(".hive-brain/staging"):
                out[rel] = hashlib.sha256(f.read_bytes()).hexdigest()
        return out


def _sync(a: Device, b: Device, base: dict[str, str]) -> dict[str, str]:
    """A Syncthing-like pass both ways: a note changed on one side is copied to the other; one changed
    on both keeps the newer file under its name and the older one as a `.sync-conflict-` copy on both
    devices. Returns the new common state (the base of the next pass)."""
    fa, fb = a.files(), b.files()
    for rel in sorted(set(fa) | set(fb)):
        ha, hb = fa.get(rel), fb.get(rel)
        if ha == hb:
            continue
        if hb == base.get(rel):
            src, dst = a, b
        elif ha == base.get(rel):
            src, dst = b, a
        else:  # changed on both devices: a conflict
            pa, pb = a.vault / rel, b.vault / rel
            newer, older = (a, b) if pa.stat().st_mtime_ns >= pb.stat().st_mtime_ns else (b, a)
            conflict = rel.removesuffix(".md") + ".sync-conflict-20261130-101010-ABCDEFG.md"
            for dev in (a, b):
                (dev.vault / conflict).write_bytes((older.vault / rel).read_bytes())
            (older.vault / rel).write_bytes((newer.vault / rel).read_bytes())
            continue
        (dst.vault / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src.vault / rel, dst.vault / rel)
    assert a.files() == b.files()
    return a.files()


def _heads(dev: Device, query: str, *ids: str) -> list[dict]:
    res = dev.cli("recall", query, "--scope", "full-vault", "--limit", "20")
    return [h for h in res["hits"] if h["id"] in ids]


def test_two_devices_synced_by_copying_files(tmp_path: Path) -> None:
    a, b = Device(tmp_path, "laptop"), Device(tmp_path, "desktop")
    a.cli("init", str(a.vault))
    m1 = a.cli("remember", "--type", "decision", "--title", "Deploy region",
               "--content", "Production deploys go to region eu-west-1 on Fridays.")
    m2 = a.cli("remember", "--type", "fact", "--title", "Prod cluster",
               "--content", "The production cluster runs Kubernetes 1.28 on six nodes.")
    b.vault.mkdir(parents=True)
    base = _sync(a, b, {})
    m1_old = (b.vault / m1["path"]).read_bytes()

    # Offline on both: the laptop evolves m1; both change m2; both remember the same thing.
    m1b = a.cli("evolve", "--memory-id", m1["id"], "--content", "Production deploys go to region eu-central-1 on Fridays.")
    a.cli("update", "--memory-id", m2["id"], "--content", "The production cluster runs Kubernetes 1.29 on six nodes.")
    time.sleep(1.1)  # the desktop's edit is the newer one (`updated` has whole seconds): it is the head
    b.cli("update", "--memory-id", m2["id"], "--content", "The production cluster runs Kubernetes 1.28 on eight nodes.")
    ra = a.cli("remember", "--type", "decision", "--title", "Release cadence", "--content", "We release every Tuesday.")
    time.sleep(1.1)
    rb = b.cli("remember", "--type", "decision", "--title", "Release cadence",
               "--content", "We release every second Tuesday after the sprint review.")
    base = _sync(a, b, base)
    # Then an undo on the desktop brings the old version of m1 back, and that syncs too.
    (b.vault / m1["path"]).write_bytes(m1_old)
    base = _sync(a, b, base)
    assert len([p for p in base if ".sync-conflict-" in p]) == 1

    for dev in (a, b):
        heads = _heads(dev, "which region do production deploys go to on fridays", m1["id"], m1b["id"])
        assert [h["id"] for h in heads] == [m1b["id"]], (dev.name, heads)
        heads = _heads(dev, "how many nodes does the production cluster run kubernetes on", m2["id"])
        assert len(heads) == 1 and "idConflict" in heads[0], (dev.name, heads)
        assert "eight nodes" in heads[0]["passage"]["text"]  # the newer edit is the head
        found = dev.cli("doctor")["conflicts"]
        assert sorted((c["kind"], c["id"]) for c in found) == sorted(
            [("resurrected", m1["id"]), ("duplicateId", m2["id"]), ("duplicateKey", rb["id"])]), (dev.name, found)

    before = a.files()
    dry = a.cli("repair-conflicts")
    assert dry["dryRun"] and len(dry["pairs"]) == 3 and a.files() == before  # a dry run changes nothing
    assert all(p["diff"].startswith("--- keep: ") for p in dry["pairs"])
    gen = dry["generation"]
    fixed = a.cli("repair-conflicts", "--confirm")
    assert fixed["remaining"] == 0 and fixed["generation"] == gen + 1  # one transaction, one generation
    after = a.files()
    assert set(after) == set(before), "no file deleted or added"
    assert a.cli("doctor")["conflicts"] == [] and a.cli("health")["conflicts"] == 0
    base = _sync(a, b, base)
    assert b.files() == after
    for dev in (a, b):
        assert dev.cli("doctor")["conflicts"] == [], dev.name
        heads = _heads(dev, "how many nodes does the production cluster run kubernetes on", m2["id"])
        assert len(heads) == 1 and "idConflict" not in heads[0]
        got = dev.cli("get", "--memory-id", m2["id"])
        copy_id = got["meta"]["conflict_versions"][0]
        copy = dev.cli("get", "--memory-id", copy_id)  # set aside, still readable by its new id
        assert copy["status"] == "superseded" and copy["meta"]["conflict_of"] == m2["id"]
        assert "1.29" in copy["content"]
        cadence = _heads(dev, "how often do we release", ra["id"], rb["id"])
        assert [h["id"] for h in cadence] == [rb["id"]], (dev.name, cadence)
    # The set-aside versions are history: found when the question asks about the past.
    hist = a.cli("recall", "which release cadence did we have previously", "--scope", "full-vault")
    assert ra["id"] in {h["id"] for h in hist["hits"]}


def _hand_note(vault_path: Path, rel: str, meta: dict[str, Any], body: str) -> None:
    from hive_brain.store.notes import render

    p = vault_path / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(render(meta, body), encoding="utf-8")


def test_only_a_live_version_of_the_same_scope_supersedes(vault_path: Path) -> None:
    shared = remember("Cache TTL", "The API cache TTL is 300 seconds.", "fact")
    # An agent's private note naming the shared memory cannot retire it for everyone.
    _hand_note(vault_path, "Agents/a/Memory/cache-ttl.md",
               {"id": "mem-private-ttl", "type": "fact", "title": "Cache TTL", "layer": "private", "agent": "a",
                "status": "active", "supersedes": shared["id"]}, "The API cache TTL is 60 seconds.")
    eng = Engine.open()
    eng.catalog.refresh()
    assert eng.catalog.by_id(shared["id"]).status == "active"
    # Archiving the newer version is how a user takes an evolve back: the older one is current again.
    v2 = run("evolve", "--memory-id", shared["id"], "--content", "The API cache TTL is 600 seconds.")
    old = vault_path / shared["path"]
    text = old.read_text(encoding="utf-8")
    old.write_text(text.replace("status: superseded", "status: active"), encoding="utf-8")
    run("update", "--memory-id", v2["id"], "--status", "archived")
    eng.catalog.refresh()
    assert eng.catalog.by_id(shared["id"]).status == "active"
    assert not [c for c in doctor()["conflicts"] if c["kind"] == "resurrected"]


def test_git_markers_and_plain_note_copies_are_reported_for_a_person(vault_path: Path) -> None:
    remember("Build tool", "We build the frontend with Vite.", "fact")
    merged = "# Runbook\n<<<<<<< HEAD\nRestart with systemctl.\n=======\nRestart with docker compose.\n>>>>>>> origin/main\n"
    (vault_path / "Projects").mkdir(exist_ok=True)
    (vault_path / "Projects/Runbook.md").write_text(merged, encoding="utf-8")
    (vault_path / "Projects/Ideas.md").write_text("# Ideas\nA dark mode.\n", encoding="utf-8")
    (vault_path / "Projects/Ideas (Jane's conflicted copy 2026-11-30).md").write_text("# Ideas\nA light mode.\n")
    # A merge inside the frontmatter breaks the YAML too: reported as both.
    fm_merge = "---\n<<<<<<< HEAD\ntitle: Ours\n=======\ntitle: Theirs\n>>>>>>> main\n---\nBody.\n"
    (vault_path / "Projects/Merged.md").write_text(fm_merge, encoding="utf-8")
    doc = doctor()
    assert [p["path"] for p in doc["problems"]] == ["Projects/Merged.md"]
    found = {c["kind"]: c for c in doc["conflicts"]}
    assert set(found) == {"gitMarkers", "syncCopy"}
    assert sorted(c["path"] for c in doc["conflicts"] if c["kind"] == "gitMarkers") == [
        "Projects/Merged.md", "Projects/Runbook.md"]
    assert found["syncCopy"]["original"] == "Projects/Ideas.md"
    before = {p: p.read_bytes() for p in vault_path.rglob("*.md")}
    res = run("repair-conflicts", "--confirm")
    assert res["changed"] == [] and {m["kind"] for m in res["manual"]} == {"gitMarkers", "syncCopy"}
    assert {p: p.read_bytes() for p in vault_path.rglob("*.md")} == before


def test_an_agent_sees_only_conflicts_it_may_read(vault_path: Path) -> None:
    from .helpers import cli_as

    mine = remember("Editor theme", "I use the Solarized theme in the editor.", "preference", agent="a")
    src = vault_path / mine["path"]
    shutil.copyfile(src, src.with_name(src.stem + " 1.md"))
    assert [c["kind"] for c in cli_as("conflicts", agent="a")] == ["duplicateId"]
    assert cli_as("conflicts", agent="b") == []
    assert cli_as("doctor", agent="b", ok=False)["conflicts"] == []
    assert doctor()["conflicts"][0]["id"] == mine["id"]  # the owner repairs the whole vault
    refused = cli_as("repair-conflicts", "--confirm", agent="b", enforce=True, ok=False)
    assert refused["_exit"] == 1 and refused["error"] == "PermissionDenied"


def test_a_catalog_from_before_derived_status_is_rebuilt(vault_path: Path) -> None:
    import sqlite3

    m = remember("Queue", "Jobs go through RabbitMQ.", "fact")
    state = Engine.open().vault.state
    db = sqlite3.connect(state / "catalog.sqlite")
    db.execute("DROP TABLE notes")
    db.execute("CREATE TABLE notes (path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, sha TEXT, kind TEXT, "
               "id TEXT, memory_key TEXT, status TEXT, layer TEXT, agent TEXT, task TEXT, content_hash TEXT, "
               "meta TEXT, problem TEXT)")
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()
    assert run("get", "--memory-id", m["id"])["status"] == "active"


def test_a_numbered_plain_note_is_not_a_copy(vault_path: Path) -> None:
    (vault_path / "Projects").mkdir(exist_ok=True)
    (vault_path / "Projects/Meeting.md").write_text("# Kickoff\nWe met the client.\n", encoding="utf-8")
    (vault_path / "Projects/Meeting 2.md").write_text("# Second meeting\nWe met again.\n", encoding="utf-8")
    assert doctor()["conflicts"] == []


@pytest.mark.parametrize("step", ["after-stage", "mid-apply", "after-apply"])
def test_repair_killed_at_any_step_is_all_or_nothing(vault_path: Path, step: str) -> None:
    m = remember("Prod region", "The production cluster runs in region ap-south-1.", "decision")
    _copies(vault_path, m["path"])
    v1 = remember("Deploy day", "We deploy on Fridays.", "decision")
    old = vault_path / v1["path"]
    before_evolve = old.read_bytes()
    run("evolve", "--memory-id", v1["id"], "--content", "We deploy on Thursdays.")
    old.write_bytes(before_evolve)
    doctor()  # indexed with its conflicts
    before = {p.relative_to(vault_path).as_posix(): p.read_bytes() for p in vault_path.rglob("*.md")}
    proc = subprocess.run([sys.executable, "-m", "hive_brain", "repair-conflicts", "--confirm", "--json"],
                          env={**os.environ, "HIVE_BRAIN_CRASH_AT": step, "HIVE_BRAIN_USE_SERVER": "0"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    found = doctor()["conflicts"]  # the next command finishes or undoes the repair
    after = {p.relative_to(vault_path).as_posix(): p.read_bytes() for p in vault_path.rglob("*.md")}
    assert set(after) == set(before)
    if after == before:  # after-stage: rolled back
        assert len(found) == 2
        assert run("repair-conflicts", "--confirm")["remaining"] == 0
    else:  # mid-apply, after-apply: rolled forward
        assert found == [] and sum(after[p] != before[p] for p in before) == 4  # head, 2 copies, stale note


def test_two_devices_evolving_one_version_fork_the_chain_and_repair_joins_it(vault_path: Path) -> None:
    a = remember("CI runner", "CI runs on GitHub Actions.", "decision")
    b = run("evolve", "--memory-id", a["id"], "--content", "CI runs on Buildkite.")
    # The other device evolved the same version offline: its new note also supersedes `a`.
    time.sleep(1.1)
    fork = dict(run("get", "--memory-id", b["id"])["meta"])
    fork.update(id="mem-otherdevice01", content_hash=None, updated="2099-01-01T00:00:00Z")
    _hand_note(vault_path, "Memory/Distillations/Agent Memory/ci-runner-otherdevice01.md", fork,
               "CI runs on CircleCI.")
    found = doctor()["conflicts"]
    assert [(c["kind"], c["id"]) for c in found] == [("duplicateKey", "mem-otherdevice01")]
    assert [x["id"] for x in found[0]["others"]] == [b["id"]]
    res = run("repair-conflicts", "--confirm")
    assert res["remaining"] == 0 and len(res["changed"]) == 2
    assert run("get", "--memory-id", b["id"])["status"] == "superseded"
    nxt = run("evolve", "--memory-id", "mem-otherdevice01", "--content", "CI runs on GitLab CI.")
    hits = run("recall", "where does CI run", "--scope", "full-vault")["hits"]
    assert [h["id"] for h in hits if h["id"] in (a["id"], b["id"], "mem-otherdevice01", nxt["id"])] == [nxt["id"]]


def test_git_markers_are_not_indexed_and_both_sides_stay_findable(vault_path: Path) -> None:
    """A pull that left ``<<<<<<< HEAD`` ... ``>>>>>>> origin/main`` in a note: the marker lines are no
    note text (a question about "origin main" or "HEAD" must not match them), both sides' lines are
    (nothing of either device's edit is lost to search), and doctor names the note."""
    m = remember("Restart procedure", "Restart the api with systemctl restart api.", "procedure")
    p = vault_path / m["path"]
    text = p.read_text(encoding="utf-8")
    body_at = text.index("Restart the api")
    merged = (text[:body_at] + "<<<<<<< HEAD\nRestart the api with systemctl restart api.\n=======\n"
              "Restart the api with docker compose restart api.\n>>>>>>> 4f2a9c1 (laptop: zqtheirs)\n")
    p.write_text(merged, encoding="utf-8")
    assert [(c["kind"], c["path"]) for c in doctor()["conflicts"]] == [("gitMarkers", m["path"])]
    for q in ("how do we restart the api with docker compose", "how do we restart the api with systemctl"):
        hits = [h for h in run("recall", q, "--scope", "full-vault")["hits"] if h["id"] == m["id"]]
        assert len(hits) == 1, (q, hits)
        assert "<<<<<<<" not in hits[0]["passage"]["text"] and ">>>>>>>" not in hits[0]["passage"]["text"]
        assert "=======" not in hits[0]["passage"]["text"]
    assert "docker compose" in hits[0]["passage"]["text"] and "systemctl" in hits[0]["passage"]["text"]
    # The marker line's own words are not indexed: its commit subject finds nothing.
    assert not [h for h in run("recall", "zqtheirs", "--scope", "full-vault")["hits"] if h["id"] == m["id"]]


def test_a_syncthing_folder_never_carries_staged_files(vault_path: Path) -> None:
    """Syncthing shares every file of a folder (marked by `.stfolder`) unless the device-local
    `.stignore` says not: a write's staged files would reach the other device, whose recovery clears
    them as leftovers, and that deletion would come back here mid-write. The first write adds the
    line (a `.stignore` of the user's own keeps its lines); `init` writes it too."""
    assert "/.hive-brain/staging" in (vault_path / ".stignore").read_text(encoding="utf-8").splitlines()
    (vault_path / ".stignore").write_text("// mine\n*.bak\n", encoding="utf-8")
    (vault_path / ".stfolder").mkdir()
    m = remember("Mirror", "The package mirror is at mirror.internal.", "fact")
    run("update", "--memory-id", m["id"], "--content", "The package mirror moved to mirror2.internal.")
    assert (vault_path / ".stignore").read_text(encoding="utf-8").splitlines() == [
        "// mine", "*.bak", "/.hive-brain/staging"]


def test_repair_plans_the_same_new_ids_on_two_devices_with_the_same_notes(vault_path: Path, tmp_path: Path) -> None:
    """Two devices whose sync delivered the same copies plan the same repair, new ids included: a
    repair confirmed on each (before either synced) writes the same notes, not two rival id sets."""
    m = remember("Prod region", "The production cluster runs in region ap-south-1.", "decision")
    _copies(vault_path, m["path"])
    plan = run("repair-conflicts")
    other = Device(tmp_path, "desktop")
    shutil.copytree(vault_path, other.vault, ignore=shutil.ignore_patterns("staging"))
    theirs = other.cli("repair-conflicts")
    new_ids = [x.get("newId") for x in plan["pairs"]]
    assert len(new_ids) == 2 and all(new_ids) and len(set(new_ids)) == 2
    assert new_ids == [x.get("newId") for x in theirs["pairs"]]


def test_repair_confirmed_on_two_devices_before_either_synced_writes_the_same_notes(vault_path: Path,
                                                                                     tmp_path: Path) -> None:
    """Each device repairs the copies a sync delivered to both, a second apart, before the next sync:
    they write byte-identical notes, so the engines have nothing to merge (git no conflict on an
    `updated:` line, Syncthing no new conflict copy)."""
    m = remember("Prod region", "The production cluster runs in region ap-south-1.", "decision")
    _copies(vault_path, m["path"])
    other = Device(tmp_path, "desktop")
    shutil.copytree(vault_path, other.vault, ignore=shutil.ignore_patterns("staging"))
    here = run("repair-conflicts", "--confirm")
    time.sleep(1.1)  # `updated` has whole seconds: the other device's clock has moved on
    theirs = other.cli("repair-conflicts", "--confirm")
    assert here["changed"] and sorted(here["changed"]) == sorted(theirs["changed"])
    for rel in here["changed"]:
        assert (vault_path / rel).read_bytes() == (other.vault / rel).read_bytes(), rel


def test_the_deleting_device_is_told_when_a_sync_brings_a_memory_back_updated(tmp_path: Path) -> None:
    """One device deletes memories the other updates before the next sync: the engine keeps the update
    (git's modify/delete merge, Syncthing restoring a changed file over a deletion), so the memory comes
    back to the device that deleted it. That device's `doctor` and `conflicts` name it until it is
    deleted again or kept; the other device, which never deleted it, is told nothing."""
    a, b = Device(tmp_path, "laptop"), Device(tmp_path, "desktop")
    a.cli("init", str(a.vault))
    m1 = a.cli("remember", "--type", "fact", "--title", "Package mirror", "--content", "The package mirror is at mirror.internal.")
    m2 = a.cli("remember", "--type", "fact", "--title", "Build cache", "--content", "The build cache lives on cache01.")
    shutil.copytree(a.vault, b.vault, ignore=shutil.ignore_patterns("staging"))
    for m in (m1, m2):
        assert a.cli("delete", "--memory-id", m["id"], "--confirm")["status"] == "deleted"
    b.cli("update", "--memory-id", m1["id"], "--content", "The package mirror moved to mirror2.internal.")
    b.cli("update", "--memory-id", m2["id"], "--content", "The build cache moved to cache02.")
    assert a.cli("doctor")["cameBack"] == []  # deleted, and not back (yet)
    for m in (m1, m2):  # the sync: the changed notes win over the deletions
        shutil.copyfile(b.vault / m["path"], a.vault / m["path"])

    doc = a.cli("doctor")
    back = {x["id"]: x for x in doc["cameBack"]}
    assert sorted(back) == sorted([m1["id"], m2["id"]]), doc
    told = subprocess.run([sys.executable, "-m", "hive_brain", "doctor"], env=a.env, capture_output=True, text=True,
                          timeout=300)
    assert told.returncode == 1 and m1["id"] in told.stdout and "came back" in told.stdout, told.stdout  # something to decide
    x = back[m1["id"]]
    assert x["path"] == m1["path"] and x["changed"] and x["deletedAt"][:10] == time.strftime("%Y-%m-%d", time.gmtime())
    assert "you deleted" in x["reason"] and "came back updated" in x["reason"] and "delete it again" in x["reason"]
    assert doc["conflicts"] == []  # not a conflict of the notes: the other device has the same notes, no deletion
    assert sorted(c["id"] for c in a.cli("conflicts") if c["kind"] == "deletedCameBack") == sorted(back)
    assert b.cli("doctor")["cameBack"] == [] and not [c for c in b.cli("conflicts") if c["kind"] == "deletedCameBack"]

    # Deleted again: no longer named. Kept: no longer named, and still there.
    a.cli("delete", "--memory-id", m1["id"], "--confirm")
    kept = a.cli("doctor", "--keep", m2["id"])
    assert kept["kept"] == [m2["id"]] and kept["cameBack"] == [], kept
    assert a.cli("doctor")["cameBack"] == []
    assert "cache02" in a.cli("get", "--memory-id", m2["id"])["content"]
