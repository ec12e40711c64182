"""The batch codec: round trips and corruption detection (property tests)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_engine.api import NewRecord, Record
from storage_engine.errors import CorruptSegmentError
from storage_engine.formats.codec import (
    HEADER_SIZE,
    decode_batch,
    decode_header,
    decode_record,
    encode_batch,
    encode_records,
    iter_record_slices,
    scan_batches,
)

MAX_TS = (1 << 63) - 1

tags = st.text(min_size=1, max_size=20).filter(lambda t: len(t.encode()) <= 255)
headers = st.tuples(st.text(max_size=10), st.binary(max_size=20))


@st.composite
def record_lists(draw: st.DrawFn) -> tuple[int, list[Record]]:
    base = draw(st.integers(0, 1 << 50))
    gaps = draw(st.lists(st.integers(1, 5), min_size=1, max_size=12))  # compaction leaves gaps
    offsets, o = [], base
    for g in gaps:
        offsets.append(o)
        o += g
    records = [
        Record(
            offset=off,
            timestamp=draw(st.integers(0, MAX_TS)),
            value=draw(st.none() | st.binary(max_size=300)),
            key=draw(st.none() | st.binary(max_size=30)),
            tags=tuple(draw(st.lists(tags, max_size=3))),
            headers=tuple(draw(st.lists(headers, max_size=3))),
            expire_at=draw(st.none() | st.integers(0, MAX_TS)),
        )
        for off in offsets
    ]
    return base, records


@settings(max_examples=200)
@given(record_lists())
def test_round_trip(batch: tuple[int, list[Record]]) -> None:
    base, records = batch
    buf = encode_batch(base, records)
    header, decoded = decode_batch(buf)
    assert decoded == records
    assert header.length == len(buf)
    assert (header.base_offset, header.last_offset, header.record_count) == (base, records[-1].offset, len(records))
    stamps = [r.timestamp for r in records]
    assert (header.first_timestamp, header.min_timestamp, header.max_timestamp) == (stamps[0], min(stamps), max(stamps))
    explicit = [r.expire_at for r in records if r.expire_at is not None]
    assert header.max_expire_at == (max(explicit) if explicit else -1)
    assert header.has_unbounded == any(r.expire_at is None for r in records)
    assert decode_header(buf) == header


@settings(max_examples=300)
@given(record_lists(), st.data())
def test_any_single_byte_corruption_is_detected(batch: tuple[int, list[Record]], data: st.DataObject) -> None:
    base, records = batch
    buf = bytearray(encode_batch(base, records))
    position = data.draw(st.integers(0, len(buf) - 1), label="position")
    buf[position] ^= data.draw(st.integers(1, 255), label="xor")
    with pytest.raises(CorruptSegmentError) as err:
        decode_batch(bytes(buf), path="seg.log")
    assert err.value.path == "seg.log" and err.value.position == 0


@settings(max_examples=100)
@given(record_lists(), st.integers(1, 100))
def test_truncation_is_detected(batch: tuple[int, list[Record]], cut: int) -> None:
    buf = encode_batch(*batch)
    with pytest.raises(CorruptSegmentError, match="truncated"):
        decode_header(buf[: max(0, len(buf) - cut)])


def test_errors_name_the_file_and_the_batch_position() -> None:
    first = encode_batch(0, [Record(0, 1, b"a")])
    second = bytearray(encode_batch(1, [Record(1, 2, b"b"), Record(2, 3, b"c")]))
    second[-1] ^= 0xFF
    buf = first + bytes(second)
    assert [pos for pos, _ in scan_batches(first + first)] == [0, len(first)]
    scanned = scan_batches(buf, path="/x/00000000000000000000.log")
    assert next(scanned)[0] == 0
    with pytest.raises(CorruptSegmentError) as err:
        next(scanned)
    assert (err.value.path, err.value.position) == ("/x/00000000000000000000.log", len(first))
    assert "CRC mismatch" in err.value.reason


def test_min_offset_skips_records_without_decoding_them() -> None:
    records = [Record(o, o, b"%d" % o, key=b"k") for o in (10, 11, 14, 15)]
    _, decoded = decode_batch(encode_batch(10, records), min_offset=12)
    assert decoded == records[2:]


def test_encode_records_assigns_deltas_and_broker_time() -> None:
    body = encode_records(
        [NewRecord(b"a"), NewRecord(b"b", key=b"k", tags=("t",), timestamp=5, expire_at=99), NewRecord(None)],
        timestamps=1000,
    )
    assert (body.count, body.last_delta, body.keys, body.tags, body.expires) == (
        3,
        2,
        [(1, b"k")],
        [(1, "t")],
        # (delta, expire_at, encoded record bytes, EXPIRE_HAS_KEY | EXPIRE_HAS_TAGS)
        [(1, 99, 37, 3)],
    )
    assert (body.first_timestamp, body.min_timestamp, body.max_timestamp, body.max_expire_at) == (1000, 5, 1000, 99)
    _, decoded = decode_batch(body.seal(7))
    assert [(r.offset, r.timestamp, r.value) for r in decoded] == [(7, 1000, b"a"), (8, 5, b"b"), (9, 1000, None)]
    assert body.seal(7) == encode_batch(7, decoded)
    assert len(body.seal(7)) == body.batch_length == HEADER_SIZE + len(body.data)


def test_single_records_decode_on_their_own() -> None:
    # The rocksdb adapter stores each record's bytes as one value keyed by its offset.
    body = encode_records([NewRecord(b"a", tags=("x",)), NewRecord(None, key=b"k")], timestamps=3)
    slices = list(iter_record_slices(body.data))
    assert [d for d, _, _ in slices] == [0, 1]
    got = [decode_record(body.data[s:e], 40 + d) for d, s, e in slices]
    assert got == [Record(40, 3, b"a", tags=("x",)), Record(41, 3, None, key=b"k")]
    with pytest.raises(CorruptSegmentError):
        decode_record(body.data[:10], 0)
