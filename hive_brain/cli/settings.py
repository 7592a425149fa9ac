"""`hive-brain config get|set|unset|list`: the user config file, so a setting outlives one shell."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .base import State, command, out

if TYPE_CHECKING:
    from ..config import Settings


@click.group("config")
def config_group() -> None:
    """Read and change the user config file (~/.config/hive-brain/config.toml).

    Settings resolve as flags > HIVE_BRAIN_* environment > this file > defaults.

    \b
    Example:
      hive-brain config set vault ~/brain
      hive-brain config list
    """


def _value(settings: Settings, key: str) -> Any:
    v = getattr(settings, key)
    return str(v) if v is not None and not isinstance(v, bool | int | float) else v


@command("list", group=config_group)
def config_list_cmd(state: State, as_json: bool) -> None:
    """Every setting with its value and where it came from.

    \b
    Example:
      hive-brain config list --json
    """
    from ..config import config_file, settable

    s = state.settings(identify=False)
    rows = [{"key": k, "value": _value(s, k), "source": s.sources.get(k, "default")} for k in settable()]
    res = {"file": str(config_file()), "settings": rows}

    def human(c: Any) -> None:
        click.echo(f"# {res['file']}")
        for r in rows:
            click.echo(f"{r['key']} = {r['value']}    ({r['source']})")

    out(as_json, res, human)


@command("get", group=config_group)
@click.argument("key")
def config_get_cmd(state: State, key: str, as_json: bool) -> None:
    """Print one setting's value.

    \b
    Example:
      hive-brain config get vault
    """
    from ..config import check_key

    k = check_key(key)
    s = state.settings(identify=False)
    res = {"key": k, "value": _value(s, k), "source": s.sources.get(k, "default")}
    out(as_json, res, lambda c: click.echo("" if res["value"] is None else res["value"]))


@command("set", group=config_group)
@click.argument("key")
@click.argument("value")
def config_set_cmd(state: State, key: str, value: str, as_json: bool) -> None:
    """Set one setting in the config file (other lines and comments are kept).

    \b
    Example:
      hive-brain config set vault ~/brain
      hive-brain config set autostart false
    """
    from ..config import check_key, resolve, set_in_file

    k = check_key(key)
    path = set_in_file(k, value)
    s = resolve()
    res = {"key": k, "value": _value(s, k), "file": str(path), "source": s.sources.get(k, "default")}

    if k == "vault":
        from ..store.vault import find_root

        target = Path(str(res["value"]))
        if find_root(target) != target.resolve():
            res["warning"] = f"{res['value']} is not a hive-brain vault yet: run `hive-brain init {res['value']}`"

    def human(c: Any) -> None:
        click.echo(f"{k} = {res['value']}  (in {path})")
        if res.get("warning"):
            click.echo(f"warning: {res['warning']}", err=True)
        if not str(res["source"]).startswith("config:"):
            click.echo(f"note: {res['source']} overrides the file in this shell", err=True)

    out(as_json, res, human)


@command("unset", group=config_group)
@click.argument("key")
def config_unset_cmd(state: State, key: str, as_json: bool) -> None:
    """Remove one setting from the config file (back to its default).

    \b
    Example:
      hive-brain config unset autostart
    """
    from ..config import set_in_file

    path = set_in_file(key, None)
    out(as_json, {"key": key, "file": str(path), "removed": True}, lambda c: click.echo(f"removed {key} from {path}"))


COMMANDS: list[click.Command] = [config_group]
