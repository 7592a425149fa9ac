"""Memory notes in the form Obsidian's Properties read (issue 28): times as unquoted YAML dates
(``2026-12-04`` a Date, ``2026-12-04T10:30:00`` a Date & time, UTC, no suffix), while every form an
older vault holds (quoted ``...Z`` / offset strings, YAML date objects) still reads the same."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from hive_brain.store.notes import date_of, normal_date, parse_text, render

from .helpers import cli_as, remember, run

# Obsidian's "Date & time": no quotes, a T, no zone suffix (a `Z` or `+00:00` makes it Text).
OBSIDIAN_DATETIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")


def _fm(path: Path) -> dict[str, str]:
    text = path.read_text(encoding="utf-8")
    fm = text.split("---\n")[1]
    return {ln.split(":", 1)[0]: ln.split(":", 1)[1].strip() for ln in fm.splitlines() if ln[:1].isalpha()}


def test_remember_and_evolve_write_times_as_obsidian_dates(vault_path: Path) -> None:
    old = remember("Deploy target", "We deploy the web app to Heroku.", "decision")
    new = run("evolve", old["id"], "--content", "We deploy the web app to Fly.io.")
    for rel in (old["path"], new["path"]):
        fm = _fm(vault_path / rel)
        for key in ("created", "updated"):
            assert OBSIDIAN_DATETIME.match(fm[key]), (rel, key, fm[key])
    # Read back, the engine still has its UTC instant.
    got = run("get", "--memory-id", new["id"])
    assert got["meta"]["created"].endswith("Z")
    assert date_of(got["meta"]["created"]) == date_of(_fm(vault_path / new["path"])["created"])


def test_render_writes_days_and_times_unquoted_in_utc() -> None:
    out = render({"id": "mem-1", "type": "fact", "title": "2026-12-04T10:30:00Z", "created": "2026-12-04T10:30:00Z",
                  "updated": "2026-12-04T12:30:00+02:00", "date": "2026-12-04"}, "body")
    lines = out.split("---\n")[1].splitlines()
    assert "created: 2026-12-04T10:30:00" in lines
    assert "updated: 2026-12-04T10:30:00" in lines  # the same instant, in UTC
    assert "date: 2026-12-04" in lines
    assert "title: '2026-12-04T10:30:00Z'" in lines  # only time keys become dates: a title stays text


@pytest.mark.parametrize("written", [
    "'2026-12-04T10:30:00Z'",         # hive-brain before Obsidian dates
    "'2026-12-04T12:30:00+02:00'",    # an offset, quoted
    "2026-12-04T10:30:00Z",           # unquoted with a Z: YAML gives an aware datetime
    "2026-12-04T10:30:00",            # the Obsidian form: YAML gives a naive datetime (UTC)
    "2026-12-04 10:30:00",            # YAML's own spelling
])
def test_every_form_of_a_time_reads_as_one_string(written: str) -> None:
    n = parse_text("Memory/a.md", f"---\nid: mem-1\ntype: fact\ncreated: {written}\n---\nbody\n")
    assert n.meta["created"] == "2026-12-04T10:30:00Z"
    assert date_of(n.meta["created"]) == dt.datetime(2026, 12, 4, 10, 30, tzinfo=dt.UTC)


def test_a_day_reads_as_a_day() -> None:
    assert parse_text("a.md", "---\ndate: 2026-12-04\n---\n").meta["date"] == "2026-12-04"
    assert normal_date(dt.date(2026, 12, 4)) == "2026-12-04" and normal_date("tomorrow") == "tomorrow"


def test_a_rewrite_keeps_an_untouched_old_form_time_and_writes_new_ones_in_obsidian_form() -> None:
    old = parse_text("Memory/a.md", "---\nid: mem-1\ntype: fact\ncreated: '2026-01-05T10:00:00Z'\n---\nbody\n")
    out = render({**old.meta, "updated": "2026-02-01T00:00:00Z"}, old.body, like=old)
    lines = out.split("---\n")[1].splitlines()
    assert "created: '2026-01-05T10:00:00Z'" in lines and "updated: 2026-02-01T00:00:00" in lines
    assert parse_text("Memory/a.md", out).meta["updated"] == "2026-02-01T00:00:00Z"


def _note(vault_path: Path, name: str, mid: str, updated: str, content: str) -> str:
    rel = f"Memory/Distillations/Agent Memory/{name}.md"
    p = vault_path / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(f"---\nid: {mid}\ntype: decision\ntitle: Release train\nstatus: active\ncreated: {updated}\n"
                 f"updated: {updated}\n---\n\n{content}\n", encoding="utf-8")
    return rel


def test_a_vault_mixing_old_and_new_forms_orders_by_the_instant(vault_path: Path) -> None:
    """Two copies of one memory (a sync conflict): the head is the newest. The old-form copy says
    09:00 at +02:00 (07:00 UTC), the Obsidian-form one 08:00 (UTC): compared as written text the
    old one would look newer."""
    mid = "mem-01obsidianform00000000001"
    _note(vault_path, "release-train", mid, "'2026-12-04T09:00:00+02:00'", "The release train leaves on Tuesdays.")
    newer = _note(vault_path, "release-train 1", mid, "2026-12-04T08:00:00", "The release train leaves on Thursdays.")
    got = run("get", "--memory-id", mid)
    assert got["path"] == newer, got["path"]
    assert got["meta"]["updated"] == "2026-12-04T08:00:00Z"


# ------------------------------------------------------------------------------------ version links
LINK = re.compile(r"^'\[\[(?P<target>[^|\]]+)\|(?P<id>mem-[0-9a-z]+)\]\]'$")


def test_evolve_links_the_versions_by_wikilinks_to_their_notes(vault_path: Path) -> None:
    old = remember("Deploy target", "We deploy the web app to Heroku.", "decision")
    new = run("evolve", old["id"], "--content", "We deploy the web app to Fly.io.")
    back = LINK.match(_fm(vault_path / new["path"])["supersedes"])
    ahead = LINK.match(_fm(vault_path / old["path"])["superseded_by"])
    assert back and ahead
    # Obsidian follows the link to the other version's note (its vault path, without .md).
    assert (back["target"] + ".md", back["id"]) == (old["path"], old["id"])
    assert (ahead["target"] + ".md", ahead["id"]) == (new["path"], new["id"])
    got = run("get", "--memory-id", old["id"])
    assert got["status"] == "superseded" and [c["id"] for c in got["chain"]] == [old["id"], new["id"]]
    assert run("get", "--memory-id", new["id"])["meta"]["supersedes"] == old["id"]


def _memory(vault_path: Path, name: str, mid: str, content: str, **links: str) -> str:
    rel = f"Memory/Distillations/Agent Memory/{name}.md"
    p = vault_path / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    extra = "".join(f"{k}: {v}\n" for k, v in links.items())
    p.write_text(f"---\nid: {mid}\ntype: decision\ntitle: Deploy day\nstatus: active\n{extra}"
                 f"created: 2026-12-0{1 + len(links)}T10:00:00\n---\n\n{content}\n", encoding="utf-8")
    return rel


@pytest.mark.parametrize("form", [
    "{id}",                      # the bare id hive-brain wrote before
    "'[[{stem}|{id}]]'",         # a link shown as the id
    "'[[{stem}]]'",              # a link written by hand, to the file name (Obsidian's shortest form)
    '"[[{path}]]"',              # to the vault path, double-quoted as Obsidian writes it
    "'[[{path}.md|the old rule]]'",  # shown as words, not an id
])
def test_every_form_of_a_version_link_links_the_chain(vault_path: Path, form: str) -> None:
    old_id, new_id = "mem-01deployday000000000000001", "mem-01deployday000000000000002"
    old = _memory(vault_path, "deploy-day-000001", old_id, "We deploy the web app on Mondays.")
    link = form.format(id=old_id, stem="deploy-day-000001", path=old.removesuffix(".md"))
    _memory(vault_path, "deploy-day-000002", new_id, "We deploy the web app on Thursdays.", supersedes=link)
    got = run("get", "--memory-id", old_id)
    assert got["status"] == "superseded", (form, got["status"])
    assert [c["id"] for c in got["chain"]] == [old_id, new_id]
    hits = run("recall", "which day do we deploy the web app", "--lexical")["hits"]
    assert [h["id"] for h in hits if h["id"] in (old_id, new_id)] == [new_id]


def test_a_link_to_no_note_links_nothing(vault_path: Path) -> None:
    mid = "mem-01deployday000000000000003"
    _memory(vault_path, "deploy-day-000003", mid, "We deploy the web app on Fridays.", supersedes="'[[gone-note]]'")
    got = run("get", "--memory-id", mid)
    assert got["status"] == "active" and [c["id"] for c in got["chain"]] == [mid]


def test_deleting_a_middle_version_relinks_its_neighbours_by_wikilinks(vault_path: Path) -> None:
    v1 = remember("Deploy target", "We deploy the web app to Heroku.", "decision")
    v2 = run("evolve", v1["id"], "--content", "We deploy the web app to Render.")
    v3 = run("evolve", v2["id"], "--content", "We deploy the web app to Fly.io.")
    run("delete", "--memory-id", v2["id"], "--confirm", "--force")
    ahead = LINK.match(_fm(vault_path / v1["path"])["superseded_by"])
    back = LINK.match(_fm(vault_path / v3["path"])["supersedes"])
    assert ahead and (ahead["target"] + ".md", ahead["id"]) == (v3["path"], v3["id"])
    assert back and (back["target"] + ".md", back["id"]) == (v1["path"], v1["id"])
    assert [c["id"] for c in run("get", "--memory-id", v3["id"])["chain"]] == [v1["id"], v3["id"]]


def test_repair_restores_a_resurrected_version_with_a_wikilink_to_its_head(vault_path: Path) -> None:
    v1 = remember("Deploy region", "Production deploys go to region eu-west-1.", "decision")
    before = (vault_path / v1["path"]).read_bytes()  # the old version as it was: active, no link
    v2 = run("evolve", v1["id"], "--content", "Production deploys go to region eu-central-1.")
    (vault_path / v1["path"]).write_bytes(before)  # a sync brings it back
    run("repair-conflicts", "--confirm")
    fm = _fm(vault_path / v1["path"])
    ahead = LINK.match(fm["superseded_by"])
    assert fm["status"] == "superseded" and ahead
    assert (ahead["target"] + ".md", ahead["id"]) == (v2["path"], v2["id"])


def test_a_private_override_links_the_shared_memory_by_a_wikilink(vault_path: Path) -> None:
    shared = remember("CI Node version", "The CI workflow matrix runs the test suite on Node 18.", "fact")
    ov = run_as("a", "remember", "--type", "fact", "--title", "CI Node version for my fork", "--overrides",
                shared["id"], "--content", "In my fork CI uses Node 22 because of fetch.")
    link = LINK.match(_fm(vault_path / ov["path"])["overrides"])
    assert link and (link["target"] + ".md", link["id"]) == (shared["path"], shared["id"])
    assert run_as("a", "get", ov["id"])["meta"]["overrides"] == shared["id"]  # read as the id it names
    # A new version of the override still overrides, written the same way.
    ov2 = run_as("a", "evolve", ov["id"], "--content", "In my fork CI uses Node 24 because of fetch.")
    link = LINK.match(_fm(vault_path / ov2["path"])["overrides"])
    assert link and link["id"] == shared["id"]
    hits = run_as("a", "recall", "which Node version does the CI workflow run", "--lexical")["hits"]
    ids = [h["id"] for h in hits]
    assert shared["id"] not in ids and ids[0] == ov2["id"] and hits[0]["overrides"] == shared["id"]


@pytest.mark.parametrize("form", ["{id}", "'[[{stem}]]'"])
def test_an_override_in_either_form_overrides(vault_path: Path, form: str) -> None:
    shared = remember("CI Node version", "The CI workflow matrix runs the test suite on Node 18.", "fact")
    rel = "Agents/a/Memory/ci-node-fork-000001.md"
    (vault_path / rel).parent.mkdir(parents=True, exist_ok=True)
    value = form.format(id=shared["id"], stem=Path(shared["path"]).stem)
    (vault_path / rel).write_text(
        "---\nid: mem-01cinodefork0000000000001\ntype: fact\ntitle: CI Node version for my fork\nlayer: private\n"
        f"agent: a\nstatus: active\noverrides: {value}\ncreated: 2026-12-01T10:00:00\n---\n\n"
        "In my fork CI uses Node 22 because of fetch.\n", encoding="utf-8")
    hits = run_as("a", "recall", "which Node version does the CI workflow run", "--lexical")["hits"]
    assert [h["id"] for h in hits][:1] == ["mem-01cinodefork0000000000001"] and hits[0]["overrides"] == shared["id"]
    assert shared["id"] not in [h["id"] for h in hits]


def test_repair_names_the_head_of_a_set_aside_copy_by_a_wikilink(vault_path: Path) -> None:
    m = remember("Cluster size", "The production cluster runs on six nodes.", "fact")
    text = (vault_path / m["path"]).read_text(encoding="utf-8")
    copy = vault_path / m["path"].replace(".md", " (conflicted copy).md")
    copy.write_text(text.replace("six nodes", "eight nodes"), encoding="utf-8")  # a sync tool's copy
    run("repair-conflicts", "--confirm")
    fms = {rel: _fm(vault_path / rel) for rel in (m["path"], str(copy.relative_to(vault_path)))}
    aside = [fm for fm in fms.values() if "conflict_of" in fm]
    assert len(aside) == 1, fms
    link = LINK.match(aside[0]["conflict_of"])
    head = next(rel for rel, fm in fms.items() if "conflict_of" not in fm)
    assert link and link["target"] + ".md" == head and link["id"] == m["id"]
    assert run("get", aside[0]["id"])["meta"]["conflict_of"] == m["id"]


def run_as(agent: str, *args: str) -> dict:
    return cli_as(*args, agent=agent)
