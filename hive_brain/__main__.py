"""``python -m hive_brain`` / the ``hive-brain`` script.

``hive-brain hook ...`` is dispatched before click is imported: the prompt hook runs on every
prompt and must not pay for click and rich.
"""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if len(argv) >= 2 and argv[0] == "hook" and argv[1] in ("prompt", "session-start", "stop", "session-end") and "--help" not in argv:
        from .agents.hookentry import main as hook_main

        sys.exit(hook_main(argv[1:]))
    from .cli.app import main as cli_main

    cli_main(prog_name="hive-brain")


if __name__ == "__main__":
    main()
