"""``hive-brain okf export`` / ``okf validate``: Open Knowledge Format v0.1 bundles (memory/okf.py)."""

from __future__ import annotations

import sys
from typing import Any

import click

from .base import State, command, out


@click.group("okf")
def okf_group() -> None:
    """Open Knowledge Format (OKF v0.1) bundles: export shared memory as Markdown concepts, validate bundles.

    \b
    Example:
      hive-brain okf export
      hive-brain okf validate "Operations/Brain Services/OKF Export"
    """


@command("export", group=okf_group)
@click.option("--include", type=click.Choice(["agent-memory", "conversations", "all"]), default="agent-memory",
              show_default=True, help="Which notes: shared typed memories, shared conversations, or both.")
@click.option("--output", default=None, metavar="DIR",
              help="Bundle folder (default: Operations/Brain Services/OKF Export/ in the vault, which the server "
                   "keeps current). Outside the vault otherwise.")
@click.option("--clean", is_flag=True, help="Also remove .md files in DIR that this export did not write.")
def export_cmd(state: State, include: str, output: str | None, clean: bool, as_json: bool) -> None:
    """Export shared, current notes as an OKF bundle (private, task, superseded and archived notes stay).

    Each note becomes one concept file named after its title plus a short code from its id, so the
    same note keeps the same file on every export; secrets are scrubbed; index.md lists them. Running
    it again updates the bundle in place and removes concepts whose note is gone; no other note in the
    vault changes.

    \b
    Example:
      hive-brain okf export
      hive-brain okf export --include all --output ~/okf/brain --clean --json
    """
    from importlib.metadata import PackageNotFoundError, version

    from ..memory.okf import export
    from ..store.journal import write_session

    try:
        ours = version("hive-brain")
    except PackageNotFoundError:  # running from a source tree that was never installed
        ours = "0+unknown"
    eng = state.engine()
    # Under the vault lock: the server prunes the default bundle under it too.
    with write_session(eng.vault, timeout=eng.settings.lock_timeout, command="okf export"):
        eng.catalog.refresh()
        res = export(eng.vault, eng.catalog, include=include, output=output, clean=clean,
                     generator=f"hive-brain/{ours}")

    def human(c: Any) -> None:
        click.echo(f"Exported {res['concepts']} concepts to {res['output']} ({res['written']} written, "
                   f"{res['unchanged']} unchanged, {len(res['removed'])} removed)")
        for p in res["problems"]:
            click.echo(f"  not conformant: {p['path']}: {p['problem']}", err=True)

    out(as_json, res, human, plain=True)


@command("validate", group=okf_group)
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False))
def validate_cmd(state: State, directory: str, as_json: bool) -> None:
    """Check a folder against OKF v0.1 conformance; exits 1 when it is not conformant.

    Every .md file that is not index.md, log.md or listed in .okfignore must start with YAML
    frontmatter holding a non-empty `type`; index.md may carry no frontmatter (the root one: only
    okf_version); log.md uses YYYY-MM-DD headings. Missing titles or descriptions are warnings.

    \b
    Example:
      hive-brain okf validate ./bundle
      hive-brain okf validate "Operations/Brain Services/OKF Export" --json
    """
    from ..memory.okf import validate

    res = validate(directory)

    def human(c: Any) -> None:
        verdict = "conformant" if res["ok"] else "NOT conformant"
        click.echo(f"{res['bundle']}: {verdict} with OKF {res['okfVersion']} ({res['concepts']} concepts, "
                   f"{len(res['errors'])} errors, {len(res['warnings'])} warnings)")
        for e in res["errors"]:
            click.echo(f"  error: {e['path']}: {e['problem']}")
        for w in res["warnings"]:
            click.echo(f"  warning: {w['path']}: {w['problem']}")

    out(as_json, res, human, plain=True)
    if not res["ok"]:
        sys.exit(1)


COMMANDS = [okf_group]
