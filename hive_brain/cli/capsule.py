"""Brain capsules: capsule-export, capsule-open, capsule-search, capsule-import (docs/capsule-format.md)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .base import State, command, out
from .text import split_tags

_PASSPHRASE = click.option("--passphrase-env", "passphrase_env", default=None, metavar="VAR",
                           help="Environment variable holding the passphrase of a locked capsule (owner only).")


def _capsule(fn: Callable) -> Callable:
    """``capsule-open FILE`` (as most commands take a path) or ``capsule-open --capsule FILE`` (kept for
    scripts); the command receives ``capsule``. ``capsule-search`` also takes the file before its query."""

    @functools.wraps(fn)
    def wrapper(*args: Any, capsule_arg: Path | None = None, capsule: Path | None = None, **kwargs: Any) -> Any:
        from ..errors import UsageError

        name = fn.__name__.removesuffix("_cmd").replace("_", "-")
        query = kwargs.get("query")
        if query is not None and capsule_arg is not None and _names_a_capsule(query) and not _names_a_capsule(str(capsule_arg)):
            kwargs["query"], capsule_arg = str(capsule_arg), Path(query)  # `capsule-search FILE QUERY`
        if capsule_arg is not None and capsule is not None and capsule_arg != capsule:
            raise UsageError(f"two capsules given ({capsule_arg} and --capsule {capsule})", hint="give the file once")
        capsule = capsule_arg or capsule
        if capsule is None:
            if query is not None and _names_a_capsule(query):
                raise UsageError(f"what to search for in {query}?",
                                 hint=f'give the words too: hive-brain {name} "deploy checklist" {query}')
            words = ' "deploy checklist"' if query is not None else ""
            raise UsageError("which capsule? name the .hivebrain file",
                             hint=f"hive-brain {name}{words} FILE (or --capsule FILE)")
        return fn(*args, capsule=capsule, **kwargs)

    wrapper = click.option("--capsule", "capsule", default=None, type=click.Path(dir_okay=False, path_type=Path),
                           metavar="FILE", help="The .hivebrain file (or give it as the argument).")(wrapper)
    return click.argument("capsule_arg", required=False, type=click.Path(dir_okay=False, path_type=Path),
                          metavar="[FILE]")(wrapper)


def _names_a_capsule(text: str) -> bool:
    return text.lower().endswith(".hivebrain") or Path(text).is_file()


def _open(state: State, capsule: Path, passphrase_env: str | None) -> Any:
    from ..memory.capsules import passphrase_from_env, read_capsule

    return read_capsule(state.settings(), capsule, passphrase=passphrase_from_env(passphrase_env))


@command("capsule-export")
@click.option("--project", default=None, help="Export this project's current memories.")
@click.option("--memory-ids", "memory_ids", multiple=True, help="Export these memories (comma-separated or repeated).")
@click.option("--output", "-o", default=None, type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Where to write it (default: ./<project>-<date>.hivebrain).")
@click.option("--expires", default=None, metavar="AGE|DATE", help="Refuse to open after this: 30d, 12h or a date.")
@_PASSPHRASE
@click.option("--include-private", is_flag=True, help="Also export private and task memories (owner only).")
@click.option("--force", is_flag=True, help="Overwrite --output if it exists.")
def capsule_export_cmd(state: State, project: str | None, memory_ids: tuple[str, ...], output: Path | None,
                       expires: str | None, passphrase_env: str | None, include_private: bool, force: bool,
                       as_json: bool) -> None:
    """Export chosen memories to one checksummed, searchable .hivebrain capsule.

    A scope is required (a project or memory ids; never everything). Only current memories go, secrets
    are redacted, and private/task memories only with --include-private (owner). --passphrase-env
    locks it with AES-256-GCM (owner only).

    \b
    Example:
      hive-brain capsule-export --project atlas --expires 30d
      CAPSULE_PASS=... hive-brain capsule-export --project atlas --passphrase-env CAPSULE_PASS -o atlas.hivebrain
      hive-brain capsule-export --memory-ids mem-01jabc,mem-01jdef --json
    """
    import datetime as dt

    from ..memory.capsules import export_capsule, passphrase_from_env
    from ..store.notes import slugify

    ids = split_tags(",".join(memory_ids)) or []
    passphrase = passphrase_from_env(passphrase_env)
    if output is None:
        stem = slugify(project) if project else "memories"
        output = Path(f"{stem}-{dt.datetime.now(dt.UTC):%Y%m%d}.hivebrain")
    res = export_capsule(state.engine().memory, output, project=project, memory_ids=ids, include_private=include_private,
                         expires=expires, passphrase=passphrase, force=force)

    def human(c: Any) -> None:
        lock = "locked (AES-256-GCM)" if res["encrypted"] else "unlocked"
        c.print(f"Exported {res['records']} memories to {res['capsule']} ({res['bytes']:,} bytes, {lock}"
                + (f", expires {res['expires']}" if res["expires"] else "") + ")", markup=False)
        if res["secretsRedacted"]:
            c.print(f"{res['secretsRedacted']} memories had secrets redacted on the way out", markup=False)
        if res.get("privateLeftOut"):
            c.print(f"{res['privateLeftOut']} private/task memories left out (--include-private to add them)",
                    markup=False)

    out(as_json, res, human)


@command("capsule-open")
@_capsule
@_PASSPHRASE
def capsule_open_cmd(state: State, capsule: Path, passphrase_env: str | None, as_json: bool) -> None:
    """Verify a capsule and show its manifest, provenance and expiry (nothing is imported).

    A damaged, changed, truncated, expired or wrong-passphrase capsule is refused, naming the check.

    \b
    Example:
      hive-brain capsule-open atlas.hivebrain
      hive-brain capsule-open --capsule atlas.hivebrain --passphrase-env CAPSULE_PASS --json
    """
    from ..memory.capsules import describe

    cap = _open(state, capsule, passphrase_env)
    res = describe(cap, capsule)

    def human(c: Any) -> None:
        p, e = res["provenance"], res["expiry"]
        c.print(f"{res['capsule']}: verified ({', '.join(res['checks'])})", markup=False)
        c.print(f"  {res['manifest']['recordCount']} memories, {'locked' if res['encrypted'] else 'unlocked'}, "
                f"{res['bytes']:,} bytes", markup=False)
        c.print(f"  from vault {p['vaultId']} generation {p['generation']}, exported by {p['exporter']} at "
                f"{p['created']} (hive-brain {p['hiveBrainVersion']})", markup=False)
        c.print(f"  expires: {e['expires'] or 'never'}" + (f" (in {e['remaining']})" if e["remaining"] else ""),
                markup=False)
        for r in res["records"][:20]:
            c.print(f"  - {r['memoryId']}  {r['type']}: {r['title']}", markup=False)
        if len(res["records"]) > 20:
            c.print(f"  ... and {len(res['records']) - 20} more (--json lists all)", markup=False)

    out(as_json, res, human)


@command("capsule-search")
@click.argument("query")
@_capsule
@click.option("--limit", "-k", default=10, show_default=True, type=click.IntRange(1, 1000), help="How many hits.")
@_PASSPHRASE
def capsule_search_cmd(state: State, query: str, capsule: Path, limit: int, passphrase_env: str | None,
                       as_json: bool) -> None:
    """Search a capsule's memories without importing them (its own FTS5 index, bm25 ranked).

    The capsule is FILE (after the query, or before it) or --capsule FILE.

    \b
    Example:
      hive-brain capsule-search "deploy checklist" atlas.hivebrain
      hive-brain capsule-search "deploy checklist" --capsule atlas.hivebrain --json
    """
    from ..memory.capsules import search_capsule

    res = search_capsule(_open(state, capsule, passphrase_env), query, limit)

    def human(c: Any) -> None:
        if not res["hits"]:
            c.print("No matches.", markup=False)
        for h in res["hits"]:
            c.print(f"{h['score']:7.3f}  {h['memoryId']}  {h['title']}", markup=False)
            c.print(f"         {h['snippet']}", markup=False)

    out(as_json, res, human)


@command("capsule-import")
@_capsule
@click.option("--enqueue", is_flag=True, help="Queue the proposals for Brain Review (default: a preview).")
@_PASSPHRASE
def capsule_import_cmd(state: State, capsule: Path, enqueue: bool, passphrase_env: str | None, as_json: bool) -> None:
    """Preview, or queue as Brain Review proposals (kind import), a capsule's memories.

    Never writes memory directly: the owner approves and applies each proposal. A memory that already
    exists here (same memory_key or same content) is said so, per record.

    \b
    Example:
      hive-brain capsule-import atlas.hivebrain
      hive-brain capsule-import --capsule atlas.hivebrain --enqueue --json
    """
    from ..memory.capsules import import_capsule

    cap = _open(state, capsule, passphrase_env)
    res = import_capsule(state.engine().memory, cap, enqueue=enqueue)

    def human(c: Any) -> None:
        for r in res["records"]:
            tag = r.get("proposal") or r["action"]
            c.print(f"{tag:>28}  {r['memoryId']}  {r['title']}  ({r['reason']})", markup=False)
        c.print(", ".join(f"{n} {k}" for k, n in sorted(res["counts"].items())) or "empty capsule", markup=False)
        if res["hint"]:
            c.print(res["hint"], markup=False)

    out(as_json, res, human)


COMMANDS = [capsule_export_cmd, capsule_open_cmd, capsule_search_cmd, capsule_import_cmd]
