"""Commands that ask the memory: recall, answer, browse, replay, compare."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from .base import State, command, out
from .text import markup_escape, recall_lines, rich_style
from .thin import NOTHING_FOUND_EXIT, recall_args

if TYPE_CHECKING:
    from ..config import Settings

# ---------------------------------------------------------------------------------------------- recall


def _question(question: str) -> str:
    from ..errors import UsageError

    if not question.strip():
        raise UsageError("the question is empty", hint='ask something, e.g. hive-brain recall "how do we deploy?"')
    return question


def _finish(res: dict, exit_status: bool) -> None:
    if exit_status and (res.get("abstained") or not (res.get("hits") or res.get("context"))):
        raise SystemExit(NOTHING_FOUND_EXIT)


def recall_options(fn: Callable | None = None, *, detail: str = "full") -> Any:
    """The options recall and answer share. ``detail``: the ``--detail`` default, ``full`` for recall
    (the whole note with each hit); ``answer`` keeps ``overview`` passages, which its pack is built of."""
    if fn is None:
        return lambda f: recall_options(f, detail=detail)
    opts = [
        click.option("--scope", type=click.Choice(["tiered", "agent-memory", "full-vault"]), default="tiered", show_default=True,
                     help="tiered: typed memory first, the whole vault when the best typed hit is weak."),
        click.option("--type", "types", multiple=True, help="Only these memory types (repeatable)."),
        click.option("--tags", default=None, help="Only notes with one of these tags (comma-separated; frontmatter tags or inline #tags)."),
        click.option("--project", default=None),
        click.option("--limit", type=click.IntRange(1, 100), default=10, show_default=True),
        click.option("--as-of", default=None, metavar="YYYY-MM-DD", help="Recall as things stood on that day."),
        click.option("--include-operational", is_flag=True,
                     help="Also search Operations/ notes, and list matching operational events apart (recall)."),
        click.option("--detail", type=click.Choice(["abstract", "overview", "full"]), default=detail, show_default=True,
                     help="How much of each hit to return: full adds the whole note, overview a passage up to "
                          "1,200 characters, abstract its first paragraph (never changes ranking)."),
        click.option("--mode", type=click.Choice(["flat", "hierarchical"]), default="flat", show_default=True,
                     help="hierarchical: score folders first and re-rank by them (never hides a note)."),
        click.option("--lexical", is_flag=True, help="Skip semantic search (BM25 and features only)."),
        click.option("--rerank", is_flag=True,
                     help="Deep mode: read the top results again against the question and put the best first "
                          "(about a tenth of a second longer with a warm server)."),
        click.option("--exit-status", is_flag=True,
                     help=f"Exit with {NOTHING_FOUND_EXIT} when nothing relevant was found (for scripts)."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def _recall_kwargs(types, tags, project, limit, as_of, include_operational, detail, mode, scope, rerank=False) -> dict:
    return recall_args(types, tags, project, limit, as_of, include_operational, detail, mode, scope, rerank)


def _print_hits(c: Any, res: dict) -> None:
    for line in recall_lines(res, rich_style, markup_escape):  # the thin client prints the same lines plain
        c.print(line)


def _warm_next(settings: Settings, res: dict) -> None:
    """A read that was done in-process starts the server for the next one (``autostart``)."""
    if res.get("via") == "server":
        return
    from ..rpc.client import autostart

    if autostart(settings):
        res["serverStarted"] = True


@command("recall")
@click.argument("question")
@recall_options
def recall_cmd(state: State, question: str, scope: str, types, tags, project, limit, as_of, include_operational, detail,
               mode, lexical: bool, rerank: bool, exit_status: bool, as_json: bool) -> None:
    """Find the memories and notes that answer a question (hybrid BM25 + vectors).

    \b
    Example:
      hive-brain recall "which package manager do we use?" --limit 5
      hive-brain recall "what did we decide about caching as of 2025-03-01" --json
    """
    question = _question(question)
    eng = state.engine()
    res = eng.recall(question, semantic=not lexical, **_recall_kwargs(types, tags, project, limit, as_of,
                                                                     include_operational, detail, mode, scope, rerank))
    _warm_next(eng.settings, res)

    def human(c: Any) -> None:
        _print_hits(c, res)
        for ev in res.get("operational") or []:  # the journal's events, never ranked among the hits
            c.print(f"operational {ev['ts']} {ev['outcome']} {ev['operationKey']} ({ev['taskId']}): "
                    f"{ev['title']}", markup=False)

    out(as_json, res, human)
    _finish(res, exit_status)


@command("answer")
@click.argument("question")
@click.option("--budget", type=int, default=None, help="Character budget of the context pack (hook mode default 8000).")
@click.option("--hook", "hook_mode", is_flag=True, help="Hook mode: lexical unless the server is up, budgeted, never waits.")
@recall_options(detail="overview")
def answer_cmd(state: State, question: str, budget: int | None, hook_mode: bool, scope: str, types, tags, project, limit,
               as_of, include_operational, detail, mode, lexical: bool, rerank: bool, exit_status: bool,
               as_json: bool) -> None:
    """Build a grounded context pack for a question, or abstain when nothing fits.

    \b
    Example:
      hive-brain answer "how do we deploy the web app?" --budget 8000
    """
    question = _question(question)
    eng = state.engine()
    if hook_mode:
        from ..agents.hooks import hook_answer

        res = hook_answer(eng.settings, question, budget=budget)
    else:
        res = eng.answer(question, budget=budget, semantic=not lexical,
                         **_recall_kwargs(types, tags, project, limit, as_of, include_operational, detail, mode, scope,
                                          rerank))
    _warm_next(eng.settings, res)

    def human(c: Any) -> None:
        rec = res.get("recall") or {}
        if rec.get("mode") == "scan":  # the pack is the whole of stdout: why it came from a scan goes to stderr
            for w in rec.get("warnings") or []:
                click.echo(f"warning: {w}", err=True)
        if res["abstained"]:
            c.print(f"No grounded answer: {res.get('reason')}")
        else:
            click.echo(res["context"])
        if res.get("serverStarted"):
            click.echo("(started the hive-brain server in the background: the next question is answered warm)",
                       err=True)

    out(as_json, res, human)
    _finish(res, exit_status)


@command("browse")
@click.argument("folder_arg", required=False, metavar="[FOLDER]")
@click.option("--path", "folder", default="", help="Vault folder, e.g. Projects (or give it as the argument).")
@click.option("--detail", type=click.Choice(["abstract", "overview"]), default="abstract", show_default=True,
              help="abstract ~100 tokens, overview ~2,000 tokens.")
def browse_cmd(state: State, folder_arg: str | None, folder: str, detail: str, as_json: bool) -> None:
    """Summarise what a folder of the vault holds (extractive, no LLM; default: the whole vault).

    \b
    Example:
      hive-brain browse Projects --detail overview
    """
    from ..errors import UsageError
    from ..search.browse import summarize

    if folder_arg and folder and folder_arg != folder:
        raise UsageError(f"two different folders given ({folder_arg}, {folder})", hint="give it once")
    folder = folder_arg or folder

    res = summarize(state.engine(), folder, detail)
    out(as_json, res, lambda c: click.echo(res["summary"]))


@command("replay")
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


@command("compare")
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

COMMANDS: list[click.Command] = [recall_cmd, answer_cmd, browse_cmd, replay_cmd, compare_cmd]
