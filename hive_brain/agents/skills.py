"""Linking a vault skill (``Skills/<name>/``, written by :mod:`hive_brain.memory.skills`) into the folders
where coding agents load personal skills, as a symlink, so the vault stays the one copy:

- Claude Code: ``~/.claude/skills/<name>/SKILL.md`` (personal skills, every project);
- Codex: ``~/.agents/skills/<name>/SKILL.md``, its user-scope skills folder (Codex follows symlinked
  skill folders, per its documentation). Older Codex releases read only ``$CODEX_HOME/skills``
  (``~/.codex/skills``); on those, link the folder there by hand.

Never over a user's skill: a name already taken by anything but a link to this very folder is refused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import Refused, UsageError

LINK_AGENTS = ("claude-code", "codex")


def skills_home(agent: str) -> Path:
    """The folder ``agent`` loads personal skills from."""
    if agent == "claude-code":
        return Path.home() / ".claude" / "skills"
    if agent == "codex":
        return Path.home() / ".agents" / "skills"
    raise UsageError(f"no skills folder known for {agent!r}", hint=f"one of {', '.join(LINK_AGENTS)}")


def check(skill_dir: Path, agent: str) -> bool:
    """True when ``skill_dir`` is linked for ``agent`` already, False when the name is free; Refused when
    the name is taken by anything else (the user's own skill)."""
    skill_dir = Path(skill_dir).resolve()
    target = skills_home(agent) / skill_dir.name
    if target.is_symlink() and Path(os.path.realpath(target)) == skill_dir:
        return True
    if target.exists() or target.is_symlink():
        raise Refused(f"{target} already exists; hive-brain never replaces an agent's skill",
                      hint="pick another name with --name, or remove that skill yourself")
    return False


def link(skill_dir: Path, agent: str) -> dict[str, Any]:
    """Symlink ``skill_dir`` as ``<skills_home(agent)>/<its name>``; says whether it was there already."""
    skill_dir = Path(skill_dir).resolve()
    target = skills_home(agent) / skill_dir.name
    if check(skill_dir, agent):
        return {"agent": agent, "link": str(target), "to": str(skill_dir), "status": "already linked"}
    target.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(skill_dir, target, target_is_directory=True)
    return {"agent": agent, "link": str(target), "to": str(skill_dir), "status": "linked"}
