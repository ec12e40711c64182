"""The manifest of one offloaded segment: everything needed to read its data object without RocksDB.

One JSON object per segment, written after its data object
(:mod:`storage_engine.tier.layout` names both), UTF-8, keys sorted::

    {
      "format": 2,
      "namespace": "orders", "ns_id": 3, "shard": 0,
      "base_offset": 4096, "last_offset": 8191,       # inclusive
      "generation": "1f3a...",                         # 16 hex digits, as in the object names
      "data_object": "orders/3/0/00000000000000004096-1f3a....log",
      "size_bytes": 1048576,                           # bytes of the data object
      "checksum": "xxh3_128:…",                        # of the data object (storage_engine.tier.checksum)
      "record_count": 4096, "live_count": 4000,
      "first_timestamp": …, "min_timestamp": …, "max_timestamp": …,   # ms; null when empty
      "min_expire_at": …, "max_expire_at": …,          # explicit expire_at bounds; null: none
      "has_unbounded": true,                           # some record has no explicit expire_at
      "content_flags": 7,                              # codec FLAG_HAS_EXPIRE/KEYS/TAGS of any batch
      "dead_ranges": [[4100, 4120], …],                # offsets marked dead at upload, inclusive runs
      "offset_index": [[4096, 0], [4160, 4113], …],   # sparse: batch base offset → byte position
      "time_index": [[1700000000123, 4159], …],       # sparse: running max timestamp → offset
      "created_at": 1700000000000                      # when it was uploaded (engine clock, ms)
    }

The data object is the segment file byte for byte: batches in the
:mod:`storage_engine.formats.codec` format from position 0, so ``offset_index`` positions and the
engine's own reader (:func:`storage_engine.segment.segment.iter_file_batches` on a downloaded
copy) work on it as on the local file. ``time_index`` says every record at or below the offset
has a timestamp ≤ the time. ``dead_ranges`` is a snapshot: the node's index store stays the
authority (a TTL scan may mark more records dead later); a reader without the node leaves these
out and applies the records' own expiry.

Format 1 (written before) had ``"sha256": "<hex>"`` instead of ``checksum``; it is read as the
checksum ``"sha256:<hex>"`` and verified with SHA-256.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from storage_engine.errors import StorageError
from storage_engine.tier import checksum as checksums

FORMAT = 2
READABLE_FORMATS = (1, 2)


class ManifestError(StorageError):
    """A manifest that cannot be read (not JSON, another format, a missing field)."""

    code = "tier_manifest_invalid"

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        super().__init__(f"manifest {key!r}: {reason}")


@dataclass(frozen=True, slots=True)
class Manifest:
    namespace: str
    ns_id: int
    shard: int
    base_offset: int
    last_offset: int
    generation: str
    data_object: str
    size_bytes: int
    checksum: str  # "<algorithm>:<hex digest>" of the data object
    record_count: int
    live_count: int
    first_timestamp: int | None
    min_timestamp: int | None
    max_timestamp: int | None
    min_expire_at: int | None
    max_expire_at: int | None
    has_unbounded: bool
    content_flags: int
    created_at: int
    dead_ranges: tuple[tuple[int, int], ...] = ()
    offset_index: tuple[tuple[int, int], ...] = ()
    time_index: tuple[tuple[int, int], ...] = ()
    format: int = field(default=FORMAT)

    def to_bytes(self) -> bytes:
        body = asdict(self)
        for name in ("dead_ranges", "offset_index", "time_index"):
            body[name] = [list(pair) for pair in body[name]]
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, key: str, raw: bytes) -> Manifest:
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ManifestError(key, f"not JSON ({exc})") from None
        if not isinstance(body, dict):
            raise ManifestError(key, "not a JSON object")
        version = body.get("format")
        if version not in READABLE_FORMATS:
            readable = ", ".join(map(str, READABLE_FORMATS))
            raise ManifestError(key, f"format {version!r}, this engine reads {readable}")
        if version == 1 and "sha256" in body:
            body = {**body, "checksum": f"{checksums.SHA256}:{body['sha256']}", "format": FORMAT}
        return cls._build(key, body)

    @classmethod
    def _build(cls, key: str, body: Mapping[str, Any]) -> Manifest:
        names = {f for f in cls.__dataclass_fields__}
        missing = sorted(names - set(body) - {"dead_ranges", "offset_index", "time_index", "format"})
        if missing:
            raise ManifestError(key, f"missing {', '.join(missing)}")
        values = {k: v for k, v in body.items() if k in names}
        try:
            for name in ("dead_ranges", "offset_index", "time_index"):
                values[name] = tuple((int(a), int(b)) for a, b in values.get(name, ()))
            checksums.parse(str(values["checksum"]))
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise ManifestError(key, f"malformed ({exc})") from None


def pairs(values: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    return tuple((int(a), int(b)) for a, b in values)
