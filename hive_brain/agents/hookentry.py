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
    if argv[0] == "prompt" and len(argv) == 1:
        return _prompt()
    from . import hooks

    return hooks.dispatch(argv[0], argv[1:])


def _prompt() -> int:
    """The prompt hook: the fast path (:mod:`.quick`) with a ready server, else the full one, which is
    told when the server already failed so it goes straight to its in-process answer."""
    import os
    import time

    from . import quick

    t0 = time.monotonic()
    stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    server_error = None
    try:
        code = quick.answer(stdin, t0)
    except quick.Fallback as e:
        server_error = e.server_error
    except Exception:  # noqa: BLE001 - a fast-path bug must cost only the fast path: the full one answers
        pass
    else:
        os._exit(code)  # as the full path does: nothing to clean up, and teardown costs tens of ms
    from . import hooks

    # The same t0: the hook has one deadline, the fast path's wait included (a fresh one here let a
    # hung server cost the prompt its share and then a whole second deadline).
    return hooks.dispatch("prompt", [], stdin=stdin, server_error=server_error, t0=t0)


if __name__ == "__main__":
    # Run by path: sys.path[0] is this file's folder, where agents/mcp.py would shadow the mcp
    # package; the folder that holds the hive_brain package takes its place.
    import os

    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from hive_brain.agents.hookentry import main as _main

    sys.exit(_main())
