"""The Obsidian pack a fresh vault gets: Bases views under Operations/Brain Services/ and agent skills
under Skills/. Every view is checked against the Bases file format as Obsidian documents it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from click.testing import CliRunner

from hive_brain.cli.app import main
from hive_brain.memory.proposals import REVIEW_DIR
from hive_brain.store.notes import KEY_ORDER, parse_text
from hive_brain.store.secrets import find_secrets
from hive_brain.store.vault import BRAIN_SERVICES_DIR, CONVERSATIONS_DIR, MEMORY_DIR, template_dir

# The known-key schema, from Obsidian's help pages "Bases syntax", "Views" and "Functions"
# (obsidianmd/obsidian-help: en/Bases/Bases syntax.md, Views.md, Functions.md):
# * a .base file is YAML with the top-level sections `filters`, `formulas`, `properties`, `views`;
# * `filters` is one filter statement (a string) or an object with exactly one of `and`, `or`, `not`,
#   whose value is a list of statements or filter objects;
# * `formulas` maps a name to an expression string; `properties` maps a property to its settings
#   (`displayName`);
# * each entry of `views` has `type` (built in: table, cards, list, map) and `name`, and may have
#   `limit`, `filters`, `groupBy` ({property, direction: ASC|DESC}) and `order` (the shown properties);
# * a property is `note.<key>` (frontmatter; the bare key is shorthand), `file.<field>` (the file
#   properties listed below) or `formula.<name>` (defined in `formulas`).
TOP_KEYS = {"filters", "formulas", "properties", "views"}
VIEW_KEYS = {"type", "name", "limit", "filters", "groupBy", "order"}
VIEW_TYPES = {"table", "cards", "list", "map"}
GROUP_BY_KEYS = {"property", "direction"}
DIRECTIONS = {"ASC", "DESC"}
PROPERTY_SETTINGS = {"displayName"}
FILTER_OPS = {"and", "or", "not"}
FILE_FIELDS = {"backlinks", "ctime", "embeds", "ext", "file", "folder", "links", "mtime", "name", "path",
               "properties", "size", "tags"}
FILE_FUNCTIONS = {"asLink", "hasLink", "hasProperty", "hasTag", "inFolder"}
STRING_FUNCTIONS = {"contains", "containsAll", "containsAny", "endsWith", "isEmpty", "lower", "replace", "slice",
                    "split", "startsWith", "title", "trim"}

VIEWS = ("Agent Memory.base", "Brain Review.base", "Conversations.base", "Conflicts.base")
SKILLS = ("hive-brain", "obsidian-notes")
# Frontmatter keys the notes each view lists actually carry (views name no property nobody writes).
CONVERSATION_KEYS = {"type", "title", "date", "ended", "agent", "project", "session_id", "turns", "redactions", "source"}
PROPOSAL_KEYS = {"id", "kind", "status", "proposed_by", "created", "updated", *KEY_ORDER}
NOTE_KEYS = {
    "Agent Memory.base": set(KEY_ORDER),
    "Brain Review.base": PROPOSAL_KEYS,
    "Conversations.base": CONVERSATION_KEYS,
    "Conflicts.base": {*KEY_ORDER, "conflict_of", "conflict_versions"},
}
FOLDERS = {"Agent Memory.base": MEMORY_DIR, "Brain Review.base": REVIEW_DIR, "Conversations.base": CONVERSATIONS_DIR}


def _check_statement(s: object, where: str, base: dict) -> list[str]:
    if not isinstance(s, str) or not s.strip():
        return [f"{where}: a filter statement must be a non-empty string"]
    errs = []
    for obj, fn in re.findall(r"(\w+)\.(\w+)\(", s):
        known = FILE_FUNCTIONS if obj == "file" else STRING_FUNCTIONS
        if fn not in known:
            errs.append(f"{where}: unknown function {obj}.{fn}()")
    for field in re.findall(r"\bfile\.(\w+)\b(?!\()", s):
        if field not in FILE_FIELDS:
            errs.append(f"{where}: unknown file property file.{field}")
    return errs


def _check_filter(f: object, where: str, base: dict) -> list[str]:
    if isinstance(f, str):
        return _check_statement(f, where, base)
    if not isinstance(f, dict) or len(f) != 1 or next(iter(f)) not in FILTER_OPS:
        return [f"{where}: a filter object has exactly one of and/or/not"]
    op, items = next(iter(f.items()))
    if not isinstance(items, list) or not items:
        return [f"{where}.{op}: must be a non-empty list"]
    return [e for i, x in enumerate(items) for e in _check_filter(x, f"{where}.{op}[{i}]", base)]


def _check_property(p: object, where: str, base: dict, note_keys: set[str]) -> list[str]:
    if not isinstance(p, str) or not p:
        return [f"{where}: a property is a non-empty string"]
    prefix, _, rest = p.partition(".")
    if prefix == "file" and rest not in FILE_FIELDS:
        return [f"{where}: unknown file property {p}"]
    if prefix == "formula" and rest not in (base.get("formulas") or {}):
        return [f"{where}: formula {rest} is not defined"]
    if prefix == "note" and rest not in note_keys:
        return [f"{where}: no note of this view has the property {rest!r}"]
    if prefix not in ("file", "formula", "note"):
        return [f"{where}: write note.{p} (explicit) rather than the bare key"]
    return []


def base_errors(text: str, note_keys: set[str]) -> list[str]:
    """Everything in a .base file outside the documented schema above ([] when it conforms)."""
    try:
        base = yaml.safe_load(text)
    except yaml.YAMLError as e:
        return [f"not YAML: {e}"]
    if not isinstance(base, dict):
        return ["a .base file is a YAML mapping"]
    errs = [f"unknown top-level key {k!r}" for k in base if k not in TOP_KEYS]
    if "filters" in base:
        errs += _check_filter(base["filters"], "filters", base)
    for name, expr in (base.get("formulas") or {}).items():
        if not isinstance(expr, str):
            errs.append(f"formulas.{name}: an expression string")
    for prop, settings in (base.get("properties") or {}).items():
        errs += _check_property(prop, f"properties.{prop}", base, note_keys)
        if not isinstance(settings, dict) or set(settings) - PROPERTY_SETTINGS:
            errs.append(f"properties.{prop}: only {sorted(PROPERTY_SETTINGS)}")
    views = base.get("views")
    if not isinstance(views, list) or not views:
        return [*errs, "views: a non-empty list"]
    names = set()
    for i, v in enumerate(views):
        where = f"views[{i}]"
        if not isinstance(v, dict):
            errs.append(f"{where}: a mapping")
            continue
        errs += [f"{where}: unknown key {k!r}" for k in v if k not in VIEW_KEYS]
        if v.get("type") not in VIEW_TYPES:
            errs.append(f"{where}.type: one of {sorted(VIEW_TYPES)}")
        if not isinstance(v.get("name"), str) or not v["name"] or v["name"] in names:
            errs.append(f"{where}.name: a unique non-empty string")
        names.add(v.get("name"))
        if "limit" in v and (not isinstance(v["limit"], int) or v["limit"] < 1):
            errs.append(f"{where}.limit: a positive integer")
        if "filters" in v:
            errs += _check_filter(v["filters"], f"{where}.filters", base)
        if "groupBy" in v:
            g = v["groupBy"]
            if not isinstance(g, dict) or set(g) - GROUP_BY_KEYS or "property" not in g:
                errs.append(f"{where}.groupBy: {{property, direction}}")
            else:
                errs += _check_property(g["property"], f"{where}.groupBy.property", base, note_keys)
                if g.get("direction", "ASC") not in DIRECTIONS:
                    errs.append(f"{where}.groupBy.direction: ASC or DESC")
        order = v.get("order", [])
        if not isinstance(order, list):
            errs.append(f"{where}.order: a list")
        else:
            for j, p in enumerate(order):
                errs += _check_property(p, f"{where}.order[{j}]", base, note_keys)
    return errs


def test_every_view_uses_only_the_documented_bases_schema():
    folder = template_dir() / BRAIN_SERVICES_DIR
    assert sorted(p.name for p in folder.glob("*.base")) == sorted(VIEWS)
    for name in VIEWS:
        text = (folder / name).read_text(encoding="utf-8")
        assert base_errors(text, NOTE_KEYS[name]) == [], name
        if name in FOLDERS:  # each view reads the folder the code writes those notes to
            assert f'file.inFolder("{FOLDERS[name]}")' in text, name


def test_the_schema_check_catches_what_obsidian_would_not_open():
    keys = set(KEY_ORDER)
    assert base_errors("views:\n  - type: table\n    name: A\n", keys) == []
    bad = {
        "filters: [x\n": "not YAML",
        "source: x\nviews:\n  - type: table\n    name: A\n": "unknown top-level key",
        "views:\n  - type: grid\n    name: A\n": "views[0].type",
        "views:\n  - type: table\n    name: A\n    sort: x\n": "unknown key 'sort'",
        "views:\n  - type: table\n    name: A\n    groupBy:\n      property: note.type\n      direction: UP\n": "ASC or DESC",
        "filters:\n  and: file.ext\nviews:\n  - type: table\n    name: A\n": "non-empty list",
        "filters:\n  any:\n    - x\nviews:\n  - type: table\n    name: A\n": "and/or/not",
        "filters: file.inFolders(\"x\")\nviews:\n  - type: table\n    name: A\n": "unknown function",
        "views:\n  - type: table\n    name: A\n    order:\n      - formula.nope\n": "not defined",
        "views:\n  - type: table\n    name: A\n    order:\n      - note.nobody_writes_this\n": "no note of this view",
        "views:\n  - type: table\n    name: A\n    order:\n      - file.color\n": "unknown file property",
    }
    for text, problem in bad.items():
        errs = base_errors(text, keys)
        assert any(problem in e for e in errs), (text, errs)


def test_skills_have_agent_skill_frontmatter():
    for name in SKILLS:
        p = template_dir() / "Skills" / name / "SKILL.md"
        note = parse_text(f"Skills/{name}/SKILL.md", p.read_text(encoding="utf-8"))
        assert note.problem is None, name
        assert note.meta["name"] == name and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name)
        desc = note.meta["description"]
        assert isinstance(desc, str) and 40 < len(desc) <= 1024
        assert set(note.meta) == {"name", "description"}
        # Skills are notes, indexed like any other: a phrase the secret detector takes for a credential
        # ("anything secret: hive-brain ...") would be redacted and reported by doctor in every vault.
        assert find_secrets(p.read_text(encoding="utf-8")) == [], name
    body = (template_dir() / "Skills/hive-brain/SKILL.md").read_text(encoding="utf-8")
    for must in ("hive-brain recall", "hive-brain remember", "hive-brain evolve", "DuplicateKey", "archived"):
        assert must in body


def _init(path: Path):
    return CliRunner().invoke(main, ["init", str(path), "--json"], catch_exceptions=False)


def test_init_writes_the_pack_and_keeps_a_users_edited_copy(tmp_path):
    vault = tmp_path / "brain"
    assert _init(vault).exit_code == 0
    for name in VIEWS:
        assert (vault / BRAIN_SERVICES_DIR / name).is_file(), name
    for name in SKILLS:
        assert (vault / "Skills" / name / "SKILL.md").is_file(), name
    assert not (vault / BRAIN_SERVICES_DIR / ".gitkeep").exists()

    mine = vault / BRAIN_SERVICES_DIR / "Agent Memory.base"
    edited = mine.read_text(encoding="utf-8").replace("name: By type", "name: Mine by type")
    mine.write_text(edited, encoding="utf-8")
    skill = vault / "Skills/hive-brain/SKILL.md"
    skill.write_text(skill.read_text(encoding="utf-8") + "\nMy own rule: recall twice.\n", encoding="utf-8")
    (vault / BRAIN_SERVICES_DIR / "Conflicts.base").unlink()
    assert _init(vault).exit_code == 0  # the same vault again
    assert mine.read_text(encoding="utf-8") == edited
    assert skill.read_text(encoding="utf-8").endswith("My own rule: recall twice.\n")
    assert (vault / BRAIN_SERVICES_DIR / "Conflicts.base").is_file()  # a removed view comes back


def test_the_packaged_template_is_the_one_init_copies():
    pkg = Path(__file__).resolve().parents[1] / "hive_brain" / "vault_template"
    assert pkg.resolve() == template_dir().resolve()
    assert (pkg / BRAIN_SERVICES_DIR / "Agent Memory.base").is_file()


def test_the_shipped_skills_are_not_recalled_as_memory(vault_path):
    """They are instructions for agents; as notes they matched any developer question."""
    from .helpers import remember, run

    assert (vault_path / "Skills" / "hive-brain" / "SKILL.md").is_file()
    remember("Recall habit", "Recall memory from the vault before answering; evolve a memory that changed.")
    hits = run("recall", "recall memory before answering and evolve memories in this vault", "--scope", "full-vault",
               "--lexical")["hits"]
    paths = [h["path"] for h in hits]
    assert paths and not [p for p in paths if p.startswith("Skills/")], paths
