"""Synthetic vaults for the scale, freshness and resources benchmarks: fast, deterministic (seeded).

``generate(root, notes, queries=200, seed=...)`` writes a hive-brain vault of ``notes`` Markdown
files straight to disk (no engine calls, no index) and returns the questions with their answers:

* **typed memories** (~91%): frontmatter in the order ``hive_brain.store.notes.render`` writes it (id,
  type, title, memory_key, layer, agent, project, tags, confidence, status, origin, created, updated,
  content_hash); 20-400 words (log-normal, median ~70). About 70% sit in the shared layer
  (``Memory/Distillations/Agent Memory/``), the rest in the private layers of three agents
  (``Agents/<agent>/Memory/``). Almost every memory states one fact about one *entity* (a made-up
  service name such as "Korvane"): its port, owner, datastore, deploy day, test command, build
  quirk, review preference, outage lesson, timeout, alert channel, language or rate limit. Each
  entity has about ten such memories, so the entity name alone does not find the answer: the
  question's other words have to pick the right one among its siblings.
* **long notes** (0.5%, at least 2): 2,000-5,000 words under ``Projects/<project>/`` with ``##``
  headings, mentioning the project's entities in passing (never their facts).
* **conversations** (3%): ``Memory/Conversations/<agent>/`` notes in the format the stop hook
  writes (``## Turn n``, ``**User:**`` / ``**Assistant:**``), talking about entities too.
* **ordinary notes** (5%): ``Ideas/``, ``Synthesis/``, ``Projects/<project>/``.

**Questions** (``queries`` of them) ask for one fact each, as the agent ``QUERY_AGENT`` (so the
answer is in the shared layer or in that agent's private layer), and are *paraphrased*: written from
a different template than the memory, with synonyms for the aspect words ("which TCP port is the
pre-production Korvane bound to?" for "The staging instance of Korvane listens on port 8443"). The
fixture reports how many of a question's content words occur in its answer note
(``stats.overlap``), to show recall@k measures retrieval, not string matching. Every question has
exactly one gold note: no other note states that (entity, aspect) fact.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_SEED = 20240611
QUERY_AGENT = "claude-code"
AGENTS = ("claude-code", "codex", "cursor")
MEMORY_DIR = "Memory/Distillations/Agent Memory"
CONVERSATIONS_DIR = "Memory/Conversations"
PROJECTS = ("Atlas", "Beacon", "Cobalt", "Drift", "Ember", "Fjord", "Granite", "Harbor")

# --------------------------------------------------------------------------- vocabulary

PEOPLE = ("Ana", "Bruno", "Chen", "Dana", "Elif", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kemal", "Lena",
          "Mateo", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Viktor", "Wen", "Yusuf")
ENVS = {  # memory wording -> question wording
    "staging": ("pre-production", "stage"),
    "production": ("prod", "live"),
    "development": ("dev", "local"),
    "canary": ("early-rollout", "canary"),
}
DATABASES = ("PostgreSQL", "MySQL", "SQLite", "Cassandra", "DynamoDB", "Redis", "MongoDB", "ClickHouse")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
OSES = {"macOS": ("a Mac", "macOS"), "Windows": ("Windows", "a Windows laptop"),
        "Alpine": ("Alpine", "musl-based Alpine"), "ARM64": ("ARM64", "Apple silicon and Graviton")}
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
LANGS = (("Go", "1.22"), ("Rust", "1.79"), ("Python", "3.12"), ("Kotlin", "2.0"), ("TypeScript", "5.4"),
         ("Java", "21"), ("Elixir", "1.16"), ("C#", "12"))
CHANNELS = ("ops-alerts", "oncall-core", "pager-storage", "sre-noise", "payments-alerts", "infra-warn")
REVIEW_STYLES = ("small stacked pull requests", "one reviewer plus a checklist", "pairing instead of async review",
                 "squash merges with a written design note", "tests in the same commit as the change")
REASONS = ("the team already runs it", "it survived the load test", "backups are simpler",
           "the query patterns are mostly key lookups", "it keeps operations cheap")
LESSONS = (  # (as the memory says it, as the second memory template says it)
    ("always set a budget on retries", "cap retries with a budget"),
    ("keep the connection pool below the database limit", "size the connection pool under the database limit"),
    ("roll out config changes to one region first", "ship config changes region by region"),
    ("never deploy on a day with a migration", "keep deploys and migrations on different days"),
    ("alert on queue age, not queue length", "page on how old the queue is rather than how long"),
)
FLAGS = ("CGO_ENABLED=0", "--no-default-features", "OPENSSL_DIR", "LIBRARY_PATH", "-Xmx2g")
DEPS = ("a local Kafka", "the fake S3 container", "a throwaway Postgres", "the mock payments server")
TEST_CMDS = ("make test-all", "just check", "tox -e integration", "cargo nextest run", "npm run test:ci",
             "gradle check", "mix test --cover")

# Filler: realistic engineering prose around the facts (slots are filled from the lists below).
FILLER = (
    "The {noun} for {project} was {verb} last {period} after a long discussion.",
    "We {verb} the {noun} so that {other} stops {gerund} during peak hours.",
    "{person} noted that the {adj} {noun} still needs a clearer owner.",
    "This came up again while {gerund} the {noun} of {other}.",
    "See the {project} notes for the history of the {noun}.",
    "The {adj} {noun} is documented in the runbook, but the runbook is {adj2}.",
    "Most of the {noun} work happens in the {project} repository.",
    "If the {noun} looks {adj}, check the dashboards before {gerund} anything.",
    "{person} and {person2} agreed to revisit the {noun} next {period}.",
    "Nobody remembers why the {noun} of {other} was {verb} in the first place.",
    "A {adj} {noun} usually means someone skipped the checklist.",
    "The migration plan for {project} keeps the {noun} unchanged until the {period} ends.",
    "Metrics for the {noun} are exported every minute and kept for a {period}.",
    "There is a ticket about {gerund} the {noun}, still open.",
    "{other} depends on this, so coordinate with its owners before {gerund} it.",
    "The {noun} is {adj} on purpose; changing it broke {other} once.",
    "Keep the {noun} small: reviews of large ones take a {period}.",
    "The {adj} part of the {noun} lives behind a feature flag.",
)
NOUNS = ("cache layer", "retry policy", "schema", "feature flag", "dashboard", "runbook", "queue", "worker pool",
         "API gateway", "config file", "cron job", "index", "release branch", "build pipeline", "secret rotation",
         "load balancer", "service mesh", "log format", "SDK", "connection pool", "health check", "backfill script",
         "sharding key", "error budget", "canary analysis", "access policy", "data model", "batch export",
         "webhook", "search index", "billing report", "audit trail", "session store", "rate card", "linter setup")
VERBS = ("rewritten", "split", "simplified", "moved", "renamed", "rolled back", "audited", "documented",
         "benchmarked", "deprecated", "upgraded", "migrated")
GERUNDS = ("retrying", "timing out", "paging people", "dropping events", "scaling", "restarting", "migrating",
           "refactoring", "backfilling", "caching", "logging too much", "rebuilding")
ADJS = ("flaky", "legacy", "critical", "undocumented", "slow", "shared", "experimental", "noisy", "fragile",
        "temporary", "expensive", "stable")
PERIODS = ("week", "sprint", "quarter", "month", "release cycle")

# Conversation turns (the user asks, the assistant answers) about an entity, without its facts.
USER_TURNS = (
    "Can you look at why the {noun} of {e} is {adj} again?",
    "Please refactor the {noun} in {e}; keep the public API.",
    "What changed in {e} since the last {period}?",
    "Write a test for the {noun} bug we saw in {e}.",
    "Summarise the open issues about the {noun} of {e}.",
)
ASSISTANT_TURNS = (
    "I read the {noun} code in {e}. The {adj} part is the loop that {verb2} the {noun2}; I changed it and the "
    "tests pass.",
    "The {noun} of {e} was {verb} in the last {period}. I kept the old behaviour behind a flag.",
    "Done. The {noun} now logs one line per {noun2}, and {e} no longer {verb2} on startup.",
    "I could not reproduce it locally; {e} seems {adj} only under load. I added a metric for the {noun}.",
)
VERBS2 = ("retries", "rebuilds", "caches", "drops", "re-reads", "locks")

# --------------------------------------------------------------------------- facts and their questions


@dataclass(frozen=True)
class Aspect:
    key: str
    type: str  # memory type
    title: str  # memory title template
    memory: tuple[str, ...]  # sentence stating the fact (one template chosen per memory)
    questions: tuple[str, ...]  # paraphrased questions (different words for the aspect)
    tags: tuple[str, ...]


ASPECTS: tuple[Aspect, ...] = (
    Aspect("port", "fact", "{e} {env} port",
           ("The {env} instance of {e} listens on port {port}.",
            "{e} binds to port {port} in {env}; the load balancer forwards 443 to it."),
           ("Which TCP port is the {env_q} {e} bound to?", "What port number does {e} use in {env_q}?",
            "On {env_q}, where does {e} accept connections?"), ("networking",)),
    Aspect("owner", "person", "{e} owner",
           ("{person} owns {e} and is the first contact for incidents.",
            "Ownership: {e} belongs to {person}; page them first when it misbehaves."),
           ("Who is responsible for {e} when something breaks?", "Whom should I page about {e} outages?",
            "Who maintains {e}?"), ("ownership",)),
    Aspect("datastore", "decision", "{e} datastore",
           ("Decision: {e} keeps its data in {db}, not {db2}, because {reason}.",
            "We chose {db} over {db2} as the database of {e}; {reason}."),
           ("What storage engine did we pick for {e}?", "Where does {e} persist its records?",
            "Which DB sits behind {e}?"), ("storage",)),
    Aspect("deploy", "procedure", "{e} deploy day",
           ("Deploys of {e} go out on {day}; cut the branch before 10:00 and ask {person} to approve.",
            "{e} is deployed every {day} after the smoke tests pass."),
           ("What day of the week do we ship {e} to production?", "When do {e} rollouts happen?",
            "On which weekday is {e} released?"), ("release",)),
    Aspect("tests", "procedure", "{e} test command",
           ("Run the {e} test suite with `{cmd}`; the integration tests need {dep} running.",
            "To test {e}: `{cmd}` (needs {dep})."),
           ("How do I execute the checks for {e} locally?", "Which command runs {e}'s unit and integration checks?",
            "What do I type to verify {e} before pushing?"), ("testing",)),
    Aspect("quirk", "quirk", "{e} build on {os}",
           ("Building {e} on {os} fails unless {flag} is set.",
            "Quirk: compiles of {e} break on {os}; set {flag} first."),
           ("Why does compiling {e} fail on {os_q}?", "What do I need to build {e} on {os_q}?",
            "{e} won't compile on {os_q}, what's the fix?"), ("build",)),
    Aspect("review", "preference", "{person} review preference for {e}",
           ("{person} prefers {style} for changes to {e}.",
            "For {e}, {person} wants {style} in code review."),
           ("How does {person} like pull requests on {e} to look?", "What review style does {person} expect for {e}?",
            "Any tips before asking {person} to look at an {e} PR?"), ("review",)),
    Aspect("lesson", "lesson", "{e} {month} outage lesson",
           ("Lesson from the {month} outage of {e}: {lesson}.",
            "After {e} went down in {month} we learned to {lesson2}."),
           ("What did we learn from the {e} incident in {month}?", "What was the takeaway when {e} broke in {month}?",
            "Postmortem of the {month} {e} downtime: what changed?"), ("incident",)),
    Aspect("timeout", "fact", "{e} request timeout",
           ("Requests to {e} time out after {n} seconds; batch jobs raise {setting}.",
            "{e} gives up on a call after {n} seconds (setting: {setting})."),
           ("How long before a call to {e} is abandoned?", "What's the deadline on {e} requests?",
            "After how many seconds does {e} stop waiting?"), ("latency",)),
    Aspect("alerts", "instruction", "{e} alert channel",
           ("Alerts for {e} are posted to #{channel}; never mute them during a release.",
            "Send {e} alerts to #{channel} and keep them unmuted."),
           ("Where do {e} notifications show up?", "Which Slack room receives {e} alarms?",
            "Where should I watch for {e} paging?"), ("alerting",)),
    Aspect("language", "fact", "{e} language and runtime",
           ("{e} is written in {lang} {ver} and pinned to that runtime.",
            "The {e} codebase uses {lang} ({ver})."),
           ("What programming language is {e} implemented in?", "Which toolchain version does {e} need?",
            "In what language was {e} built?"), ("stack",)),
    Aspect("ratelimit", "fact", "{e} rate limit",
           ("{e} allows at most {n} requests per minute per client; excess calls get HTTP 429.",
            "Rate limit on {e}: {n} requests a minute per client, then 429."),
           ("How many calls per minute can one client make to {e}?", "What's the throttling threshold of {e}?",
            "When does {e} start rejecting a busy caller?"), ("limits",)),
)
GENERIC_TITLES = ("{adj} {noun} notes", "working agreement on the {noun}", "{noun} checklist")

_WORD_RE = re.compile(r"[a-z0-9]+")
_STOP = frozenset(["a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "has", "have", "how", "i", "in", "is", "it", "its", "of", "on", "or", "should", "the", "to", "was", "we", "what", "when", "where", "which", "who", "whom", "why", "with", "won", "t", "s", "any", "my", "our", "us", "me", "after", "before"])
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def content_terms(text: str) -> list[str]:
    """Lowercased words minus a small stop list (for the overlap statistic only)."""
    return [w for w in _WORD_RE.findall(text.lower()) if w not in _STOP and len(w) > 1]


# --------------------------------------------------------------------------- helpers


def entity_names(n: int, rng: random.Random) -> list[str]:
    """``n`` distinct pronounceable made-up names ("Korvane", "Zelmith"), none an English word."""
    onsets = ["b", "c", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gr", "kr", "pl", "st", "tr", "zh"]
    vowels = ["a", "e", "i", "o", "u", "ae", "ai"]
    codas = ["", "", "n", "r", "th", "x", "l", "sk"]
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < n:
        k = 2 if len(names) < n // 2 else 3
        name = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(k)) + rng.choice(codas)
        if name not in seen and len(name) >= 5:
            seen.add(name)
            names.append(name.capitalize())
    return names


def _ulid(rng: random.Random) -> str:
    return "".join(rng.choice(_CROCKFORD) for _ in range(26))


def _slug(title: str, max_len: int = 60) -> str:
    t = re.sub(r"[^\w\s-]", " ", title.lower())
    return re.sub(r"[\s_-]+", "-", t).strip("-")[:max_len].strip("-") or "note"


def _yaml_str(s: str) -> str:
    """A YAML scalar for s: plain when safe, else double-quoted (JSON strings are valid YAML)."""
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9 ._/-]*", s) and not s.endswith((" ", ":")) and s.lower() not in (
            "yes", "no", "true", "false", "null", "on", "off"):
        return s
    return json.dumps(s, ensure_ascii=False)


def frontmatter(meta: dict[str, Any]) -> str:
    lines = ["---"]
    for k, v in meta.items():
        if v is None:
            continue
        if isinstance(v, list | tuple):
            lines.append(f"{k}:")
            lines.extend(f"- {_yaml_str(str(x))}" for x in v)
        elif isinstance(v, bool):
            lines.append(f"{k}: {'true' if v else 'false'}")
        elif isinstance(v, int | float):
            lines.append(f"{k}: {v}")
        else:
            lines.append(f"{k}: {_yaml_str(str(v))}")
    lines.append("---")
    return "\n".join(lines) + "\n\n"


def content_hash(text: str) -> str:
    """Same as ``hive_brain.store.notes.content_hash`` for the ASCII text written here."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()


def _iso(rng: random.Random) -> str:
    day = rng.randrange(0, 540)  # 2024-01-01 .. mid 2025
    y, d = (2024, day) if day < 366 else (2025, day - 366)
    month_days = [31, 29 if y == 2024 else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    m = 0
    while d >= month_days[m]:
        d -= month_days[m]
        m += 1
    return f"{y:04d}-{m + 1:02d}-{d + 1:02d}T{rng.randrange(7, 20):02d}:{rng.randrange(60):02d}:00Z"


class _Writer:
    def __init__(self, rng: random.Random, entities: Sequence[str], project_of: dict[str, str]) -> None:
        self.rng = rng
        self.entities = entities
        self.project_of = project_of

    def filler(self, project: str | None = None) -> str:
        r = self.rng
        t = r.choice(FILLER)
        p1, p2 = r.sample(PEOPLE, 2)
        return t.format(noun=r.choice(NOUNS), verb=r.choice(VERBS), gerund=r.choice(GERUNDS), adj=r.choice(ADJS),
                        adj2=r.choice(ADJS), period=r.choice(PERIODS), person=p1, person2=p2,
                        project=project or r.choice(PROJECTS), other=r.choice(self.entities))

    def sentences(self, words: int, project: str | None = None) -> list[str]:
        out, n = [], 0
        while n < words:
            s = self.filler(project)
            out.append(s)
            n += len(s.split())
        return out

    def paragraphs(self, words: int, project: str | None = None) -> str:
        sents = self.sentences(words, project)
        paras, i = [], 0
        while i < len(sents):
            k = self.rng.randint(2, 5)
            paras.append(" ".join(sents[i: i + k]))
            i += k
        return "\n\n".join(paras)


def _memory_words(rng: random.Random) -> int:
    return max(20, min(400, int(rng.lognormvariate(math.log(70), 0.75))))


def _fact_values(rng: random.Random, e: str) -> dict[str, str]:
    env = rng.choice(list(ENVS))
    os_ = rng.choice(list(OSES))
    db, db2 = rng.sample(DATABASES, 2)
    lang, ver = rng.choice(LANGS)
    lesson, lesson2 = rng.choice(LESSONS)
    return {
        "e": e, "env": env, "env_q": rng.choice(ENVS[env]), "port": str(rng.randrange(3000, 9900)),
        "person": rng.choice(PEOPLE), "db": db, "db2": db2, "reason": rng.choice(REASONS), "day": rng.choice(DAYS),
        "cmd": rng.choice(TEST_CMDS), "dep": rng.choice(DEPS), "os": os_, "os_q": rng.choice(OSES[os_]),
        "flag": rng.choice(FLAGS), "style": rng.choice(REVIEW_STYLES), "month": rng.choice(MONTHS),
        "lesson": lesson, "lesson2": lesson2,
        "n": str(rng.choice((5, 10, 15, 30, 60, 120, 300, 600, 1200))),
        "setting": f"{e.upper()}_TIMEOUT", "channel": rng.choice(CHANNELS), "lang": lang, "ver": ver,
    }


# --------------------------------------------------------------------------- the generator


def plan_counts(notes: int) -> dict[str, int]:
    """How many notes of each kind a vault of ``notes`` notes holds."""
    long_n = max(2, notes // 200)
    conv = max(2, notes * 3 // 100)
    ordinary = max(2, notes * 5 // 100)
    memories = notes - long_n - conv - ordinary
    if memories < 10:
        raise ValueError(f"a fixture needs at least ~20 notes, not {notes}")
    return {"memories": memories, "long": long_n, "conversations": conv, "ordinary": ordinary}


def generate(root: Path, notes: int, *, queries: int = 200, seed: int = DEFAULT_SEED,
             init: bool = True) -> dict[str, Any]:
    """Write a vault of ``notes`` notes under ``root``; return its questions and statistics.

    ``init`` makes ``root`` a hive-brain vault first (``hive_brain.store.vault.init_vault``: needs
    ``$HIVE_BRAIN_STATE_DIR`` pointing somewhere disposable, see ``benchmarks.common.temp_state_dir``).
    Returns ``{"notes", "counts", "questions": [{id, question, gold_docs, aspect, layer}], "stats"}``.
    """
    rng = random.Random(f"{seed}:{notes}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    if init:
        from hive_brain.config import resolve
        from hive_brain.store.vault import init_vault

        init_vault(root, resolve(vault=str(root)))
    counts = plan_counts(notes)
    n_generic = counts["memories"] // 20
    n_fact = counts["memories"] - n_generic
    n_entities = max(4, math.ceil(n_fact / 10))
    entities = entity_names(n_entities, rng)
    project_of = {e: PROJECTS[i % len(PROJECTS)] for i, e in enumerate(entities)}
    w = _Writer(rng, entities, project_of)

    # Every (entity, aspect) pair at most once: the question about it has one answer.
    pairs = [(e, a) for e in range(n_entities) for a in range(len(ASPECTS))]
    rng.shuffle(pairs)
    pairs = pairs[:n_fact]
    written: list[tuple[str, str]] = []  # (relative path, text)
    candidates: list[dict[str, Any]] = []
    words_total = 0
    dirs: set[Path] = set()

    def put(rel: str, text: str) -> None:
        nonlocal words_total
        p = root / rel
        if p.parent not in dirs:
            p.parent.mkdir(parents=True, exist_ok=True)
            dirs.add(p.parent)
        p.write_text(text, encoding="utf-8")
        written.append((rel, text))
        words_total += len(text.split())

    def memory_note(title: str, mtype: str, body: str, project: str, tags: Sequence[str]) -> tuple[str, str]:
        if rng.random() < 0.7:
            layer, agent, folder = "shared", None, MEMORY_DIR
        else:
            agent = rng.choice(AGENTS)
            layer, folder = "private", f"Agents/{agent}/Memory"
        mid = "mem-" + _ulid(rng)
        ts = _iso(rng)
        meta = {"id": mid, "type": mtype, "title": title,
                "memory_key": f"{mtype}/{_slug(project, 30)}/{_slug(title)}", "layer": layer, "agent": agent,
                "project": project, "tags": list(tags), "confidence": round(rng.uniform(0.6, 1.0), 2),
                "status": "active", "origin": rng.choice(("user", "agent")), "created": ts, "updated": ts,
                "content_hash": content_hash(body)}
        rel = f"{folder}/{_slug(title)}-{mid[-6:]}.md"
        put(rel, frontmatter(meta) + body + "\n")
        return rel, layer if agent is None else f"private:{agent}"

    for ei, ai in pairs:
        e = entities[ei]
        asp = ASPECTS[ai]
        vals = _fact_values(rng, e)
        fact = rng.choice(asp.memory).format(**vals)
        target = _memory_words(rng)
        before = w.sentences(rng.randint(0, max(0, target // 2 - 10)), project_of[e]) if target > 25 else []
        after = w.sentences(max(0, target - len(fact.split()) - sum(len(s.split()) for s in before)),
                            project_of[e]) if target > 25 else []
        body = " ".join([*before, fact, *after])
        title = asp.title.format(**vals)
        rel, layer = memory_note(title, asp.type, body, project_of[e], asp.tags)
        if layer in ("shared", f"private:{QUERY_AGENT}"):
            candidates.append({"gold": rel, "aspect": asp.key, "layer": layer, "vals": vals, "ai": ai})
    for _ in range(n_generic):
        r = rng
        title = r.choice(GENERIC_TITLES).format(adj=r.choice(ADJS), noun=r.choice(NOUNS))
        memory_note(title.capitalize(), r.choice(("lesson", "preference", "instruction")),
                    w.paragraphs(_memory_words(rng)), rng.choice(PROJECTS), ("general",))

    # Long notes: a project document with headings, 2-5k words, entities mentioned in passing.
    for i in range(counts["long"]):
        project = PROJECTS[i % len(PROJECTS)]
        title = f"{project} design notes {i + 1}"
        total = rng.randint(2000, 5000)
        parts = [f"# {title}", ""]
        n = 0
        sec = 0
        while n < total:
            sec += 1
            words = rng.randint(150, 600)
            parts += [f"## {rng.choice(NOUNS).capitalize()} ({sec})", "", w.paragraphs(words, project), ""]
            n += words
        meta: dict[str, Any] = {"title": title, "project": project, "tags": ["design", project.lower()],
                                "created": _iso(rng)}
        put(f"Projects/{project}/{_slug(title)}.md", frontmatter(meta) + "\n".join(parts))

    # Conversation notes, in the stop hook's format.
    for i in range(counts["conversations"]):
        agent = rng.choice(AGENTS)
        e = rng.choice(entities)
        turns = rng.randint(2, 8)
        first = ""
        out: list[str] = []
        for t in range(1, turns + 1):
            fill = {"e": e, "noun": rng.choice(NOUNS), "noun2": rng.choice(NOUNS), "adj": rng.choice(ADJS),
                    "verb": rng.choice(VERBS), "verb2": rng.choice(VERBS2), "period": rng.choice(PERIODS)}
            u = rng.choice(USER_TURNS).format(**fill)
            first = first or u
            a = rng.choice(ASSISTANT_TURNS).format(**fill) + " " + " ".join(w.sentences(rng.randint(10, 120)))
            out += [f"## Turn {t}", "", f"**User:** {u}", "", f"**Assistant:** {a}", ""]
        title = first.rstrip("?.;")[:70]
        ts = _iso(rng)
        meta = {"type": "conversation", "title": title, "date": ts, "ended": ts, "agent": agent,
                "project": project_of[e], "session_id": f"sess-{i:06d}", "turns": turns,
                "source": "synthetic transcript"}
        put(f"{CONVERSATIONS_DIR}/{agent}/{ts[:10]}-{_slug(title, 40)}-{i:05d}.md",
            frontmatter(meta) + f"# {title}\n\n" + "\n".join(out))

    # Ordinary notes.
    for i in range(counts["ordinary"]):
        folder = rng.choice(("Ideas", "Synthesis", f"Projects/{rng.choice(PROJECTS)}"))
        title = f"{rng.choice(ADJS).capitalize()} {rng.choice(NOUNS)} {i + 1}"
        body = w.paragraphs(rng.randint(50, 400))
        put(f"{folder}/{_slug(title)}.md", frontmatter({"title": title, "created": _iso(rng)}) + f"# {title}\n\n{body}\n")

    # Questions: a fixed sample of the facts visible to QUERY_AGENT, each paraphrased.
    qrng = random.Random(f"{seed}:{notes}:questions")
    picked = qrng.sample(candidates, min(queries, len(candidates)))
    texts = dict(written)
    questions, overlaps = [], []
    for i, c in enumerate(picked):
        asp = ASPECTS[c["ai"]]
        q = qrng.choice(asp.questions).format(**c["vals"])
        terms = list(dict.fromkeys(content_terms(q)))
        gold_terms = set(content_terms(texts[c["gold"]]))
        overlaps.append(sum(t in gold_terms for t in terms) / len(terms) if terms else 0.0)
        questions.append({"id": f"q{i:03d}", "question": q, "gold_docs": [c["gold"]], "aspect": c["aspect"],
                          "layer": c["layer"], "agent": QUERY_AGENT})
    return {
        "notes": len(written),
        "seed": seed,
        "counts": counts | {"generic_memories": n_generic, "fact_memories": n_fact, "entities": n_entities},
        "questions": questions,
        "stats": {
            "words": words_total,
            "bytes": sum(len(t.encode("utf-8")) for _, t in written),
            "overlap_mean": round(sum(overlaps) / len(overlaps), 3) if overlaps else None,
            "questions_fully_contained": sum(1 for o in overlaps if o >= 1.0),
            "query_agent": QUERY_AGENT,
        },
    }
