from __future__ import annotations

import pytest

from hive_brain.store.secrets import redact, secret_kinds

SECRETS = [
    "my key is sk-proj-abcdefghijklmnopqrstuvwxyz123456",
    "export ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
    "AKIAIOSFODNN7EXAMPLE",
    "token: ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "password = hunter2hunter2",
    "DATABASE_URL=postgres://app:s3cr3tpassw0rd@db.internal:5432/app",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789",
]
HARMLESS = [
    "Use pnpm, never npm.",
    "The API key lives in 1Password under 'Deploy'.",
    "password: <your password here>",
    "set api_key=${OPENAI_API_KEY} in the env",
    "The token budget is 8000 characters.",
]


@pytest.mark.parametrize("text", SECRETS)
def test_secrets_found_and_redacted(text):
    assert secret_kinds(text)
    red, n = redact(text)
    assert n >= 1
    for kind in secret_kinds(text):
        assert kind not in ("",)
    # The distinctive secret part is gone.
    for piece in ("abcdefghijklmnopqrstuvwxyz", "AKIAIOSFODNN7", "ghp_", "hunter2", "s3cr3t", "b3BlbnNz"):
        if piece in text:
            assert piece not in red


@pytest.mark.parametrize("text", HARMLESS)
def test_harmless_text_passes(text):
    assert secret_kinds(text) == []


def test_private_spans_removed():
    red, n = redact("keep <private>my home address</private> this")
    assert "home address" not in red and "keep" in red and n == 1
