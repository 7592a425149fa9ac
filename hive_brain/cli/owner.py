"""`hive-brain owner`: the owner key and agent credentials of enforcement mode (docs/security.md)."""

from __future__ import annotations

import time
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
@click.option("--rotate", is_flag=True, help="A new token even if the current one is valid (the old one stops working).")
@click.option("--expires", default=None, metavar="AGE|DATE", help="The token stops working after this: 30d, 12h or a date.")
def owner_issue_cmd(state: State, agent_id: str, rotate: bool, expires: str | None, as_json: bool) -> None:
    """Issue (or show) an agent's credential file; its config passes it as HIVE_AGENT_CREDENTIAL.

    `hooks install` does this for claude-code and codex; use this for any other agent. In enforcement
    mode only the proved owner may.

    \b
    Example:
      hive-brain --owner-key ~/.config/hive-brain/owner.key owner issue --agent reviewer
      hive-brain --owner-key ~/.config/hive-brain/owner.key owner issue --agent reviewer --rotate --expires 30d
    """
    from ..errors import UsageError
    from ..memory.layers import require_owner
    from ..memory.patterns import parse_since
    from ..store.identity import issue_agent_credential, load_registry

    s = state.settings()
    require_owner(s, "issuing agent credentials")
    until = parse_since(expires, ahead=True, option="--expires")
    if until is not None and until <= time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()):
        raise UsageError(f"--expires {expires!r} is already past", hint="give an age like 30d or a future date")
    path = issue_agent_credential(s.state_dir, agent_id, rotate=rotate, expires=until)
    until = load_registry(s.state_dir)["agents"][agent_id].get("expires")  # a kept credential or rotation keeps its own
    res: dict[str, Any] = {"agent": agent_id, "credentialFile": str(path), "expires": until}
    out(as_json, res, lambda c: click.echo(f"HIVE_AGENT_ID={agent_id} HIVE_AGENT_CREDENTIAL={path}"
                                           + (f"  (expires {until})" if until else "")))


@command("revoke", group=owner_group)
@click.argument("agent", required=False, metavar="[AGENT]")
@click.option("--agent", "agent_id", default=None, metavar="ID", help="The agent whose credential to revoke (or give it as AGENT).")
def owner_revoke_cmd(state: State, agent: str | None, agent_id: str | None, as_json: bool) -> None:
    """Revoke an agent's credential: its token proves nothing from now on (a running MCP server of that
    agent is refused at its next call), and its file is deleted.

    \b
    Example:
      hive-brain --owner-key ~/.config/hive-brain/owner.key owner revoke reviewer
    """
    from ..errors import UsageError
    from ..memory.layers import require_owner
    from ..store.identity import revoke_agent_credential

    if agent and agent_id and agent != agent_id:
        raise UsageError(f"two agents named: {agent!r} and --agent {agent_id!r}", hint="name one agent to revoke")
    agent_id = agent or agent_id
    if not agent_id:
        raise UsageError("name the agent whose credential to revoke", hint="hive-brain owner revoke AGENT (`owner list` shows them)")
    s = state.settings()
    require_owner(s, "revoking agent credentials")
    res = revoke_agent_credential(s.state_dir, agent_id)
    out(as_json, res, lambda c: click.echo(f"Revoked {agent_id}'s credential ({res['credentialFile']} deleted)"))


@command("list", group=owner_group)
def owner_list_cmd(state: State, as_json: bool) -> None:
    """List the agent credentials of this device: issued when, expiring when, revoked when.

    \b
    Example:
      hive-brain owner list --json
    """
    from ..store.identity import list_agent_credentials

    s = state.settings(identify=False)  # shows no token, only names and dates
    res = {"agents": list_agent_credentials(s.state_dir)}

    def human(c: Any) -> None:
        if not res["agents"]:
            click.echo("No agent credentials on this device.")
        for a in res["agents"]:
            if a["revoked"]:
                click.echo(f"{a['agent']:<20} revoked {a['revoked']}")
                continue
            when = f"expired {a['expires']}" if a["expired"] else (f"expires {a['expires']}" if a["expires"] else "no expiry")
            click.echo(f"{a['agent']:<20} issued {a['created']}  {when}" + ("" if a["fileExists"] else "  (file missing)"))

    out(as_json, res, human)


COMMANDS: list[click.Command] = [owner_group]
