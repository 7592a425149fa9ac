"""Find things that look like secrets, so they are refused (memory) or removed (transcripts).

Detections name the *kind* of secret and never carry its value.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

# (kind, pattern). Ordered from most to least specific; the value is never returned.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)")),
    ("AWS access key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})\b")),
    ("OpenAI API key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}\b")),
    ("Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}\b")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b")),
    ("Stripe key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("connection string password", re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:[^\s@/]{3,}@[^\s]+", re.I)),
    ("bearer token", re.compile(r"\b[Bb]earer\s+[A-Za-z0-9._~+/-]{20,}=*")),
    (
        "password or secret assignment",
        re.compile(
            r"""(?ix)\b(?:password|passwd|pwd|secret|api[_-]?key|apikey|access[_-]?token|auth[_-]?token|token|client[_-]?secret|private[_-]?key)
            \s*[:=]\s*["']?(?P<v>[^\s"'`,;]{6,})"""
        ),
    ),
]

_PLACEHOLDER = re.compile(r"^(?:<[^>]*>|\$\{?[A-Z_][A-Z0-9_]*\}?|x{3,}|\*{3,}|\.{3,}|changeme|example|your[_-].*|redacted|none|null|true|false)$", re.I)


@dataclass(frozen=True)
class Finding:
    kind: str
    start: int
    end: int


def _entropy(s: str) -> float:
    c = Counter(s)
    n = len(s)
    return -sum(v / n * math.log2(v / n) for v in c.values())


def find_secrets(text: str) -> list[Finding]:
    out: list[Finding] = []
    for kind, pat in _PATTERNS:
        for m in pat.finditer(text):
            if kind == "password or secret assignment":
                v = m.group("v")
                # Names of keys ("api_key: see 1Password") and placeholders are fine; values are not.
                if _PLACEHOLDER.match(v) or (len(v) < 12 and _entropy(v) < 2.5) or v.lower() in ("env", "environment"):
                    continue
                out.append(Finding(kind, m.start("v"), m.end("v")))
            else:
                out.append(Finding(kind, m.start(), m.end()))
    out.sort(key=lambda f: f.start)
    return out


def secret_kinds(text: str) -> list[str]:
    seen: list[str] = []
    for f in find_secrets(text):
        if f.kind not in seen:
            seen.append(f.kind)
    return seen


_PRIVATE = re.compile(r"<private>[\s\S]*?(?:</private>|\Z)", re.I)


def redact(text: str) -> tuple[str, int]:
    """Remove <private> spans and secrets; returns (text, number of redactions)."""
    n = 0

    def _priv(_m: re.Match[str]) -> str:
        nonlocal n
        n += 1
        return "[private]"

    text = _PRIVATE.sub(_priv, text)
    findings = find_secrets(text)
    if not findings:
        return text, n
    parts: list[str] = []
    pos = 0
    for f in findings:
        if f.start < pos:
            continue
        parts.append(text[pos:f.start])
        parts.append(f"[redacted {f.kind}]")
        pos = f.end
        n += 1
    parts.append(text[pos:])
    return "".join(parts), n
