"""The assembled ``hive-brain`` command: the root group from :mod:`.base` plus every command module.

Registration is explicit (no import side effects): each command module lists its commands in
``COMMANDS``. Importing this stays light: command modules import their core modules inside the
commands.
"""

from __future__ import annotations

from . import (
    agents,
    capsule,
    demo,
    index,
    memory,
    model,
    okf,
    operations,
    owner,
    repair,
    review,
    search,
    server,
    settings,
)
from .base import main

_MODULES = (memory, search, index, model, review, repair, operations, capsule, okf, agents, owner, server, settings, demo)
for _module in _MODULES:
    for _command in _module.COMMANDS:
        main.add_command(_command)

__all__ = ["main"]
