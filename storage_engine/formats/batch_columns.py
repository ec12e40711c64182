"""Column walks over encoded record batches (the format: :mod:`storage_engine.formats.codec`).

Offsets, keys, timestamps and deadlines of a batch's records without decoding values, tags or
headers, and a batch rebuilt with only some of its records: key compaction's per-record path
(the vectorised one is :mod:`storage_engine.formats.columnar`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from storage_engine.api import Record
from storage_engine.errors import CorruptSegmentError
from storage_engine.formats.codec import (
    ATTR_EXPIRE,
    ATTR_KEY,
    ATTR_VALUE,
    FLAG_HAS_EXPIRE,
    FLAG_HAS_HEADERS,
    FLAG_HAS_KEYS,
    FLAG_HAS_TAGS,
    FLAG_HAS_UNBOUNDED,
    HEADER_SIZE,
    KNOWN_ATTRS,
    RECORD_FIXED_SIZE,
    RECORD_FORMAT,
    RECORD_PREFIX,
    RECORD_SIZE_BASE,
    U32,
    BatchHeader,
    EncodedRecords,
    check_record_count,
)

# -- columnar walks (key compaction) -------------------------------------------------------------
_RECORD_KEY = struct.Struct(">IBI16xI")  # size, attributes, offset_delta, key_length


class RecordColumns(NamedTuple):
    """Some fields of a batch's records, one list per field (index ``i`` is one record).

    ``expire_ats`` holds ``0`` where the record has no ``ATTR_EXPIRE``; ``starts``
    and ``ends`` are each record's byte range in the batch buffer (empty when the
    columns were built from :class:`Record` objects).
    """

    offsets: list[int]
    keys: list[bytes | None]
    attrs: list[int]
    timestamps: list[int]
    expire_ats: list[int]
    starts: list[int]
    ends: list[int]

    @classmethod
    def of_records(cls, records: Sequence[Record]) -> RecordColumns:
        return cls(
            [r.offset for r in records],
            [r.key for r in records],
            [
                (0 if r.value is None else ATTR_VALUE)
                | (0 if r.key is None else ATTR_KEY)
                | (0 if r.expire_at is None else ATTR_EXPIRE)
                for r in records
            ],
            [r.timestamp for r in records],
            [0 if r.expire_at is None else r.expire_at for r in records],
            [],
            [],
        )


def _check_walk(h: BatchHeader, count: int, last_delta: int, p: int, end: int, path: str, pos: int) -> None:
    if p != end:
        raise CorruptSegmentError(path, pos, f"record section overruns its batch by {p - end} bytes")
    check_record_count(h, count, last_delta, path, pos)


def batch_keys(
    buf: bytes | memoryview, pos: int, h: BatchHeader, *, path: str = "<buffer>"
) -> tuple[list[int], list[bytes]]:
    """Offsets and keys of the keyed records of a checked batch, nothing else decoded.

    The same structural checks as :func:`iter_records` (record count and last
    delta against the header included); raises :class:`CorruptSegmentError`.
    """
    unpack = _RECORD_KEY.unpack_from
    base = h.base_offset
    offsets: list[int] = []
    keys: list[bytes] = []
    p = pos + HEADER_SIZE
    end = pos + h.length
    count = 0
    last_delta = -1
    try:
        while p < end:
            size, attrs, delta, klen = unpack(buf, p)
            rec_end = p + 4 + size
            count += 1
            if rec_end > end or size < RECORD_SIZE_BASE or delta <= last_delta or attrs & ~KNOWN_ATTRS:
                raise ValueError(f"record {count} is malformed")
            last_delta = delta
            if attrs & ATTR_KEY:
                q = p + RECORD_FIXED_SIZE
                if q + klen > rec_end:
                    raise ValueError(f"record {count} overruns its size")
                offsets.append(base + delta)
                keys.append(bytes(buf[q : q + klen]))
            p = rec_end
    except (ValueError, struct.error) as exc:
        raise CorruptSegmentError(path, pos, f"bad record section: {exc}") from None
    _check_walk(h, count, last_delta, p, end, path, pos)
    return offsets, keys


def batch_columns(
    buf: bytes | memoryview, pos: int, h: BatchHeader, *, path: str = "<buffer>", times: bool = True
) -> RecordColumns:
    """The :class:`RecordColumns` of a checked batch (tags, headers and values stay encoded);
    without ``times`` the ``timestamps`` and ``expire_ats`` columns are left empty."""
    unpack = RECORD_FORMAT.unpack_from
    base = h.base_offset
    offsets: list[int] = []
    keys: list[bytes | None] = []
    attr_col: list[int] = []
    stamps: list[int] = []
    expires: list[int] = []
    starts: list[int] = []
    p = pos + HEADER_SIZE
    end = pos + h.length
    count = 0
    last_delta = -1
    try:
        while p < end:
            size, attrs, delta, ts, exp, klen, _nt, _nh = unpack(buf, p)
            rec_end = p + 4 + size
            count += 1
            if rec_end > end or size < RECORD_SIZE_BASE or delta <= last_delta or attrs & ~KNOWN_ATTRS:
                raise ValueError(f"record {count} is malformed")
            last_delta = delta
            offsets.append(base + delta)
            if attrs & ATTR_KEY:
                q = p + RECORD_FIXED_SIZE
                if q + klen > rec_end:
                    raise ValueError(f"record {count} overruns its size")
                keys.append(bytes(buf[q : q + klen]))
            else:
                keys.append(None)
            attr_col.append(attrs)
            if times:
                stamps.append(ts)
                expires.append(exp if attrs & ATTR_EXPIRE else 0)
            starts.append(p)
            p = rec_end
    except (ValueError, struct.error) as exc:
        raise CorruptSegmentError(path, pos, f"bad record section: {exc}") from None
    _check_walk(h, count, last_delta, p, end, path, pos)
    ends = starts[1:]
    ends.append(end)
    return RecordColumns(offsets, keys, attr_col, stamps, expires, starts, ends)


def rebuild_batch(buf: bytes | memoryview, cols: RecordColumns, keep: Sequence[int]) -> bytes:
    """A new batch of the records at indexes ``keep`` (ascending, non-empty) of ``cols``,
    built from their encoded bytes: the header is recomputed, offset deltas are rebased
    on the first kept record and nothing else is re-encoded (offsets stay the same)."""
    unpack = RECORD_FORMAT.unpack_from
    pack_delta = U32.pack
    starts, ends, offsets = cols.starts, cols.ends, cols.offsets
    base = offsets[keep[0]]
    mv = memoryview(buf)
    parts: list[bytes | memoryview] = []
    flags = 0
    min_ts = max_ts = first_ts = -1
    max_exp = -1
    for n, i in enumerate(keep):
        s, e = starts[i], ends[i]
        _size, attrs, delta, ts, exp, _klen, ntags, nheaders = unpack(buf, s)
        if n == 0:
            first_ts = min_ts = max_ts = ts
        elif ts > max_ts:
            max_ts = ts
        elif ts < min_ts:
            min_ts = ts
        if attrs & ATTR_KEY:
            flags |= FLAG_HAS_KEYS
        if attrs & ATTR_EXPIRE:
            flags |= FLAG_HAS_EXPIRE
            if exp > max_exp:
                max_exp = exp
        else:
            flags |= FLAG_HAS_UNBOUNDED
        if ntags:
            flags |= FLAG_HAS_TAGS
        if nheaders:
            flags |= FLAG_HAS_HEADERS
        rel = offsets[i] - base
        if rel == delta:
            parts.append(mv[s:e])
        else:
            parts.append(mv[s : s + 5])
            parts.append(pack_delta(rel))
            parts.append(mv[s + 9 : e])
    data = b"".join(parts)
    encoded = EncodedRecords(
        data, len(keep), offsets[keep[-1]] - base, first_ts, min_ts, max_ts, max_exp, flags, [], [], []
    )
    return encoded.seal(base)


def batch_positions(buf: bytes | memoryview, pos: int, h: BatchHeader, *, path: str = "<buffer>") -> list[int]:
    """Where each record of a checked batch with dense offsets (deltas ``0..n-1``) starts in
    ``buf``; nothing else decoded. Raises :class:`CorruptSegmentError` when the record
    sizes do not add up to the batch or the deltas are not dense."""
    unpack = RECORD_PREFIX.unpack_from
    starts: list[int] = []
    put = starts.append
    p = pos + HEADER_SIZE
    end = pos + h.length
    count = 0
    try:
        while p < end:
            size, attrs, delta = unpack(buf, p)
            if delta != count or size < RECORD_SIZE_BASE or attrs & ~KNOWN_ATTRS:
                raise ValueError(f"record {count + 1} is malformed or offsets are not dense")
            put(p)
            count += 1
            p += 4 + size
    except (ValueError, struct.error) as exc:
        raise CorruptSegmentError(path, pos, f"bad record section: {exc}") from None
    _check_walk(h, count, count - 1, p, end, path, pos)
    return starts
