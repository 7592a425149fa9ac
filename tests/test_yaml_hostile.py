"""One hand-written note whose YAML is hostile (a self-referencing alias, deep nesting, an alias
bomb, a huge scalar) breaks no command: it is reported by doctor, named, and skipped (issue 28)."""

from __future__ import annotations

import pytest

from .helpers import doctor, remember, run

HOSTILE = {
    "self-alias": "---\ntitle: Loop\ntags: &a [*a]\n---\nbody of the looping note\n",
    "self-alias-map": "---\ntitle: Loop map\nextra: &m {self: *m}\n---\nbody\n",
    "deep": "---\ntitle: Deep\nx: " + "[" * 5000 + "]" * 5000 + "\n---\nbody\n",
    "bomb": "---\ntitle: Bomb\n" + "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9)) + "---\nbody\n",
    "huge": "---\ntitle: Huge\nsummary: " + "y" * 300_000 + "\n---\nbody\n",
    # PyYAML's constructor raises ValueError, not YAMLError, for these: every refresh used to crash on them.
    "impossible-date": "---\ntitle: Leap\ndate: 2023-02-29\n---\nbody\n",
    "huge-integer": "---\ntitle: Digits\nn: " + "7" * 5000 + "\n---\nbody\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_frontmatter_is_reported_and_skipped(vault_path, name):
    remember("Deploy target", "We deploy the web app to Fly.io.", "decision")
    (vault_path / "Ideas").mkdir(exist_ok=True)
    (vault_path / "Ideas" / f"{name}.md").write_text(HOSTILE[name], encoding="utf-8")
    # Every command that reads the vault still works, and the good memory is still found.
    hits = run("recall", "where do we deploy the web app", "--lexical")["hits"]
    assert hits and hits[0]["title"] == "Deploy target"
    assert run("status")["unreadableNotes"] >= 1
    run("rebuild-index")
    run("browse", "Ideas")
    remember("Another", "A write after the hostile note was seen.", "fact")
    found = doctor()
    text = str(found["problems"])
    assert f"Ideas/{name}.md" in text, found["problems"]


def test_not_a_number_in_frontmatter_breaks_no_command(vault_path):
    """YAML's ``.nan`` and ``.inf`` are floats JSON has no form for: the catalog stored them as ``NaN`` and
    ``Infinity``, which SQLite's JSON functions refuse, so the catalog's refresh failed (a memory's row
    is read with them on every refresh; since the catalog counts changes per type, any note's row is)
    and every command with it. They are kept as text."""
    (vault_path / "Ideas").mkdir(exist_ok=True)
    (vault_path / "Ideas" / "Odd numbers.md").write_text(
        "---\ntitle: Odd numbers\nweight: .nan\nlimit: .inf\nfloor: -.inf\n---\nA note about narwhal scales.\n",
        encoding="utf-8")
    mem = remember("Deploy target", "We deploy the web app to Fly.io.", "decision")
    note = vault_path / mem["path"]
    note.write_text(note.read_text(encoding="utf-8").replace("\n---\n", "\nscore: .nan\n---\n", 1), encoding="utf-8")
    assert run("recall", "narwhal scales", "--lexical")["hits"][0]["title"] == "Odd numbers"
    assert "Fly.io" in run("core")["text"]
    st = run("status")
    assert st["unreadableNotes"] == 0 and st["staleNotes"] == 0
    assert run("get", mem["id"])["meta"]["score"] == "nan"
    (vault_path / "Ideas" / "Odd numbers.md").unlink()
    remember("Another", "A write after the odd note went.", "fact")
    assert not run("recall", "narwhal scales", "--lexical")["hits"]
