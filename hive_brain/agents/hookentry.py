"""Light entry for agent hooks: runs before click/rich are imported (see __main__)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print("usage: hive-brain-hook prompt|session-start|stop < hook.json", file=sys.stderr)
        return 2
    from . import hooks

    return hooks.dispatch(argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(main())
