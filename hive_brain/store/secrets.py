"""Find things that look like secrets: refused on writes, redacted on every read.

One detector serves all three uses: writes refuse a secret in any caller-supplied field
(:func:`secret_kinds`), conversation capture removes them (:func:`redact`), and the indexer scrubs
every note before anything derived from it is stored (:func:`scrub`, :func:`scrub_bytes`), so recall,
answer, the prompt hook, MCP and the state dir never hold the value; the note on disk is untouched.

Detections name the *kind* of secret and never carry its value. The token rules follow the
maintained rule sets of detect-secrets (Yelp, Apache-2.0) and gitleaks (MIT) for the providers they
cover; the rest (natural-language passwords, bare AWS secret keys, PEM bodies without their BEGIN
line, invisible characters inside a key) are ours. Why detect-secrets is not a dependency:
docs/security.md ("## Secrets"). Everything here is the standard library: the hook path imports it.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# Bump when the rules change: the catalog and the index are then rebuilt, so notes indexed before
# are scrubbed by the new rules too.
RULES_VERSION = 3  # 2: base64-wrapped secrets, a service account's private_key_id; 3: Basic credentials of any length, base64 in base64, documentation stand-ins
ASSIGNMENT = "password or secret assignment"
_KEYWORDS = (
    r"password|passwd|passphrase|pwd|pass|secret|token|api[_-]?key|apikey|auth[_-]?key|access[_-]?key"
    r"|secret[_-]?key|private[_-]?key|client[_-]?secret|credentials?"
)
# The end of a key name whose last segments are a secret word: DB_PASSWORD, GITHUB_TOKEN,
# aws_secret_access_key, dbPassword, "private_key_id" - but not tokenizer, max_tokens, bypass or passage.
# The word starts a segment (after a non-letter, or camelCase); the pattern starts at the word and
# is tried only where one occurs (scope "at"), never at every letter of the text.
_KEY_NAME = rf"(?:(?<![A-Za-z0-9])|(?<=[a-z0-9])(?=(?-i:[A-Z])))(?:{_KEYWORDS})(?:[_.-][A-Za-z0-9]+)*"
_B64 = r"A-Za-z0-9+/"

# Line anchors: every key name the assignment rule takes holds one of these; so does every prose phrase.
_ASSIGN_WORDS = ("pass", "pwd", "secret", "token", "credential", "apikey", "api_key", "api-key", "authkey", "auth_key",
                 "auth-key", "accesskey", "access_key", "access-key", "privatekey", "private_key", "private-key")
_PROSE_WORDS = ("pass", "pwd", "pw", "secret", "token", "api key", "pin code", "pincode")
_AKIA = ("a3t", "abia", "acca", "akia", "asia", "agpa", "aida", "aroa", "aipa", "anpa", "anva", "apka")


@dataclass(frozen=True)
class _Rule:
    """How a rule is kept from scanning text it cannot match: a regex scan costs ~0.1 us per
    character and rule, a substring test almost nothing, and every note is scanned on indexing.

    ``anchors``: lowercase literals one of which must be present (``None`` = no such test).
    ``min_token``: the rule needs a run of that many non-space characters somewhere.
    ``scope``: ``words`` = the value is one long word: the rule first runs over the note's long words
    only (most notes have few) and over the whole text only when that finds something; ``lines`` =
    only the lines holding an anchor; ``at`` = the match starts at an anchor (tried there only);
    ``text`` = the whole text."""

    kind: str
    source: tuple[str, int]  # (pattern, flags): compiled on the rule's first use, see ``pattern``
    anchors: tuple[str, ...] | None = None
    scope: str = "words"
    min_token: int = 15
    random: bool = False  # the value must look random (a bare key has no other sign of being one)

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        # Most text holds no rule's anchor, so most rules never run: compiling all ~30 up front cost
        # every write 8-12 ms (issue 11); a rule is compiled the first time its anchors let it run.
        return re.compile(*self.source)


def _src(pattern: str, flags: int = 0) -> tuple[str, int]:
    return pattern, flags


@functools.cache
def _rules() -> list[_Rule]:
    """Built on first use, not at import, and each pattern compiled only when a text first gets past
    its anchors: ~30 patterns cost 10-20 ms to compile, and a write's few short fields need one or two.

    A pattern with a group named "v" redacts only that group (the key name stays). Ordered from most
    to least specific; a later finding overlapping an earlier one is dropped."""
    return [
        _Rule("private key", _src(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
            r"|PuTTY-User-Key-File-\d[\s\S]*?Private-MAC: [0-9a-f]+"), ("-----begin", "putty-user-key"), scope="text", min_token=0),
        # The body of a key pasted without its BEGIN line: lines of base64 (checked for randomness below).
        _Rule("private key", _src(
            rf"(?m)(?:^[ \t]*[{_B64}]{{40,}}={{0,2}}[ \t]*(?:\r?\n|\Z)){{2,}}(?:[ \t]*-----END [A-Z0-9 ]*-----)?"), min_token=40),
        _Rule("private key", _src(
            r"(?m)(?:^[ \t]*[A-Za-z0-9+/=]{16,}[ \t]*\r?\n)+[ \t]*-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"),
            ("-----end",), scope="text"),
        _Rule("AWS access key", _src(
            r"(?<![A-Za-z0-9])(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[0-9A-Z]{16}(?![A-Za-z0-9])"), _AKIA),
        _Rule("AWS secret access key", _src(
            rf"(?i)aws.{{0,20}}?(?:secret|key|pwd|pw|password|pass|token).{{0,20}}?(?<![{_B64}])(?P<v>[{_B64}]{{40}})(?![{_B64}=])"),
            ("aws",), scope="lines", min_token=40),
        _Rule("GitHub token", _src(r"\b(?:gh[pousr]_[A-Za-z0-9_]{30,}|github_pat_[A-Za-z0-9_]{40,})\b"),
              ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
        _Rule("GitLab token", _src(
            r"\b(?:(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas)-[A-Za-z0-9_-]{20,}|GR1348941[A-Za-z0-9_-]{20,})"),
            ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-", "gr1348941")),
        _Rule("Anthropic API key", _src(r"\bsk-ant-[A-Za-z0-9_-]{20,}"), ("sk-ant-",)),
        _Rule("OpenAI API key", _src(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"), ("sk-",)),
        _Rule("Slack webhook", _src(r"https://hooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{12,}"),
              ("hooks.slack",)),
        _Rule("Slack token", _src(r"\b(?:xox[abposre]-|xapp-)[A-Za-z0-9-]{10,}"), ("xox", "xapp-")),
        _Rule("Stripe key", _src(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|\bwhsec_[A-Za-z0-9]{24,}"), ("sk_", "rk_", "whsec_")),
        _Rule("Google API key", _src(r"\bAIza[0-9A-Za-z_-]{35}"), ("aiza",)),
        _Rule("Google OAuth token", _src(r"\bya29\.[0-9A-Za-z_-]{20,}"), ("ya29.",)),
        _Rule("Azure storage key", _src(r"(?i)\b(?:AccountKey|SharedAccessKey)=(?P<v>[A-Za-z0-9+/=]{40,})"),
              ("accountkey=", "sharedaccesskey=")),
        _Rule("Azure client secret", _src(
            r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])"), ("q~",)),
        _Rule("Azure SAS signature", _src(r"[?&]sig=(?P<v>[A-Za-z0-9%+/=]{30,})"), ("sig=",)),
        _Rule("npm token", _src(r"\bnpm_[A-Za-z0-9]{36}\b"), ("npm_",)),
        _Rule("PyPI token", _src(r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"), ("pypi-",)),
        _Rule("Hugging Face token", _src(r"\bhf_[A-Za-z]{34}\b"), ("hf_",)),
        _Rule("SendGrid key", _src(r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b"), ("sg.",)),
        _Rule("Twilio key", _src(r"\bSK[0-9a-f]{32}\b"), min_token=34),
        _Rule("Mailchimp key", _src(r"\b[0-9a-f]{32}-us\d{1,2}\b"), ("-us",)),
        _Rule("Telegram bot token", _src(r"\b\d{8,10}:AA[0-9A-Za-z_-]{33}\b"), (":aa",)),
        _Rule("DigitalOcean token", _src(r"\bdo[por]_v1_[a-f0-9]{64}\b"), ("_v1_",)),
        _Rule("JSON web token", _src(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), ("eyj",)),
        # user:password@host; the user may be empty (redis://:pw@host) and the password may hold '/'.
        _Rule("connection string password", _src(
            r"\b[a-z][a-z0-9+.-]*://[^\s:@/]*:(?P<v>[^\s@]+?)@[A-Za-z0-9\[_-]", re.I), ("://",), scope="lines", min_token=0),
        # HTTP Basic, or a container registry's "auth" (docker config.json): base64 of user:password,
        # of any length (checked by decoding below); the bearer rule takes only long ones.
        _Rule("basic auth credential", _src(
            r"""(?:\b[Bb]asic\s+|["']auth["']\s*:\s*["'])(?P<v>[A-Za-z0-9+/]{6,}={0,2})(?![A-Za-z0-9+/=])"""),
            ("basic", '"auth"', "'auth'"), scope="lines", min_token=0),
        _Rule("bearer token", _src(r"\b(?:[Bb]earer|Basic)\s+(?P<v>[A-Za-z0-9._~+/-]{20,}=*)"), ("bearer", "basic"), scope="lines", min_token=20),
        # A Google service-account key file's key id: the id _NOT_SECRET_KEY lets other "_id" names keep.
        _Rule("service-account private_key_id", _src(r"""(?i)["']?private_key_id["']?\s*[:=]\s*["']?(?P<v>[0-9a-f]{40})\b"""),
              ("private_key_id",), scope="at", min_token=0),
        _Rule(ASSIGNMENT, _src(
            rf"""(?x)(?P<k>{_KEY_NAME})["'\]]{{0,2}}\s*(?::=|=>|[:=])\s*["'`]?(?P<v>[^\s"'`,;]{{4,}})""", re.I),
            _ASSIGN_WORDS, scope="at", min_token=0),
        # "the prod db password is hunter2-Xy9!kLm", "admin pw: ..." in prose: the words up to "is" or
        # ":" on one line (a title's "secret" must not take the next line's key as its value).
        _Rule("password in text", _src(
            r"(?i)\b(?:password|passwd|passphrase|pass ?code|pwd|pw|pin ?code|secret|token|api key)(?:[^\S\n]+(?!is\b|was\b)[\w@/-]+){0,5}?"
            r"[^\S\n]*(?:\bis|\bwas|\bare|=|:)\s+"
            r"(?:now\s+|still\s+|set to\s+)?(?P<q>[\"'`]?)(?P<v>[^\s\"'`]{4,})"), _PROSE_WORDS, scope="at", min_token=0),
        # An AWS secret access key without a label: 40 characters of base64, random (checked below).
        _Rule("AWS secret access key", _src(rf"(?<![{_B64}=-])(?P<v>[{_B64}]{{40}})(?![{_B64}=])"), min_token=40,
              random=True),
    ]

# Module-level patterns stay strings (re caches them on first use): compiling at import would cost
# the prompt hook several milliseconds for nothing.
_PLACEHOLDER = (
    r"^(?:<[^>]*>?|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\{\{.*\}\}|%\(?[A-Za-z_]+\)?s?|x{3,}|\*{3,}|\.{3,}|changeme|example\w*|"
    r"your[_-].*|redacted\]?|\[redacted.*|none|null|nil|true|false|env|environment|required|optional|string|str|"
    r"secret|password|token|undefined|placeholder|dummy|test|sample|[\w.]+\(.*|os\.environ.*|process\.env.*|"
    # documentation's stand-ins (user:pass@host, abc:xyz@, 'abcdefg') and type names (token: CARD32)
    r"pass|passwd|pwd|pw|xyz|foo|bar|baz|qux|abc(?:d(?:e(?:f(?:g(?:h(?:i(?:j)?)?)?)?)?)?)?|"
    r"(?:u?int|float|card|sha|md|aes|utf|crc|word|char)(?:8|16|32|64|128|256|512)|"
    # an index into code, not a value: `args[token.index]`
    r"[A-Za-z_][\w.]*\[.*|"
    # code, not a value: page_token=page_token, token=self.token, secret=(...), key={...}
    r"(?-i:[a-z_]+(?:[_.][a-z_]+)+)\)*|[(\[{$%@<].*)$")
# Names that say the value is about a secret, not the secret: secret_name, token_url, password_file.
_NOT_SECRET_KEY = (
    r"(?i)[_.-](?:name|id|ids|file|path|ref|arn|length|len|type|version|count|env|url|uri|dir|endpoint|expiry|expires|ttl|policy|"
    r"rotation|hint|prompt|field|label)$")
# A value that starts like this is a path or an address, not a secret.
_PATHS = ("/", "~", "./", "../", "http://", "https://")
# Zero-width spaces and joiners, soft hyphens, direction marks, BOMs: invisible, and ignored by matching.
_INVISIBLE = frozenset("\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2061\u2062"
                       "\u2063\u2064\u2066\u2067\u2068\u2069\ufeff")


@dataclass(frozen=True)
class Finding:
    kind: str
    start: int
    end: int


def _entropy(s: str) -> float:
    c = Counter(s)
    n = len(s)
    return -sum(v / n * math.log2(v / n) for v in c.values())


def _classes(s: str) -> int:
    return sum((any(ch.islower() for ch in s), any(ch.isupper() for ch in s), any(ch.isdigit() for ch in s),
                any(not ch.isalnum() for ch in s)))


def _random_b64(s: str) -> bool:
    """Key material, not a word, a path or a hex digest (git shas are 40 hex characters)."""
    return _classes(s.replace("/", "").replace("+", "")) >= 3 and _entropy(s) >= 4.5


def _keep(rule: _Rule, m: re.Match[str]) -> bool:
    kind = rule.kind
    v = m.group("v") if "v" in m.re.groupindex else m.group(0)
    if v.startswith("[redacted"):
        return False
    if kind == "private key" and not m.group(0).lstrip().startswith("-----BEGIN") and "PuTTY" not in m.group(0)[:6]:
        body = re.sub(r"\s+|-----END[^\n]*-----", "", m.group(0))
        return "-----END" in m.group(0) or _entropy(body) >= 5.0
    if rule.random:
        return _random_b64(v)
    if kind == "basic auth credential":
        user, colon, password = (_b64_text(v) or "").partition(":")
        return bool(colon) and len(password) > 2 and not re.match(_PLACEHOLDER, password, re.I)
    if kind == "connection string password":
        # https://host:8080/path@x is a port and a path, not a password.
        # https://a:b@host (a one- or two-letter stand-in) proves nothing either.
        return (len(v) > 2 and not re.match(r"\d+(?:/|$)", v) and not re.match(_PLACEHOLDER, v, re.I)
                and v not in ("[redacted", "****"))
    if kind == ASSIGNMENT:
        v = v.rstrip(".)]}")
        if re.search(_NOT_SECRET_KEY, m.group("k")) or v.startswith(_PATHS):
            return False
        # Names of keys ("api_key: see 1Password"), placeholders, numbers and words are fine.
        if re.match(_PLACEHOLDER, v, re.I) or v.isdigit() or len(v) < 6 and _classes(v) < 3:
            return False
        if v.isalpha() and (v.islower() or v.istitle()) and len(v) < 12:  # a word ("pwd.struct_passwd: Results")
            return False
        return not (len(v) < 12 and _entropy(v) < 2.5)
    if kind == "password in text":
        v = v.rstrip(".,;:!?)]}")
        if re.match(_PLACEHOLDER, v, re.I) or len(v) < 4 or v.startswith(_PATHS):  # PWD: '/Users/me'
            return False
        # Prose goes on with words ("the password is stored in 1Password"): a value is quoted, or
        # mixes letters with digits or symbols.
        return bool(m.group("q")) or _classes(v) >= 2 and not v.isalpha()
    return True


def _anchor_positions(low: str, words: tuple[str, ...]) -> list[int]:
    at: set[int] = set()
    for w in words:
        i = low.find(w)
        while i != -1:
            at.add(i)
            i = low.find(w, i + 1)
    return sorted(at)


def _line_spans(low: str, words: tuple[str, ...]) -> list[tuple[int, int]]:
    spans: set[tuple[int, int]] = set()
    for w in words:
        i = low.find(w)
        while i != -1:
            start = low.rfind("\n", 0, i) + 1
            end = low.find("\n", i)
            end = len(low) if end == -1 else end
            spans.add((start, end))
            i = low.find(w, end)
    return sorted(spans)


def _matches(rule: _Rule, text: str, low: str, longest: int, longs: str, longs_low: str) -> Iterable[re.Match[str]]:
    if rule.min_token > longest:
        return ()
    if rule.scope == "words":
        if rule.anchors is not None and not any(a in longs_low for a in rule.anchors):
            return ()
        if rule.pattern.search(longs) is None:
            return ()
        return rule.pattern.finditer(text)
    if rule.anchors is not None and not any(a in low for a in rule.anchors):
        return ()
    if rule.scope == "lines" and rule.anchors and len(low) == len(text):  # lower() may lengthen a few letters (İ)
        return (m for s, e in _line_spans(low, rule.anchors) for m in rule.pattern.finditer(text, s, e))
    if rule.scope == "at" and rule.anchors and len(low) == len(text):
        return (m for i in _anchor_positions(low, rule.anchors) if (m := rule.pattern.match(text, i)) is not None)
    return rule.pattern.finditer(text)


_B64_MIN = 24  # the shortest base64 word worth decoding: 18 bytes, shorter than any token a rule takes
# Mixed case: base64 of text always is, and hex digests (content_hash, git shas) are not.
_B64_WORD = (r"(?<![A-Za-z0-9+/_-])(?=[A-Za-z0-9+/_-]*[A-Z])(?=[A-Za-z0-9+/_-]*[a-z])[A-Za-z0-9+/_-]{24,}={0,2}"
             r"(?![A-Za-z0-9+/_=-])")


def _b64_text(word: str) -> str | None:
    """The text a base64 word (standard or URL-safe, padding optional) decodes to, or None when it is
    not base64 of printable UTF-8 text."""
    import base64
    import binascii

    try:
        raw = base64.b64decode(word + "=" * (-len(word) % 4), altchars=b"-_" if "-" in word or "_" in word else None,
                               validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if not decoded.isprintable() and not all(ch.isprintable() or ch in "\n\r\t" for ch in decoded):
        return None
    return decoded


_WRAP_DEPTH = 2  # base64 in base64: a Kubernetes .dockerconfigjson wraps JSON whose "auth" is base64


def _wrapped(text: str, depth: int) -> list[Finding]:
    """Base64 words that decode to text holding a secret (a token wrapped for a header or a config
    value): reported as the secret they wrap. Only printable text is looked into, at most 4 KB."""
    out = []
    for m in re.finditer(_B64_WORD, text):
        word = m.group()
        if len(word) > 5464:  # decodes to over 4 KB: an image or a file, not a wrapped token
            continue
        decoded = _b64_text(word)
        if decoded is None:
            continue
        found = _find(decoded, depth=depth + 1)
        if found:
            kind = found[0].kind
            out.append(Finding(kind if kind.startswith("base64-encoded") else f"base64-encoded {kind}", m.start(), m.end()))
    return out


@functools.cache
def _word_anchors() -> re.Pattern[str]:
    """Any anchor of a "words" rule (found in a text exactly when one such rule's anchor test passes)."""
    return re.compile("|".join(sorted({re.escape(a) for r in _rules() if r.scope == "words" and r.anchors for a in r.anchors})))


@functools.cache
def _unanchored_or_text_rules() -> list[_Rule]:
    """The rules left when the long words hold no "words" rule's anchor (in their order)."""
    return [r for r in _rules() if r.scope != "words" or r.anchors is None]


def _find(text: str, depth: int = 0) -> list[Finding]:
    out: list[Finding] = []
    low = text.lower()
    words = [w for w in text.split() if len(w) >= 15]  # the shortest value a "words" rule takes (xoxb-...)
    longest = max(map(len, words), default=0)
    longs = "\n".join(words)  # what every "words" rule looks at first
    longs_low = longs.lower()
    # Most notes' long words (hashes, ids, paths) hold no "words" rule's anchor: one search says so for
    # all of them, instead of each rule testing its own anchors.
    rules = _rules() if _word_anchors().search(longs_low) else _unanchored_or_text_rules()
    for rule in rules:
        kind = rule.kind
        for m in _matches(rule, text, low, longest, longs, longs_low):
            if not _keep(rule, m):
                continue
            if "v" in m.re.groupindex:
                end = m.end("v")
                if kind in (ASSIGNMENT, "password in text"):
                    end = m.start("v") + len(m.group("v").rstrip(".,;:!?)]}"))
                out.append(Finding(kind, m.start("v"), end))
            else:
                out.append(Finding(kind, m.start(), m.end()))
    if depth < _WRAP_DEPTH and longest >= _B64_MIN and re.search(_B64_WORD, longs):
        out += _wrapped(text, depth)
    out.sort(key=lambda f: (f.start, -f.end))
    kept: list[Finding] = []
    for f in out:
        if kept and f.start < kept[-1].end:
            continue  # inside an earlier finding (a key inside a connection string)
        kept.append(f)
    return kept


@functools.cache
def _invisible() -> re.Pattern[str]:
    return re.compile("[" + "".join(sorted(_INVISIBLE)) + "]")


def find_secrets(text: str) -> list[Finding]:
    """Secrets in ``text`` (positions in ``text`` itself). Invisible characters (zero-width spaces,
    soft hyphens, direction marks) are ignored while matching, so ``AKIA<ZWSP>...`` is still a key."""
    if not text:
        return []
    # Every invisible character is outside ASCII; otherwise one search, not a scan per character.
    if text.isascii() or _invisible().search(text) is None:
        return _find(text)
    keep = [i for i, ch in enumerate(text) if ch not in _INVISIBLE]
    clean = "".join(text[i] for i in keep)
    return [Finding(f.kind, keep[f.start], keep[f.end - 1] + 1) for f in _find(clean) if f.end > f.start]


def secret_kinds(text: str) -> list[str]:
    seen: list[str] = []
    for f in find_secrets(text):
        if f.kind not in seen:
            seen.append(f.kind)
    return seen


def _replace(text: str, findings: list[Finding]) -> str:
    parts: list[str] = []
    pos = 0
    for f in findings:
        parts.append(text[pos:f.start])
        parts.append(f"[redacted {f.kind}]")
        pos = f.end
    parts.append(text[pos:])
    return "".join(parts)


_PRIVATE = r"(?i)<private>[\s\S]*?(?:</private>|\Z)"


def redact(text: str) -> tuple[str, int]:
    """Remove <private> spans and secrets; returns (text, number of redactions)."""
    n = 0

    def _priv(_m: re.Match[str]) -> str:
        nonlocal n
        n += 1
        return "[private]"

    text = re.sub(_PRIVATE, _priv, text)
    findings = find_secrets(text)
    return (_replace(text, findings), n + len(findings)) if findings else (text, n)


# -- Operations/Secure/ status notes: key names only -------------------------------------------
SECURE_PREFIX = "Operations/Secure/"
# Any "NAME: value" / "NAME=value" line: in a Secure note every value that is one token is redacted,
# whatever it looks like (prose after the name, "rotated 2026-10, in 1Password", stays).
_SECURE_VALUE = (
    r"(?m)^(?P<pre>[ \t>*+-]*(?:export\s+)?`?[A-Za-z_][A-Za-z0-9_.-]*`?\**[ \t]*(?::=|=|:)[ \t]*[\"'`]?)(?P<v>[^\s\"'`|]{6,})[\"'`]?[ \t]*$")


def scrub(text: str, *, path: str = "") -> str:
    """``text`` with every detected secret replaced by ``[redacted <kind>]`` (the same object when
    there is none: the common case costs one scan). Under ``Operations/Secure/`` the value of every
    ``NAME: value`` line goes too: those notes name keys, never their values."""
    return scrub_report(text, path=path)[0]


def scrub_report(text: str, *, path: str = "") -> tuple[str, list[tuple[int, str]]]:
    """(:func:`scrub` of ``text``, (1-based line, kind) of each secret found): one scan for both."""
    findings = find_secrets(text)
    lines = [(text.count("\n", 0, f.start) + 1, f.kind) for f in findings]
    if findings:
        text = _replace(text, findings)
    if path.startswith(SECURE_PREFIX):
        # The body only: frontmatter values (title, dates) are not secrets and must still parse.
        at = text.find("\n---", 3) + 4 if text.startswith("---") else 0
        body = re.sub(_SECURE_VALUE, _secure_value, text[at:])
        if body != text[at:]:
            text = text[:at] + body
    return text, lines


def _secure_value(m: re.Match[str]) -> str:
    v = m.group("v")
    if v.startswith("[redacted"):
        return m.group(0)
    return m.group(0)[:m.start("v") - m.start()] + "[redacted value]" + m.group(0)[m.end("v") - m.start():]


def scrub_bytes(data: bytes, *, path: str = "") -> bytes:
    """A note's bytes with secrets redacted, in the note's own encoding; the same object when there is
    nothing to redact. Read as ``notes.parse_bytes`` reads a note: UTF-8, else CP-1252, else Latin-1
    (an older editor's note is indexed, so its stored copy must be scrubbed too)."""
    for encoding in ("utf-8", "cp1252", "latin-1"):
        try:
            text = data.decode(encoding)
            break
        except UnicodeDecodeError:
            continue
    out = scrub(text, path=path)
    # Every character came from this encoding and the markers are ASCII: it encodes back.
    return data if out is text or out == text else out.encode(encoding)


def check_secrets(**fields: Any) -> None:
    """Refuse a secret in any caller-supplied field (strings, or lists of them), naming the field and
    the kind of secret, never the value. Every write path (memory, operational events, usage records)
    calls this one check on all its fields."""
    from ..errors import SecretDetected

    found = fields_with_secrets((name.replace("_", "-"), v) for name, v in fields.items() if v is not None)
    if found:
        what = "; ".join(f"--{name} ({', '.join(kinds)})" for name, kinds in found)
        raise SecretDetected(
            f"a secret was found in {what}; nothing was stored",
            hint="store where the secret lives, like 'in 1Password: Deploy key', never its value",
        )


def fields_with_secrets(fields: Iterable[tuple[str, object]]) -> list[tuple[str, list[str]]]:
    """(field name, kinds) for each caller-supplied field holding a secret; lists are checked item by item."""
    out: list[tuple[str, list[str]]] = []
    for name, value in fields:
        items = value if isinstance(value, list | tuple | set) else [value]
        kinds: list[str] = []
        for item in items:
            if isinstance(item, str):
                kinds += [k for k in secret_kinds(item) if k not in kinds]
        if kinds:
            out.append((name, kinds))
    return out
