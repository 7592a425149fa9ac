"""`hive-brain demo`: a vault from the template, a few memories, one evolution, and questions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .base import State, command, out

if TYPE_CHECKING:
    from ..config import Settings

MEMORIES = [
    ("preference", "Package manager", "Use pnpm, never npm, for JavaScript and TypeScript projects.", ["js", "tooling"]),
    ("decision", "Analytics database", "Analytics events are stored in ClickHouse; Postgres was too slow for aggregations.", ["data"]),
    ("lesson", "Flaky sync test", "test_sync fails under load because of a race in the file watcher; rerun once before debugging.", ["tests"]),
    ("procedure", "Release steps", "Tag the commit, push the tag, and CI publishes the wheel to the internal index.", ["release"]),
    ("instruction", "Commit messages", "Write commit messages in the imperative mood with a one-line summary under 72 characters.", []),
    ("fact", "部署时间", "每周五下午发布新版本，先在预发布环境验证。", ["release"]),
]
QUESTIONS = [
    "which node dependency tool should I use?",
    "why does the sync test keep failing?",
    "什么时候发布新版本？",
    "what is the capital of Peru?",
]


def run_demo(path: Path, settings: Settings, *, semantic: bool = True) -> dict[str, Any]:
    from ..config import Settings
    from ..engine import Engine
    from ..memory.store import MemoryInput
    from ..store.notes import derive_memory_key
    from ..store.vault import init_vault

    vault, created = init_vault(path, settings)
    # In-process reads, hybrid when semantic: the demo shows what recall finds, not a server starting
    # (with autostart on, a read that finds no server answers lexically and starts one: Engine._fallback_view).
    eng = Engine(vault, Settings(**{**settings.__dict__, "vault": vault.root, "autostart": False}))
    made = []
    for mtype, title, content, tags in MEMORIES:
        existing = eng.catalog.by_key(derive_memory_key(mtype, title))
        if existing:
            continue
        made.append(eng.memory.remember(MemoryInput(type=mtype, title=title, content=content, tags=tags)))
    evolved = None
    db = [e for e in eng.catalog.by_key("decision/analytics-database") if e.status == "active"]
    if db and "DuckDB" not in (eng.memory.get(db[0].id)["content"]):
        evolved = eng.memory.evolve(db[0].id, "Analytics moved from ClickHouse to DuckDB files on S3 in 2026; cheaper at our size.")
    eng.rebuild(embed=semantic)
    answers = []
    for q in QUESTIONS + ["which analytics database do we use?"]:
        r = eng.recall(q, semantic=semantic, limit=3, detail="overview")
        answers.append({"question": q, "abstained": r["abstained"], "reason": r["reason"], "semantic": r["semantic"],
                        "hits": [{"title": h["title"], "path": h["path"], "text": h["passage"]["text"],
                                  "evolved": bool(h.get("evolutionChain"))} for h in r["hits"]]})
    pack = eng.answer("how do we release a new version?", budget=2000, semantic=semantic)
    return {"vault": str(vault.root), "created": created, "remembered": len(made), "evolved": evolved, "answers": answers,
            "answerPack": pack["context"] if not pack["abstained"] else None}


@command("demo")
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--lexical", is_flag=True, help="Skip the embedding model.")
def demo_cmd(state: State, path: Path | None, lexical: bool, as_json: bool) -> None:
    """Create a demo vault, remember a few memories, evolve one, and ask questions.

    \b
    Example:
      hive-brain demo ./demo-vault
    """
    target = path or Path.cwd() / "hive-brain-demo"
    res = run_demo(target, state.settings(identify=False), semantic=not lexical)

    def human(c: Any) -> None:
        from rich.markup import escape

        c.print(f"Demo vault: [bold]{res['vault']}[/] ({res['remembered']} memories written; open it in Obsidian)")
        for a in res["answers"]:
            c.print(f"\n[bold cyan]? {escape(a['question'])}[/]")
            if a["abstained"]:
                c.print(f"  [dim]no grounded answer: {escape(a['reason'] or '')}[/]")
            for h in a["hits"][:2]:
                ev = " [dim](evolved; older version kept as history)[/]" if h["evolved"] else ""
                c.print(f"  • [bold]{escape(h['title'])}[/]{ev}: {escape(h['text'][:160])}")
        c.print(f"\nTry: hive-brain --vault {res['vault']} recall \"how do we release?\"")

    out(as_json, res, human)


COMMANDS: list[click.Command] = [demo_cmd]
