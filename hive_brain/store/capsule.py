"""The ``.hivebrain`` capsule file: a SQLite image (records + FTS5 index + manifest), sealed, optionally
locked with AES-256-GCM. The format is documented in docs/capsule-format.md; this module is its only
reader and writer. What goes in (scope, layers, secrets) and what an import proposes is
:mod:`hive_brain.memory.capsules`.

Every way a file can be wrong is refused with :class:`~hive_brain.errors.CapsuleRefused` naming the
check it failed, in this order: ``format`` (not a capsule, or a newer format), ``truncated`` (shorter
than it says it is), ``passphrase`` (locked and no or the wrong passphrase), ``integrity`` (the
whole-file SHA-256 or the AEAD tag does not match: any changed byte), ``manifest`` and ``records``
(the checksums inside), ``expiry``.

``cryptography`` is imported only inside :func:`lock` and :func:`unlock`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import re
import sqlite3
import struct
from dataclasses import dataclass, field
from typing import Any

from ..errors import CapsuleRefused

FORMAT = "hive-brain-capsule"
FORMAT_VERSION = 1
SQLITE_MAGIC = b"SQLite format 3\x00"
APPLICATION_ID = 0x48424350  # "HBCP": `file`/sqlite3 tools can tell a capsule from any other database
# The whole-file digest is stored inside the file it covers: written as this placeholder, the file is
# hashed, then the placeholder's bytes are overwritten with the digest (same length). A reader puts the
# placeholder back and hashes again.
DIGEST_PLACEHOLDER = "hive-brain-capsule-file-sha256-placeholder".ljust(64, "-")

ENC_MAGIC = b"HIVECAPS"  # then: version (1 byte), header length (4 bytes, big-endian), header JSON, sealed payload
ENC_VERSION = 1
SCRYPT = {"n": 2**15, "r": 8, "p": 1}
SCRYPT_LIMITS = {"n": 2**20, "r": 16, "p": 4}  # a hostile header must not make opening cost minutes or GBs
SALT_BYTES, NONCE_BYTES, TAG_BYTES = 16, 12, 16

RECORD_COLUMNS = ("memory_id", "memory_key", "type", "title", "project", "layer", "agent", "task", "tags",
                  "aliases", "confidence", "created", "updated", "content", "content_hash")

SCHEMA = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE records (
  seq INTEGER PRIMARY KEY,
  memory_id TEXT NOT NULL, memory_key TEXT, type TEXT NOT NULL, title TEXT NOT NULL, project TEXT,
  layer TEXT NOT NULL, agent TEXT, task TEXT, tags TEXT NOT NULL, aliases TEXT NOT NULL, confidence REAL,
  created TEXT, updated TEXT, content TEXT NOT NULL, content_hash TEXT NOT NULL,
  record_sha256 TEXT NOT NULL
);
CREATE VIRTUAL TABLE records_fts USING fts5(
  title, content, tags, content='records', content_rowid='seq', tokenize='porter unicode61'
);
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {FORMAT_VERSION};
"""


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_sha256(seq: int, rec: dict[str, Any]) -> str:
    """The checksum of one record: SHA-256 of the canonical JSON of its position and every column."""
    return sha256_hex(canonical({"seq": seq, **{k: rec.get(k) for k in RECORD_COLUMNS}}))


def records_sha256(digests: list[str]) -> str:
    """The manifest's checksum over all records: SHA-256 of their checksums in order, one per line."""
    return sha256_hex("\n".join(digests).encode("ascii"))


@dataclass
class Capsule:
    """A verified capsule, held in memory (an encrypted one's plaintext never touches the disk)."""

    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    conn: sqlite3.Connection
    encrypted: bool
    size: int
    checks: list[str] = field(default_factory=list)

    def search(self, query: str, limit: int = 10) -> list[dict[str, Any]]:
        """FTS5 over title, content and tags (a title match weighs most); any word may match.

        Scored as BM25 with Lucene's idf, ``ln(1 + (N - n + 0.5) / (n + 0.5))``, which stays positive:
        FTS5's own ``bm25()`` clamps the idf of a word found in half the records or more to 1e-6, so in a
        capsule of a few memories every score printed as 0.000 and the order was the clamp's. Each word
        is asked alone, FTS5's per-word score divided by its idf gives the word's tf part (FTS5's own
        tokenizer, stemming and column weights), and the parts are summed under the steadier idf."""
        words = list(dict.fromkeys(w.lower() for w in re.findall(r"\w+", query)))
        if not words:
            return []
        total = self.conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        scores: dict[int, float] = {}
        for w in words:
            rows = self.conn.execute("SELECT rowid, bm25(records_fts, 5.0, 1.0, 2.0) FROM records_fts "
                                     "WHERE records_fts MATCH ?", ('"' + w.replace('"', "") + '"',)).fetchall()
            n = len(rows)
            if not n:
                continue
            fts_idf = max(1e-6, math.log((total - n + 0.5) / (n + 0.5)))
            idf = math.log(1 + (total - n + 0.5) / (n + 0.5))
            for seq, rank in rows:
                scores[seq] = scores.get(seq, 0.0) + idf * (-rank / fts_idf)
        best = sorted(scores, key=lambda seq: (-scores[seq], seq))[:limit]
        if not best:
            return []
        match = " OR ".join('"' + w.replace('"', "") + '"' for w in words)
        marks = ",".join("?" * len(best))
        info = {r[0]: r[1:] for r in self.conn.execute(
            "SELECT r.seq, r.memory_id, r.title, r.type, r.project, snippet(records_fts, 1, '[', ']', '...', 16) "
            f"FROM records_fts JOIN records r ON r.seq = records_fts.rowid WHERE records_fts MATCH ? AND r.seq IN ({marks})",
            (match, *best))}
        return [{"seq": seq, "memory_id": info[seq][0], "title": info[seq][1], "type": info[seq][2],
                 "project": info[seq][3], "score": round(scores[seq], 4), "snippet": info[seq][4]} for seq in best]


# -- writing -----------------------------------------------------------------------------------------
def build(records: list[dict[str, Any]], manifest: dict[str, Any]) -> bytes:
    """The sealed SQLite image of ``records`` (dicts with :data:`RECORD_COLUMNS`) under ``manifest``
    (``record_count`` and ``records_sha256`` are filled in here). Built in memory, never on disk."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(SCHEMA)
        digests = []
        for seq, rec in enumerate(records, 1):
            d = record_sha256(seq, rec)
            digests.append(d)
            conn.execute(f"INSERT INTO records (seq, {', '.join(RECORD_COLUMNS)}, record_sha256) VALUES "
                         f"(?, {', '.join('?' * len(RECORD_COLUMNS))}, ?)",
                         (seq, *(rec.get(k) for k in RECORD_COLUMNS), d))
        conn.execute("INSERT INTO records_fts(records_fts) VALUES ('rebuild')")
        manifest = {**manifest, "format": FORMAT, "format_version": FORMAT_VERSION, "record_count": len(records),
                    "records_sha256": records_sha256(digests)}
        text = canonical(manifest).decode("utf-8")
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [
            ("format", FORMAT), ("format_version", str(FORMAT_VERSION)), ("manifest", text),
            ("manifest_sha256", sha256_hex(text.encode("utf-8"))), ("file_sha256", DIGEST_PLACEHOLDER)])
        conn.commit()
        conn.execute("VACUUM")  # no free pages: the image is exactly the live data
        image = conn.serialize()
    finally:
        conn.close()
    return _seal(bytes(image))


def _seal(image: bytes) -> bytes:
    ph = DIGEST_PLACEHOLDER.encode("ascii")
    at = image.find(ph)
    if at < 0 or image.find(ph, at + 1) >= 0:
        # Only if a memory quotes the placeholder itself: the digest's place would be ambiguous.
        raise CapsuleRefused("integrity", "could not place the whole-file checksum",
                             hint="leave out the memory that quotes the capsule checksum placeholder")
    digest = sha256_hex(image).encode("ascii")
    return image[:at] + digest + image[at + len(ph):]


def lock(sealed: bytes, passphrase: str, *, header_extra: dict[str, Any] | None = None) -> bytes:
    """The envelope around a sealed image: AES-256-GCM under a key derived from ``passphrase`` with
    scrypt and a random salt. The header (authenticated as associated data) says how to derive the key."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    salt, nonce = os.urandom(SALT_BYTES), os.urandom(NONCE_BYTES)
    key, check = _derive(passphrase, salt, SCRYPT)
    header = {"cipher": "AES-256-GCM", "kdf": "scrypt", "kdf_params": dict(SCRYPT), "salt": salt.hex(),
              "nonce": nonce.hex(), "key_check": check, "ciphertext_len": len(sealed) + TAG_BYTES,
              **(header_extra or {})}
    head = canonical(header)
    prefix = ENC_MAGIC + bytes([ENC_VERSION]) + struct.pack(">I", len(head)) + head
    return prefix + AESGCM(key).encrypt(nonce, sealed, prefix)


def _derive(passphrase: str, salt: bytes, params: dict[str, int]) -> tuple[bytes, str]:
    """(AES key, key check): scrypt gives 64 bytes, the first 32 are the key; a SHA-256 of the other 32,
    kept in the header, tells a wrong passphrase from a damaged file without revealing the key."""
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    out = Scrypt(salt=salt, length=64, n=params["n"], r=params["r"], p=params["p"]).derive(passphrase.encode("utf-8"))
    return out[:32], sha256_hex(out[32:])


# -- reading -----------------------------------------------------------------------------------------
def is_locked(data: bytes) -> bool:
    return data.startswith(ENC_MAGIC)


def unlock(data: bytes, passphrase: str | None) -> tuple[bytes, dict[str, Any]]:
    """(sealed image, header) of an encrypted capsule, or CapsuleRefused naming the failed check."""
    fixed = len(ENC_MAGIC) + 5
    if len(data) < fixed:
        raise CapsuleRefused("truncated", f"the file ends after {len(data)} bytes, inside its header")
    if data[len(ENC_MAGIC)] != ENC_VERSION:
        raise CapsuleRefused("format", f"encrypted capsule format {data[len(ENC_MAGIC)]} is not one this "
                             "hive-brain reads", hint="open it with a newer hive-brain")
    (hlen,) = struct.unpack(">I", data[len(ENC_MAGIC) + 1:fixed])
    if len(data) < fixed + hlen:
        raise CapsuleRefused("truncated", f"the file ends after {len(data)} bytes, inside its {fixed + hlen}-byte header")
    prefix = data[:fixed + hlen]
    try:
        header = json.loads(prefix[fixed:])
        params = {k: int(header["kdf_params"][k]) for k in ("n", "r", "p")}
        salt, nonce = bytes.fromhex(header["salt"]), bytes.fromhex(header["nonce"])
        check, ct_len = str(header["key_check"]), int(header["ciphertext_len"])
        ok = (header["cipher"] == "AES-256-GCM" and header["kdf"] == "scrypt" and len(nonce) == NONCE_BYTES
              and all(0 < params[k] <= SCRYPT_LIMITS[k] for k in params))
    except (ValueError, KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise CapsuleRefused("integrity", "the encrypted capsule's header is damaged")
    if len(data) < len(prefix) + ct_len:
        raise CapsuleRefused("truncated", f"the file has {len(data):,} bytes; its header says {len(prefix) + ct_len:,}")
    if len(data) > len(prefix) + ct_len:
        raise CapsuleRefused("integrity", f"{len(data) - len(prefix) - ct_len:,} bytes follow the encrypted payload")
    if not passphrase:
        raise CapsuleRefused("passphrase", "this capsule is locked", hint="give its passphrase with --passphrase-env VAR")
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    key, want = _derive(passphrase, salt, params)
    if want != check:
        raise CapsuleRefused("passphrase", "the passphrase does not open this capsule",
                             hint="check the variable --passphrase-env names")
    try:
        sealed = AESGCM(key).decrypt(nonce, data[len(prefix):], prefix)
    except InvalidTag:
        raise CapsuleRefused("integrity", "the encrypted payload was changed or damaged (its AES-GCM tag does not match)") from None
    return sealed, header


def _page_bytes(image: bytes) -> int:
    page_size = struct.unpack(">H", image[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    (pages,) = struct.unpack(">I", image[28:32])
    return page_size * pages


def verify_image(image: bytes) -> tuple[sqlite3.Connection, dict[str, Any], list[dict[str, Any]]]:
    """Open a sealed image in memory and check it: format, length, whole-file digest, manifest, records."""
    if not image:
        raise CapsuleRefused("truncated", "the file is empty")
    if len(image) < 100 or not image.startswith(SQLITE_MAGIC):
        if len(image) < 100 and SQLITE_MAGIC.startswith(image[:16]):
            raise CapsuleRefused("truncated", f"the file ends after {len(image)} bytes, inside the SQLite header")
        raise CapsuleRefused("format", "this is not a hive-brain capsule",
                             hint="a capsule is the .hivebrain file `hive-brain capsule-export` writes")
    expected = _page_bytes(image)
    if len(image) < expected:
        raise CapsuleRefused("truncated", f"the file has {len(image):,} bytes; its header says {expected:,}")
    conn = sqlite3.connect(":memory:")
    try:
        conn.deserialize(image)
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as e:
            if "no such table" in str(e):
                raise CapsuleRefused("format", "this SQLite file is not a hive-brain capsule (no meta table)") from None
            raise CapsuleRefused("integrity", f"the file is damaged ({e})") from None
        if meta.get("format") != FORMAT:
            raise CapsuleRefused("format", "this SQLite file is not a hive-brain capsule")
        try:
            version = int(meta.get("format_version") or 0)
        except ValueError:
            version = -1
        if version != FORMAT_VERSION:
            raise CapsuleRefused("format", f"capsule format {meta.get('format_version')!r} is not one this "
                                 "hive-brain reads", hint="open it with a newer hive-brain")
        digest = str(meta.get("file_sha256") or "")
        at = image.find(digest.encode("utf-8")) if re.fullmatch(r"[0-9a-f]{64}", digest) else -1
        if at < 0 or sha256_hex(image[:at] + DIGEST_PLACEHOLDER.encode("ascii") + image[at + 64:]) != digest:
            raise CapsuleRefused("integrity", "the file's SHA-256 does not match the one it was sealed with: "
                                 "it was changed or damaged after export")
        text = str(meta.get("manifest") or "")
        if sha256_hex(text.encode("utf-8")) != meta.get("manifest_sha256"):
            raise CapsuleRefused("manifest", "the manifest does not match its checksum")
        try:
            manifest = json.loads(text)
        except ValueError:
            manifest = None
        if not isinstance(manifest, dict):
            raise CapsuleRefused("manifest", "the manifest is not a JSON object")
        rows = conn.execute(f"SELECT seq, {', '.join(RECORD_COLUMNS)}, record_sha256 FROM records ORDER BY seq").fetchall()
        records, digests = [], []
        for row in rows:
            rec = dict(zip(("seq", *RECORD_COLUMNS, "record_sha256"), row, strict=True))
            if record_sha256(rec["seq"], rec) != rec["record_sha256"]:
                raise CapsuleRefused("records", f"record {rec['seq']} ({rec['memory_id']}) does not match its SHA-256")
            digests.append(rec["record_sha256"])
            records.append(rec)
        if len(records) != manifest.get("record_count") or records_sha256(digests) != manifest.get("records_sha256"):
            raise CapsuleRefused("manifest", "the records are not the ones the manifest lists")
    except sqlite3.DatabaseError as e:
        conn.close()
        raise CapsuleRefused("integrity", f"the file is damaged ({e})") from None
    except BaseException:
        conn.close()
        raise
    return conn, manifest, records


def expiry_time(manifest: dict[str, Any]) -> dt.datetime | None:
    """When the capsule expires (None: never, or an unreadable date, which :func:`check_expiry` refuses)."""
    try:
        when = dt.datetime.fromisoformat(str(manifest.get("expires")).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def check_expiry(manifest: dict[str, Any], now: dt.datetime) -> None:
    exp = manifest.get("expires")
    if not exp:
        return
    when = expiry_time(manifest)
    if when is None:
        raise CapsuleRefused("expiry", f"the expiry date {exp!r} cannot be read: treated as expired")
    if now >= when:
        raise CapsuleRefused("expiry", f"this capsule expired at {exp}",
                             hint="ask its exporter for a fresh one (capsule-export --expires ...)")


def load(data: bytes, *, passphrase: str | None = None, now: dt.datetime | None = None) -> Capsule:
    """Verify ``data`` (a capsule file's bytes) and open it; ``now`` decides expiry (default: the clock)."""
    now = now or dt.datetime.now(dt.UTC)
    checks = ["format", "truncated"]
    encrypted = is_locked(data)
    if data and len(data) < len(ENC_MAGIC) and ENC_MAGIC.startswith(data):
        raise CapsuleRefused("truncated", f"the file ends after {len(data)} bytes, inside its header")
    image = data
    if encrypted:
        image, _header = unlock(data, passphrase)
        checks.append("passphrase")
    conn, manifest, records = verify_image(image)
    checks += ["integrity", "manifest", "records"]
    if bool(manifest.get("encrypted")) != encrypted:
        conn.close()
        raise CapsuleRefused("manifest", "the manifest says the capsule is "
                             + ("encrypted" if manifest.get("encrypted") else "not encrypted") + ", the file says otherwise")
    try:
        check_expiry(manifest, now)
    except CapsuleRefused:
        conn.close()
        raise
    checks.append("expiry")
    return Capsule(manifest, records, conn, encrypted, len(data), checks)
