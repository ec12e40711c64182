"""Uploads give way to appends (issue 19, "offload never delays appends by more than the pacing
budget"): an upload reads, hashes and hands the store ``SLICE_BYTES`` at a time, with a give-way
point before each piece and each chunk read back; the offload makes those points wait for appends in
flight (:class:`storage_engine.rules.pacing.Foreground`) and still finishes under a steady load. The store
cuts the pieces into parts of exactly ``PART_BYTES`` whatever their sizes, so an S3 upload is still
proved by its ETag, without reading it back. Against a ``file://`` tier and SeaweedFS; no timing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from storage_engine.api import SegmentTier, StorageAdapter
from storage_engine.clock import ManualClock
from storage_engine.rules.pacing import Foreground
from storage_engine.tier import context, offload, upload
from storage_engine.tier.store import READ_CHUNK, ObjectTier
from tests.storage_engine.tier_engine import (  # noqa: F401 (fixtures)
    T0,
    clock_fixture,
    engine_fixture,
    policy,
    read_all,
    record,
)
from tests.storage_engine.tier_util import Tier, seaweed_fixture, tier_fixture  # noqa: F401 (fixtures)

PART = 5 << 20  # S3's smallest part but the last
PIECE = 700_000  # not a divisor of PART: pieces straddle the parts' ends
VALUE = 64 * 1024
COUNT = 400  # records of VALUE bytes: two sealed segments of 11 MiB, three parts each


def fill_large(engine: StorageAdapter, clock: ManualClock, name: str = "n") -> int:
    """Namespace ``name`` with segments of several parts each; returns the sealed segments' bytes."""
    engine.create_namespace(name, 1, policy(segment_bytes=11 << 20))
    start = clock.now_ms()
    for i in range(0, COUNT, 8):
        engine.append(name, 0, [record(j, timestamp=start + j, value=value_of(j)) for j in range(i, i + 8)])
    clock.set(start + COUNT + 1000)
    return sum(s.size_bytes for s in engine.list_segments(name, 0)[:-1])


def value_of(i: int) -> bytes:
    return i.to_bytes(4, "big") * (VALUE // 4)


def pieces_of(size: int) -> int:
    """Give-way points of reading a file of ``size`` bytes: each part's pieces (a part's last is shorter)."""
    return sum(-(-min(PART, size - at) // PIECE) for at in range(0, size, PART))


@pytest.fixture(name="waited")
def waited_fixture(engine: StorageAdapter, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What each give-way point's wait for appends in flight returned (whether it waited), in order."""
    foreground: Foreground = engine.foreground  # type: ignore[attr-defined]
    waited: list[bool] = []
    real_wait = foreground.wait_turn

    def wait_turn(timeout: float) -> bool:
        waited.append(real_wait(timeout))
        return waited[-1]

    monkeypatch.setattr(foreground, "wait_turn", wait_turn)
    return waited


@contextmanager
def append_in_flight(engine: StorageAdapter) -> Iterator[None]:
    """An append held in flight for the whole block (the worst steady load)."""
    foreground: Foreground = engine.foreground  # type: ignore[attr-defined]
    foreground.enter()
    try:
        yield
    finally:
        foreground.leave()


@pytest.fixture(name="small_parts")
def small_parts_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upload, "PART_BYTES", PART)
    monkeypatch.setattr(upload, "SLICE_BYTES", PIECE)


@pytest.mark.usefixtures("small_parts")
def test_every_piece_and_every_chunk_read_back_has_a_give_way_point(
    engine: StorageAdapter, tier: Tier, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    sealed_bytes = fill_large(engine, clock)
    sealed = engine.list_segments("n", 0)[:-1]
    assert len(sealed) >= 2 and all(s.size_bytes > 2 * PART for s in sealed)
    real_upload, read_backs, calls = upload.upload_segment, [], []

    def counted(*args: object, pace: object = None, **kwargs: object) -> int:
        calls.append(0)
        index = len(calls) - 1

        def count() -> None:
            calls[index] += 1
            assert callable(pace)
            pace()

        return real_upload(*args, pace=count, **kwargs)  # type: ignore[arg-type]

    real_checksum = ObjectTier.checksum

    def checksum(self: ObjectTier, key: str, update: object) -> int:
        read_backs.append(key)
        return real_checksum(self, key, update)  # type: ignore[arg-type]

    monkeypatch.setattr(offload, "upload_segment", counted)
    monkeypatch.setattr(ObjectTier, "checksum", checksum)
    result = engine.offload("n")
    assert result.segments_offloaded == len(sealed) and result.bytes_offloaded == sealed_bytes
    pieces = [pieces_of(s.size_bytes) for s in sealed]
    if tier.kind == "s3":
        # the ETag (MD5 of the PART-sized parts' MD5s) proved every object: nothing read back
        assert read_backs == [] and calls == pieces
    else:
        # a local directory has no content ETag: each object read back, a point per chunk
        chunks = [-(-s.size_bytes // READ_CHUNK) for s in sealed]
        assert len(read_backs) == len(sealed) and calls == [n + c for n, c in zip(pieces, chunks, strict=True)]
    assert all(s.tier is SegmentTier.REMOTE for s in engine.list_segments("n", 0)[:-1])
    records = read_all(engine)
    assert [(r.offset, r.value) for r in records] == [(i, value_of(i)) for i in range(COUNT)]


def test_an_upload_waits_for_appends_in_flight_and_still_finishes(
    engine: StorageAdapter, clock: ManualClock, waited: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an append in flight for the whole offload every give-way point waits for it, at most
    ``SLICE_WAIT_S`` each, and the offload completes."""
    fill_large(engine, clock)
    with append_in_flight(engine):
        result = engine.offload("n")
    assert result.segments_offloaded >= 2 and len(waited) >= 2 * 3 and all(waited)

    # No append in flight: the points are reached and wait for nothing.
    waited.clear()
    fill_large(engine, clock, "m")
    assert engine.offload("m").segments_offloaded >= 2
    assert waited and not any(waited)

    # The switch off (the bench's baseline): an append in flight is not waited for.
    waited.clear()
    fill_large(engine, clock, "p")
    monkeypatch.setattr(context, "GIVE_WAY_TO_APPENDS", False)
    with append_in_flight(engine):
        assert engine.offload("p").segments_offloaded >= 2
    assert waited == []


def test_a_rewrite_of_an_offloaded_segment_gives_way_to_appends_too(
    engine: StorageAdapter, clock: ManualClock, waited: list[bool]
) -> None:
    """Compaction re-uploads offloaded segments through the same upload, with the same give-way points."""
    engine.create_namespace("c", 1, policy(cleanup_policy="compact", min_cleanable_dirty_ratio=0.01, segment_ms=1000))
    for i in range(120):
        engine.append("c", 0, [record(i, timestamp=T0 + i)])  # 11 keys: most records superseded
    clock.set(T0 + 10_000)
    assert engine.offload("c").segments_offloaded > 3
    waited.clear()
    with append_in_flight(engine):
        rewritten = engine.compact("c", manual=True).segments_rewritten
    assert rewritten > 0 and len(waited) >= rewritten and all(waited)
    latest = {i % 11: i for i in range(120)}
    for k, i in latest.items():
        found = engine.read_key("c", 0, b"k%d" % k)
        assert found is not None and found.offset == i


def test_a_recall_gives_way_to_appends_between_the_chunks_it_downloads(
    engine: StorageAdapter, clock: ManualClock, waited: list[bool]
) -> None:
    fill_large(engine, clock)
    assert engine.offload("n").local_copies_dropped >= 2
    engine.update_namespace("n", policy(segment_bytes=11 << 20, local_retention_ms=None))
    waited.clear()
    with append_in_flight(engine):
        result = engine.recall("n")
    sealed = engine.list_segments("n", 0)[:-1]
    assert result.segments_recalled == len(sealed) and all(s.tier is SegmentTier.BOTH for s in sealed)
    # a point after each chunk downloaded (READ_CHUNK bytes at most), each waiting for the append in flight
    assert len(waited) == sum(-(-s.size_bytes // READ_CHUNK) for s in sealed) and all(waited)
    assert [(r.offset, r.value) for r in read_all(engine)] == [(i, value_of(i)) for i in range(COUNT)]
