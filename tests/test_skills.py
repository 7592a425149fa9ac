"""An approved workflow pattern becomes a procedure memory (review apply) and an agent skill
(review skill): Skills/<name>/SKILL.md in the Agent Skills format, linked into Claude Code's and Codex's
personal skills folders on request, never over a user's skill, not indexed."""

from __future__ import annotations

import os
import time
from pathlib import Path

from hive_brain.store.notes import parse_text

from .helpers import cli_as, run
from .test_json_casing import snake_keys

STEPS = ("release.tag", "release.build-wheel", "release.publish-pypi")


def _workflow_proposal() -> str:
    for task in ("REL-1", "REL-2", "REL-3"):
        for step in STEPS:
            cli_as("record-operation", "--title", f"Ran {step}", "--content", f"{step} done.", "--operation-key",
                   step, "--outcome", "success", "--task-id", task, agent="claude-code")
            time.sleep(0.003)  # events are ordered by ULID: ms, then random within one ms
    q = run("mine-patterns", "--enqueue")
    (wf,) = [p for p in q["proposed"] if p["pattern"].startswith("workflow:")]
    assert wf["type"] == "procedure"
    return wf["proposal"]


def test_an_approved_workflow_becomes_a_procedure_and_a_linked_skill(vault_path):
    rid = _workflow_proposal()
    early = run("review", "skill", rid, ok=False)
    assert early["_exit"] == 1 and "approve it first" in str(early)
    run("review", "approve", rid)
    applied = run("review", "apply", rid)
    assert run("get", applied["id"])["meta"]["type"] == "procedure"

    res = run("review", "skill", rid, "--link", "claude-code", "--link", "codex")
    name = res["name"]
    assert snake_keys(res) == []
    assert name == "release-tag-release-build-wheel-release-publish-pypi" and res["rewritten"] is False
    skill = vault_path / "Skills" / name / "SKILL.md"
    note = parse_text(f"Skills/{name}/SKILL.md", skill.read_text(encoding="utf-8"))
    assert note.problem is None and note.meta["name"] == name
    desc = note.meta["description"]
    assert 0 < len(desc) <= 1024 and "Use when" in desc and all(s in desc for s in STEPS)
    assert note.meta["metadata"]["hive-brain-review"] == rid
    assert all(f"`{s}`" in note.body for s in STEPS)
    home = Path(os.environ["HOME"])
    for link in (home / ".claude/skills" / name, home / ".agents/skills" / name):
        assert link.is_symlink() and (link / "SKILL.md").read_text(encoding="utf-8") == skill.read_text(encoding="utf-8")
    assert {ln["status"] for ln in res["links"]} == {"linked"}
    again = run("review", "skill", rid, "--link", "claude-code")
    assert again["rewritten"] is True and again["links"][0]["status"] == "already linked"

    # Recall finds the workflow once, as the procedure memory; the skill file is not indexed.
    hits = run("recall", "how do we tag, build the wheel and publish to pypi?", "--scope", "full-vault")["hits"]
    paths = [h["path"] for h in hits]
    assert applied["path"] in paths and not [p for p in paths if p.startswith("Skills/")], paths


def test_never_over_a_users_skill(vault_path):
    rid = _workflow_proposal()
    run("review", "approve", rid)
    # The vault template's own skill, by name.
    taken = run("review", "skill", rid, "--name", "hive-brain", ok=False)
    assert taken["_exit"] == 1 and "never overwrites" in str(taken)
    assert "hive-brain" in (vault_path / "Skills/hive-brain/SKILL.md").read_text(encoding="utf-8")
    # The user's own Claude Code skill of that name: refused before anything is written.
    mine = Path(os.environ["HOME"]) / ".claude/skills/release"
    mine.mkdir(parents=True)
    (mine / "SKILL.md").write_text("---\nname: release\ndescription: mine\n---\nMy own.\n", encoding="utf-8")
    refused = run("review", "skill", rid, "--name", "release", "--link", "claude-code", ok=False)
    assert refused["_exit"] == 1 and "never replaces" in str(refused)
    assert not (vault_path / "Skills/release").exists(), "a refused link left a skill behind"
    assert (mine / "SKILL.md").read_text(encoding="utf-8").endswith("My own.\n")
    bad = run("review", "skill", rid, "--name", "Release Notes!", ok=False)
    assert bad["_exit"] == 2
    # Only a workflow or routine becomes a skill; and only the owner writes one.
    lesson = cli_as("remember", "--type", "lesson", "--title", "Pin wheels", "--content", "Pin the wheel version.",
                    "--memory-scope", "hive", agent="codex", enforce=True)
    assert "proposal" in lesson
    assert run("review", "skill", lesson["proposal"], ok=False)["_exit"] == 1
    assert cli_as("review", "skill", rid, agent="codex", ok=False)["_exit"] == 1


def test_a_users_own_note_under_skills_is_still_indexed(vault_path):
    note = vault_path / "Skills" / "Git tricks.md"
    note.write_text("---\ntitle: Git tricks\n---\nUse git bisect to find the commit that broke the build.\n",
                    encoding="utf-8")
    hits = run("recall", "git bisect broke the build", "--scope", "full-vault")["hits"]
    assert hits and hits[0]["path"] == "Skills/Git tricks.md"
