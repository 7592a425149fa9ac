"""`hive-brain owner`: the owner key and agent credentials of enforcement mode (docs/security.md)."""

from __future__ import annotations

from typing import Any

import click

from .base import CONTEXT_SETTINGS, State, command, out


@click.group("owner", context_settings=CONTEXT_SETTINGS)
def owner_group() -> None:
    """Prove who is calling in enforcement mode: the owner key and agent credentials.

    \b
    Example:
      hive-brain owner init
      hive-brain --owner-key ~/.config/hive-brain/owner.key owner issue --agent reviewer
    """


@command("init", group=owner_group)
@click.option("--key-file", default=None, metavar="PATH",
              help="Where to create the owner key (default: ~/.config/hive-brain/owner.key; never in the vault or state dir).")
def owner_init_cmd(state: State, key_file: str | None, as_json: bool) -> None:
    """Create this device's owner key (once; run it before turning enforcement mode on).

    Keep the file out of every agent's configuration; pass it only to commands you run yourself
    (`--owner-key PATH` or `HIVE_BRAIN_OWNER_KEY=PATH`).

    \b
    Example:
      hive-brain owner init
    """
    from pathlib import Path

    from ..store.identity import init_owner

    s = state.settings(identify=False)  # nobody can prove anything before the key exists
    res = init_owner(s.state_dir, Path(key_file) if key_file else None)
    out(as_json, res, lambda c: click.echo(
        f"Owner key {'created' if res['status'] == 'created' else 'already set up'}: {res['keyFile']}\n"
        "Prove you are the owner with --owner-key PATH (never put it in an agent's config)."))


@command("issue", group=owner_group)
@click.option("--agent", "agent_id", required=True, metavar="ID", help="The agent to issue a credential for.")
def owner_issue_cmd(state: State, agent_id: str, as_json: bool) -> None:
    """Issue (or show) an agent's credential file; its config passes it as HIVE_AGENT_CREDENTIAL.

    `hooks install` does this for claude-code and codex; use this for any other agent. In enforcement
    mode only the proved owner may.

    \b
    Example:
      hive-brain --owner-key ~/.config/hive-brain/owner.key owner issue --agent reviewer
    """
    from ..memory.layers import require_owner
    from ..store.identity import issue_agent_credential

    s = state.settings()
    require_owner(s, "issuing agent credentials")
    path = issue_agent_credential(s.state_dir, agent_id)
    res: dict[str, Any] = {"agent": agent_id, "credentialFile": str(path)}
    out(as_json, res, lambda c: click.echo(f"HIVE_AGENT_ID={agent_id} HIVE_AGENT_CREDENTIAL={path}"))


COMMANDS: list[click.Command] = [owner_group]
