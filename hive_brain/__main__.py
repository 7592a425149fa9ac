"""``python -m hive_brain`` / the ``hive-brain`` script.

``hive-brain hook ...`` is dispatched before click is imported: the prompt hook runs on every
prompt and must not pay for click and rich. So are the everyday commands when the vault's server is
ready (``cli/thin.py``); anything the thin client does not take falls through to the full CLI.
"""

from __future__ import annotations

import sys

_THIN = ("remember", "evolve", "update", "get", "recall", "answer", "core", "status")  # cli.thin.COMMANDS, named here so other commands import nothing more


def main() -> None:
    argv = sys.argv[1:]
    if len(argv) >= 2 and argv[0] == "hook" and argv[1] in ("prompt", "session-start", "stop", "session-end") and "--help" not in argv:
        from .agents.hookentry import main as hook_main

        sys.exit(hook_main(argv[1:]))
    if any(a in _THIN for a in argv[:5]):
        # The everyday commands with a ready server: no click, rich or engine code (cli/thin.py).
        from .cli import thin

        try:
            sys.exit(thin.main(argv))
        except thin.Fallback:
            pass  # nothing was printed or sent: the full CLI does it all
    from .cli.app import main as cli_main

    cli_main(prog_name="hive-brain")


if __name__ == "__main__":
    main()
