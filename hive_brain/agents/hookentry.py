"""Light entry for agent hooks: runs before click/rich are imported (see __main__).

Installed hooks run this file by its path, ``python -S .../hive_brain/agents/hookentry.py hook
prompt`` (:func:`~.settingsfile.hook_command`): ``-S`` skips ``site`` (the venv's ``.pth`` files and
the import hooks they install), which is a fixed cost of every prompt's process, and the path needs
no console-script wrapper (``re`` and ``importlib.metadata`` lookups). Only the server-up prompt path
runs without ``site``; anything that needs the installed third-party packages (the in-process
fallback, session start, stop) loads it first (:func:`.hooks.load_site`).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hook"]:  # the installed form: `hookentry.py hook prompt` (how is_ours knows it)
        argv = argv[1:]
    if not argv:
        print("usage: hive-brain-hook prompt|session-start|stop < hook.json", file=sys.stderr)
        return 2
    from . import hooks

    return hooks.dispatch(argv[0], argv[1:])


if __name__ == "__main__":
    # Run by path: sys.path[0] is this file's folder, where agents/mcp.py would shadow the mcp
    # package; the folder that holds the hive_brain package takes its place.
    import os

    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from hive_brain.agents.hookentry import main as _main

    sys.exit(_main())
