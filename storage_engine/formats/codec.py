"""Record batch codec: the byte format of segment files.

Pure Python and dependency-free (``struct`` and ``zlib`` only) so that Spark
jobs can import this module and read sealed segments directly.

A segment file is a sequence of batches, back to back, with nothing between
them. Integers are big-endian; timestamps are milliseconds; ``i64`` fields use
``-1`` for "absent".

Batch header (``HEADER_SIZE`` = 60 bytes)::

    pos  size  type  field
      0     4  u32   length             bytes of the whole batch, header included
      4     4  u32   crc                zlib CRC-32 of bytes [8, length)
      8     2  u16   magic              0x4C42 ("LB")
     10     1  u8    version            1
     11     1  u8    flags              FLAG_* bits, summary of the records
     12     8  u64   base_offset        offset of the first record
     20     4  u32   last_offset_delta  last record's offset − base_offset
     24     4  u32   record_count
     28     8  i64   first_timestamp    timestamp of the first record
     36     8  i64   min_timestamp
     44     8  i64   max_timestamp
     52     8  i64   max_expire_at      largest explicit expire_at, −1 if none
     60     …        records            record_count records, in offset order

Flags: ``FLAG_HAS_EXPIRE`` (0x01) some record has an explicit expire_at;
``FLAG_HAS_UNBOUNDED`` (0x02) some record has none; ``FLAG_HAS_KEYS`` (0x04);
``FLAG_HAS_TAGS`` (0x08); ``FLAG_HAS_HEADERS`` (0x10). Other bits are invalid.

The CRC covers everything after itself, so every header field but ``length``
is protected; a damaged ``length`` moves the CRC range (or runs past the
buffer) and is caught as well.

Record (``RECORD_FIXED_SIZE`` = 33 bytes, then variable parts)::

    pos  size  type  field
      0     4  u32   size          bytes of this record after this field
      4     1  u8    attributes    ATTR_VALUE 0x01 (absent = tombstone),
                                   ATTR_KEY 0x02, ATTR_EXPIRE 0x04
      5     4  u32   offset_delta  offset − batch base_offset (gaps allowed
                                   after compaction; strictly increasing)
      9     8  i64   timestamp
     17     8  i64   expire_at     meaningful only with ATTR_EXPIRE
     25     4  u32   key_length    0 without ATTR_KEY
     29     2  u16   tag_count
     31     2  u16   header_count
     33     …        key           key_length bytes
                     tags          tag_count × (u8 length, UTF-8 bytes)
                     headers       header_count × (u16 name length, UTF-8 name,
                                                   u32 value length, value)
                     value         the rest of the record (size − 29 − above)

Decoding raises :class:`~storage_engine.errors.CorruptSegmentError` with the
file path and byte position of the damaged batch.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from storage_engine.api import Headers, Record
from storage_engine.errors import CorruptSegmentError, InvalidArgumentError

MAGIC = 0x4C42
VERSION = 1

FLAG_HAS_EXPIRE = 0x01
FLAG_HAS_UNBOUNDED = 0x02
FLAG_HAS_KEYS = 0x04
FLAG_HAS_TAGS = 0x08
FLAG_HAS_HEADERS = 0x10
_KNOWN_FLAGS = 0x1F

# What a TTL-index entry says about its record, so the scan reads only records it must.
EXPIRE_HAS_KEY = 0x01
EXPIRE_HAS_TAGS = 0x02

ATTR_VALUE = 0x01
ATTR_KEY = 0x02
ATTR_EXPIRE = 0x04
KNOWN_ATTRS = 0x07

_HEADER = struct.Struct(">IIHBBQIIqqqq")
_CRC_FROM = 8  # the CRC covers the header from the magic on, then the records
RECORD_FORMAT = struct.Struct(">IBIqqIHH")
RECORD_PREFIX = struct.Struct(">IBI")  # size, attributes, offset_delta: enough to skip a record
_U16 = struct.Struct(">H")
U32 = struct.Struct(">I")
HEADER_SIZE = _HEADER.size
RECORD_FIXED_SIZE = RECORD_FORMAT.size
RECORD_SIZE_BASE = RECORD_FIXED_SIZE - 4  # the size field does not count itself
_MAX_U32 = (1 << 32) - 1


class BatchHeader(NamedTuple):
    length: int
    crc: int
    magic: int
    version: int
    flags: int
    base_offset: int
    last_offset_delta: int
    record_count: int
    first_timestamp: int
    min_timestamp: int
    max_timestamp: int
    max_expire_at: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def has_unbounded(self) -> bool:
        return bool(self.flags & FLAG_HAS_UNBOUNDED)


class _RecordLike(Protocol):
    """What the encoder reads: both NewRecord and Record have these fields."""

    @property
    def value(self) -> bytes | None: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def tags(self) -> tuple[str, ...]: ...
    @property
    def headers(self) -> Headers: ...
    @property
    def expire_at(self) -> int | None: ...


@dataclass(slots=True)
class EncodedRecords:
    """The record section of a batch, encoded once by the producer's thread.

    Offsets are still relative (``offset_delta``); :meth:`seal` adds the header
    once the I/O worker has assigned the base offset. ``keys`` and ``tags``
    list ``(offset_delta, value)`` and ``expires`` lists ``(offset_delta,
    expire_at, record bytes, EXPIRE_* flags)`` for the secondary indexes so
    the writer never walks the records again.
    """

    data: bytes
    count: int
    last_delta: int
    first_timestamp: int
    min_timestamp: int
    max_timestamp: int
    max_expire_at: int
    flags: int
    keys: list[tuple[int, bytes]]
    tags: list[tuple[int, str]]
    expires: list[tuple[int, int, int, int]]

    @property
    def batch_length(self) -> int:
        return HEADER_SIZE + len(self.data)

    @property
    def min_expire_at(self) -> int:
        """The smallest explicit expire_at, −1 when no record has one."""
        return min((e[1] for e in self.expires), default=-1)

    @property
    def has_unbounded(self) -> bool:
        return bool(self.flags & FLAG_HAS_UNBOUNDED)

    def header(self, base_offset: int) -> bytes:
        """The 60-byte header for this record section at ``base_offset``."""
        head = _HEADER.pack(
            HEADER_SIZE + len(self.data),
            0,
            MAGIC,
            VERSION,
            self.flags,
            base_offset,
            self.last_delta,
            self.count,
            self.first_timestamp,
            self.min_timestamp,
            self.max_timestamp,
            self.max_expire_at,
        )
        crc = zlib.crc32(self.data, zlib.crc32(memoryview(head)[_CRC_FROM:]))
        return head[:4] + U32.pack(crc) + head[_CRC_FROM:]

    def seal(self, base_offset: int) -> bytes:
        """The complete batch (header + records) at ``base_offset``."""
        return self.header(base_offset) + self.data


def encode_records(
    records: Sequence[_RecordLike], timestamps: Sequence[int] | int, deltas: Sequence[int] | None = None
) -> EncodedRecords:
    """Encode records into a record section.

    ``timestamps`` is one timestamp per record, or a single int used for every
    record whose own ``timestamp`` attribute is ``None`` (broker time).
    ``deltas`` defaults to ``0..n-1`` (a fresh append).
    """
    if not records:
        raise InvalidArgumentError("records", "a batch holds at least one record")
    parts: list[bytes] = []
    put = parts.append
    pack = RECORD_FORMAT.pack
    keys: list[tuple[int, bytes]] = []
    tags_out: list[tuple[int, str]] = []
    expires: list[tuple[int, int, int, int]] = []
    flags = 0
    min_ts = max_ts = first_ts = -1
    max_exp = -1
    broker_ts = timestamps if isinstance(timestamps, int) else None
    last_delta = -1
    for i, r in enumerate(records):
        delta = i if deltas is None else deltas[i]
        if delta <= last_delta or delta > _MAX_U32:
            raise InvalidArgumentError("records", "offsets must increase within a batch and span < 2^32")
        last_delta = delta
        if broker_ts is None:
            ts = timestamps[i]  # type: ignore[index]
        else:
            own = getattr(r, "timestamp", None)
            ts = broker_ts if own is None else own
        if i == 0:
            first_ts = min_ts = max_ts = ts
        elif ts > max_ts:
            max_ts = ts
        elif ts < min_ts:
            min_ts = ts
        value = r.value
        key = r.key
        exp = r.expire_at
        if key is None and not r.tags and not r.headers and exp is None:
            # Fast path: the common unkeyed record is one pack and one append.
            flags |= FLAG_HAS_UNBOUNDED
            if value is None:
                put(pack(RECORD_SIZE_BASE, 0, delta, ts, 0, 0, 0, 0))
            else:
                put(pack(RECORD_SIZE_BASE + len(value), ATTR_VALUE, delta, ts, 0, 0, 0, 0))
                put(value)
            continue
        attrs = 0 if value is None else ATTR_VALUE
        extra: list[bytes] = []
        if key is not None:
            attrs |= ATTR_KEY
            flags |= FLAG_HAS_KEYS
            extra.append(key)
            keys.append((delta, key))
        if exp is None:
            flags |= FLAG_HAS_UNBOUNDED
        else:
            attrs |= ATTR_EXPIRE
            flags |= FLAG_HAS_EXPIRE
            if exp > max_exp:
                max_exp = exp
        for tag in r.tags:
            raw = tag.encode()
            extra.append(bytes((len(raw),)))
            extra.append(raw)
            tags_out.append((delta, tag))
        if r.tags:
            flags |= FLAG_HAS_TAGS
        for name, hval in r.headers:
            raw = name.encode()
            extra.append(_U16.pack(len(raw)))
            extra.append(raw)
            extra.append(U32.pack(len(hval)))
            extra.append(hval)
        if r.headers:
            flags |= FLAG_HAS_HEADERS
        if value is not None:
            extra.append(value)
        body = b"".join(extra)
        if exp is not None:
            expires.append(
                (
                    delta,
                    exp,
                    RECORD_FIXED_SIZE + len(body),
                    (EXPIRE_HAS_KEY if key is not None else 0) | (EXPIRE_HAS_TAGS if r.tags else 0),
                )
            )
        put(
            pack(
                RECORD_SIZE_BASE + len(body),
                attrs,
                delta,
                ts,
                0 if exp is None else exp,
                0 if key is None else len(key),
                len(r.tags),
                len(r.headers),
            )
        )
        put(body)
    data = b"".join(parts)
    if HEADER_SIZE + len(data) > _MAX_U32:
        raise InvalidArgumentError("records", "a batch must encode to less than 4 GiB")
    return EncodedRecords(
        data, len(records), last_delta, first_ts, min_ts, max_ts, max_exp, flags, keys, tags_out, expires
    )


def encoded_size(r: _RecordLike) -> int:
    """Bytes a record takes in a batch (the fixed part, its key, tags, headers and value)."""
    size = RECORD_FIXED_SIZE + len(r.key or b"") + len(r.value or b"")
    for tag in r.tags:
        size += 1 + len(tag.encode())
    for name, hval in r.headers:
        size += 6 + len(name.encode()) + len(hval)
    return size


def expire_flags(r: _RecordLike) -> int:
    return (EXPIRE_HAS_KEY if r.key is not None else 0) | (EXPIRE_HAS_TAGS if r.tags else 0)


def encode_batch(base_offset: int, records: Sequence[Record]) -> bytes:
    """Encode stored records (offsets ascending, all ≥ ``base_offset``) as one batch."""
    encoded = encode_records(records, [r.timestamp for r in records], [r.offset - base_offset for r in records])
    return encoded.seal(base_offset)


def decode_header(buf: bytes | memoryview, pos: int = 0, *, path: str = "<buffer>", verify: bool = True) -> BatchHeader:
    """Decode and check the header of the batch at ``pos`` without decoding its records.

    With ``verify`` the CRC is checked too (one pass over the batch bytes).
    Raises :class:`CorruptSegmentError` when the batch is damaged or does not
    fit in ``buf`` (a torn write at the end of a file looks like that).
    """
    avail = len(buf) - pos
    if avail < HEADER_SIZE:
        raise CorruptSegmentError(path, pos, f"truncated batch header: {avail} of {HEADER_SIZE} bytes")
    h = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if h.magic != MAGIC:
        raise CorruptSegmentError(path, pos, f"bad magic 0x{h.magic:04x} (expected 0x{MAGIC:04x})")
    if h.version != VERSION:
        raise CorruptSegmentError(path, pos, f"unsupported batch version {h.version}")
    if h.length < HEADER_SIZE + h.record_count * RECORD_FIXED_SIZE:
        raise CorruptSegmentError(path, pos, f"batch length {h.length} too small for {h.record_count} records")
    if h.length > avail:
        raise CorruptSegmentError(path, pos, f"truncated batch: length {h.length}, {avail} bytes available")
    if h.flags & ~_KNOWN_FLAGS:
        raise CorruptSegmentError(path, pos, f"unknown flags 0x{h.flags:02x}")
    if h.record_count == 0 or h.last_offset_delta < h.record_count - 1:
        raise CorruptSegmentError(
            path, pos, f"record_count {h.record_count} does not fit last_offset_delta {h.last_offset_delta}"
        )
    if verify:
        crc = zlib.crc32(memoryview(buf)[pos + _CRC_FROM : pos + h.length])
        if crc != h.crc:
            raise CorruptSegmentError(path, pos, f"CRC mismatch: stored 0x{h.crc:08x}, computed 0x{crc:08x}")
    return h


def decode_batch(
    buf: bytes | memoryview,
    pos: int = 0,
    *,
    path: str = "<buffer>",
    min_offset: int = 0,
    verify: bool = True,
) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at ``pos``: its header and its records at or after ``min_offset``."""
    h = decode_header(buf, pos, path=path, verify=verify)
    return h, decode_records(buf, pos, h, path=path, min_offset=min_offset)


def decode_records(
    buf: bytes | memoryview, pos: int, h: BatchHeader, *, path: str = "<buffer>", min_offset: int = 0
) -> list[Record]:
    """Decode the records of a batch whose header ``h`` (at ``pos``) is already checked."""
    return list(iter_records(buf, pos, h, path=path, min_offset=min_offset))


def iter_records(
    buf: bytes | memoryview, pos: int, h: BatchHeader, *, path: str = "<buffer>", min_offset: int = 0
) -> Iterator[Record]:
    """Lazily yield the records of a batch at or after ``min_offset``.

    A reader that stops early (a fetch of one record) decodes only what it
    takes; the record count and last delta are checked against the header when
    the walk reaches the end of the batch.
    """
    walk = _iter_range(buf, pos + HEADER_SIZE, pos + h.length, h.base_offset, min_offset, path, pos)
    count, last_delta = yield from walk
    check_record_count(h, count, last_delta, path, pos)


def check_record_count(h: BatchHeader, count: int, last_delta: int, path: str, pos: int) -> None:
    """A walk of the batch at ``pos`` found ``count`` records ending at ``last_delta``: they
    must be what its header ``h`` says, else :class:`CorruptSegmentError`."""
    if count != h.record_count or last_delta != h.last_offset_delta:
        raise CorruptSegmentError(
            path,
            pos,
            f"record section holds {count} records ending at delta {last_delta}; "
            f"header says {h.record_count} ending at {h.last_offset_delta}",
        )


def decode_record(buf: bytes, offset: int) -> Record:
    """Decode one record stored on its own (the ``rocksdb`` adapter's values) at ``offset``."""
    try:
        (delta,) = U32.unpack_from(buf, 5)
    except struct.error:
        raise CorruptSegmentError("<record>", 0, "truncated record") from None
    walk = _iter_range(buf, 0, len(buf), offset - delta, 0, "<record>", 0)
    out = []
    try:
        while True:
            out.append(next(walk))
    except StopIteration as done:
        count = done.value[0]
    if count != 1:
        raise CorruptSegmentError("<record>", 0, f"expected one record, found {count}")
    return out[0]


def _iter_range(
    buf: bytes | memoryview, p: int, end: int, base: int, min_offset: int, path: str, pos: int
) -> Generator[Record, None, tuple[int, int]]:
    """Yield records in ``buf[p:end]`` at or after ``min_offset``; return (records walked, last delta)."""
    unpack = RECORD_FORMAT.unpack_from
    unpack_prefix = RECORD_PREFIX.unpack_from
    count = 0
    last_delta = -1
    try:
        while p < end:
            size, attrs, delta = unpack_prefix(buf, p)
            rec_end = p + 4 + size
            count += 1
            if rec_end > end or size < RECORD_SIZE_BASE or delta <= last_delta or attrs & ~KNOWN_ATTRS:
                raise ValueError(f"record {count} is malformed")
            last_delta = delta
            if base + delta < min_offset:
                p = rec_end
                continue
            _size, _attrs, _delta, ts, exp, klen, ntags, nheaders = unpack(buf, p)
            q = p + RECORD_FIXED_SIZE
            key = None
            if attrs & ATTR_KEY:
                key = bytes(buf[q : q + klen])
                q += klen
            tags: tuple[str, ...] = ()
            if ntags:
                tag_list = []
                for _ in range(ntags):
                    n = buf[q]
                    tag_list.append(bytes(buf[q + 1 : q + 1 + n]).decode())
                    q += 1 + n
                tags = tuple(tag_list)
            headers: Headers = ()
            if nheaders:
                header_list = []
                for _ in range(nheaders):
                    (n,) = _U16.unpack_from(buf, q)
                    name = bytes(buf[q + 2 : q + 2 + n]).decode()
                    q += 2 + n
                    (n,) = U32.unpack_from(buf, q)
                    header_list.append((name, bytes(buf[q + 4 : q + 4 + n])))
                    q += 4 + n
                headers = tuple(header_list)
            if q > rec_end:
                raise ValueError(f"record {count} overruns its size")
            value = bytes(buf[q:rec_end]) if attrs & ATTR_VALUE else None
            p = rec_end
            yield Record(base + delta, ts, value, key, tags, headers, exp if attrs & ATTR_EXPIRE else None)
    except (ValueError, IndexError, struct.error, UnicodeDecodeError) as exc:
        raise CorruptSegmentError(path, pos, f"bad record section: {exc}") from None
    if p != end:
        raise CorruptSegmentError(path, pos, f"record section overruns its batch by {p - end} bytes")
    return count, last_delta


def iter_record_slices(data: bytes) -> Iterator[tuple[int, int, int]]:
    """``(offset_delta, start, end)`` of each record in a record section."""
    p = 0
    n = len(data)
    unpack = RECORD_FORMAT.unpack_from
    while p < n:
        size, _attrs, delta = unpack(data, p)[:3]
        yield delta, p, p + 4 + size
        p += 4 + size


def scan_batches(
    buf: bytes | memoryview, pos: int = 0, *, path: str = "<buffer>", verify: bool = True
) -> Iterator[tuple[int, BatchHeader]]:
    """``(position, header)`` of each batch in ``buf`` from ``pos``; raises at the first damaged one."""
    n = len(buf)
    while pos < n:
        h = decode_header(buf, pos, path=path, verify=verify)
        yield pos, h
        pos += h.length
