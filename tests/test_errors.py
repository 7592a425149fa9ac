"""Errors carry their data across every boundary: ``to_dict`` / ``from_dict`` rebuild any subclass."""

from __future__ import annotations

import json

import hive_brain.agents.settingsfile  # noqa: F401 - registers SettingsFileError
import hive_brain.daemon.server  # noqa: F401 - registers AlreadyRunning
import hive_brain.rpc.client  # noqa: F401 - registers the ServerUnavailable family
from hive_brain.errors import CapsuleRefused, HiveBrainError, NoteError, Refused, UsageError


def test_every_error_class_survives_a_round_trip_through_json():
    assert {"NoteError", "CapsuleRefused", "ServerNotReady", "AlreadyRunning", "SettingsFileError",
            "WriteUnconfirmed"} <= set(HiveBrainError.registry)
    for name, cls in HiveBrainError.registry.items():
        err = HiveBrainError.from_dict({"error": name, "message": "m", "hint": "h", "extra": [1, {"a": 2}]})
        assert type(err) is cls and err.kind == name and err.exit_code == cls.exit_code
        back = HiveBrainError.from_dict(json.loads(json.dumps(err.to_dict())))
        assert type(back) is cls and back.to_dict() == err.to_dict() and str(back) == str(err)


def test_data_given_to_the_constructor_comes_back_as_the_same_attributes():
    note = NoteError("Memory/x.md", "broken YAML frontmatter", hint="fix it")
    back = HiveBrainError.from_dict(json.loads(json.dumps(note.to_dict())))
    assert isinstance(back, NoteError) and (back.path, back.problem, back.hint) == (note.path, note.problem, "fix it")
    assert str(back) == str(note) and back.to_dict()["error"] == "NoteError"
    cap = HiveBrainError.from_dict(CapsuleRefused("expiry", "expired").to_dict())
    assert isinstance(cap, CapsuleRefused) and cap.check == "expiry"
    batch = Refused("1 of 2 records refused", records=[{"index": 1, "status": "refused"}])
    assert HiveBrainError.from_dict(batch.to_dict()).details["records"] == [{"index": 1, "status": "refused"}]
    assert isinstance(HiveBrainError.from_dict({"error": "UsageError", "message": "bad"}), UsageError)


def test_an_unknown_name_keeps_its_name_and_reserved_keys_are_refused():
    err = HiveBrainError.from_dict({"error": "FromTheFuture", "message": "m", "why": 1})
    assert type(err) is HiveBrainError and err.to_dict() == {"error": "FromTheFuture", "message": "m", "hint": None,
                                                              "why": 1}
    try:
        HiveBrainError("m", ok=True)
    except TypeError:
        pass
    else:
        raise AssertionError("an error's data may not reuse the shape's own keys")
