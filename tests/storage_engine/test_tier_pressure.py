"""Disk pressure with tiered storage (issue 19, DESIGN §3 "Tiers"): above ``disk_max_used_ratio``
the file cleaner offloads before it deletes; above ``disk_clean_forcibly_ratio`` it drops local
copies of segments already in the object store first, and deletes data that exists nowhere else
only when forced cleaning is enabled; a segment only in the object store never counts as freeing
local disk; an unreachable store deletes nothing locally. Segment engines on a disk quota
(:class:`~tests.storage_engine.lifecycle_util.QuotaEngines`; the tier is the default directory
beside the data directory, outside the quota), the clock injected."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from storage_engine.adapters.segment import SegmentAdapter
from storage_engine.api import NewRecord, SegmentTier
from storage_engine.clock import ManualClock
from storage_engine.errors import TierError
from storage_engine.policies.policy import HOUR_MS, NodePolicy
from storage_engine.rules.cleaning import DELETE, DROP_LOCAL, clean_action, cleanable_prefix
from storage_engine.tier.store import ObjectTier
from tests.storage_engine.lifecycle_util import QuotaEngines, make_ns, read_all

BIG = b"b" * 60_000  # four records fill a 256 KiB segment
SEGMENT_BYTES = 256 * 1024
RESERVED = 100 * HOUR_MS  # no file is old enough to be "expired" for the cleaner here
CAPACITY = 16 << 20


@pytest.fixture
def engines(tmp_path: Path, clock: ManualClock) -> Iterator[QuotaEngines]:
    e = QuotaEngines(tmp_path / "data", clock, capacity=CAPACITY, reserved_ms=RESERVED)
    yield e
    e.close()


def fill(e: SegmentAdapter, name: str, records: int = 24, **policy: object) -> str:
    ns = make_ns(e, name, segment_bytes=SEGMENT_BYTES, **policy)
    for _ in range(records):
        e.append(ns, 0, [NewRecord(BIG)])
    return ns


def tiers(e: SegmentAdapter, ns: str) -> list[SegmentTier]:
    return [s.tier for s in e.list_segments(ns, 0)[:-1]]


def watermarks(e: SegmentAdapter, max_used: float, forcibly: float, *, forced: bool) -> None:
    e.set_node_policy(
        replace(
            e.node_policy(),
            disk_max_used_ratio=max_used,
            disk_clean_forcibly_ratio=forcibly,
            disk_warning_ratio=0.99,
            clean_forcibly_enabled=forced,
        )
    )


def test_above_max_used_the_cleaner_offloads_before_it_deletes(engines: QuotaEngines) -> None:
    e = engines()
    ns = fill(e, "tiered", remote_storage_enabled=True)
    plain = fill(e, "plain")
    used = e.check_disk().used_ratio
    watermarks(e, used / 2, 0.98, forced=True)
    result = e.clean_files()
    assert result.segments_offloaded == len(tiers(e, ns)) == 5 and result.bytes_offloaded > 0
    assert tiers(e, ns) == [SegmentTier.BOTH] * 5  # uploaded, local copies kept (local retention: all)
    assert result.segments_deleted == 0 and result.forced_deletes == 0  # nothing expired, nothing forced
    assert len(read_all(e, ns)) == 24 and len(read_all(e, plain)) == 24
    assert e.verify(ns).ok


def test_above_clean_forcibly_local_copies_of_offloaded_segments_go_first(engines: QuotaEngines) -> None:
    e = engines()
    ns = fill(e, "tiered", remote_storage_enabled=True)
    plain = fill(e, "plain")
    e.offload(ns)
    assert tiers(e, ns) == [SegmentTier.BOTH] * 5
    used = e.check_disk()
    # back at the watermark once about three local copies are gone
    target = (used.used_bytes - 3 * SEGMENT_BYTES + SEGMENT_BYTES // 2) / used.capacity_bytes
    watermarks(e, target, target, forced=True)
    result = e.clean_files()
    assert result.local_copies_dropped == 3 and result.segments_deleted == 0
    assert tiers(e, ns) == [SegmentTier.REMOTE] * 3 + [SegmentTier.BOTH] * 2  # the oldest copies went
    assert result.bytes_reclaimed == result.local_bytes_dropped > 3 * len(BIG)
    assert [s.tier for s in e.list_segments(plain, 0)[:-1]] == [SegmentTier.LOCAL] * 5  # untouched
    assert len(read_all(e, ns)) == 24 and len(read_all(e, plain)) == 24  # nothing lost
    assert e.verify(ns).ok


def test_copies_go_first_even_without_forced_cleaning_and_local_only_data_stays(engines: QuotaEngines) -> None:
    e = engines()
    ns = fill(e, "tiered", remote_storage_enabled=True)
    plain = fill(e, "plain")
    e.offload(ns)
    watermarks(e, 0.001, 0.001, forced=False)  # far above: everything would go if it could
    result = e.clean_files()
    assert result.local_copies_dropped == 5 and result.segments_deleted == 0 and result.forced_deletes == 0
    assert tiers(e, ns) == [SegmentTier.REMOTE] * 5
    assert len(read_all(e, ns)) == 24 and len(read_all(e, plain)) == 24
    assert e.clean_files().local_copies_dropped == 0  # remote-only segments free nothing more


def test_remote_only_segments_never_count_as_freeing_local_disk(engines: QuotaEngines) -> None:
    e = engines(file_delete_delay_ms=0)  # the dropped local copies leave the disk at once
    ns = fill(e, "tiered", remote_storage_enabled=True, local_retention_ms=0)
    engines.clock.advance(1)
    e.offload(ns)
    assert tiers(e, ns) == [SegmentTier.REMOTE] * 5  # the oldest data of the node, only in the store
    plain = fill(e, "plain")
    used = e.check_disk()
    target = (used.used_bytes - 2 * SEGMENT_BYTES + SEGMENT_BYTES // 2) / used.capacity_bytes
    watermarks(e, target, target, forced=True)
    result = e.clean_files()
    # forced cleaning deletes the oldest *local* files: the plain namespace's, never the remote ones
    assert result.forced_deletes == result.segments_deleted == 2
    assert tiers(e, ns) == [SegmentTier.REMOTE] * 5 and len(read_all(e, ns)) == 24
    assert len(read_all(e, plain)) == 24 - 2 * 4


def test_local_only_data_of_a_tiered_namespace_is_deleted_only_when_forced(
    engines: QuotaEngines, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreachable(self: ObjectTier, key: str, data: object) -> None:
        raise TierError(self.uri, key, "put", "connection refused")

    monkeypatch.setattr(ObjectTier, "put", unreachable)
    e = engines()
    ns = fill(e, "tiered", remote_storage_enabled=True)
    watermarks(e, 0.001, 0.001, forced=False)
    result = e.clean_files()  # the store unreachable: the cleaner goes on, deletes nothing
    assert (result.segments_offloaded, result.segments_deleted, result.local_copies_dropped) == (0, 0, 0)
    assert e.stats().counters["tier_offload_failures_total"] >= 1
    assert all(t is not SegmentTier.REMOTE for t in tiers(e, ns)) and len(read_all(e, ns)) == 24
    again = e.clean_files()  # backing off: no upload tried, still nothing deleted
    assert again.segments_deleted == 0 and e.stats().counters["tier_offload_deferred_total"] >= 1
    watermarks(e, 0.001, 0.001, forced=True)
    forced = e.clean_files()  # forced cleaning enabled: data that exists nowhere else may go now
    assert forced.forced_deletes > 0


def test_clean_action_and_the_cleanable_prefix(engines: QuotaEngines) -> None:
    e = engines()
    ns = fill(e, "tiered", remote_storage_enabled=True, local_retention_ms=0)
    engines.clock.advance(1)
    e.offload(ns, limit=2)
    segments = e.list_segments(ns, 0)
    assert [s.tier for s in segments[:-1]] == [SegmentTier.REMOTE] * 2 + [SegmentTier.LOCAL] * 3
    node = NodePolicy(file_reserved_ms=RESERVED)
    now = e.clock.now_ms()
    assert [s.base_offset for s in cleanable_prefix(segments, node, now, forced=True)] == [8, 12, 16]
    local = segments[2]
    both = replace(local, tier=SegmentTier.BOTH)
    old = now + RESERVED
    assert clean_action(both, node, now, forced=False, tiered=True) is None
    assert clean_action(both, node, old, forced=False, tiered=True) == DROP_LOCAL
    assert clean_action(both, node, now, forced=True, tiered=False) == DROP_LOCAL
    assert clean_action(local, node, old, forced=False, tiered=True) is None  # exists nowhere else
    assert clean_action(local, node, now, forced=True, tiered=True) == DELETE
    assert clean_action(local, node, old, forced=False, tiered=False) == DELETE


def test_offload_lag_and_bytes_by_tier_as_gauges(engines: QuotaEngines) -> None:
    e = engines(file_delete_delay_ms=0)
    ns = fill(e, "tiered", remote_storage_enabled=True, local_retention_ms=0)
    fill(e, "plain")  # not offloaded, never lagging
    written = e.clock.now_ms()
    engines.clock.advance(5000)
    gauges = e.stats().counters
    assert gauges["tier_offload_pending_segments"] == 5 and gauges["tier_offload_lag_seconds"] == 5.0
    assert gauges["tier_remote_bytes"] == gauges["tier_remote_only_bytes"] == 0
    local_before = gauges["tier_local_bytes"]
    e.offload(ns, limit=2)
    gauges = e.stats().counters
    assert gauges["tier_offload_pending_segments"] == 3
    assert gauges["tier_offload_lag_seconds"] == (e.clock.now_ms() - written) / 1000
    moved = sum(s.size_bytes for s in e.list_segments(ns, 0)[:2])
    assert gauges["tier_remote_bytes"] == gauges["tier_remote_only_bytes"] == moved
    assert gauges["tier_local_bytes"] == local_before - moved
    e.offload(ns)
    assert e.stats().counters["tier_offload_lag_seconds"] == 0


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("tier_unavailable", 503),
        ("tier_verify_failed", 502),
        ("tier_object_missing", 500),
        ("tier_manifest_invalid", 500),
    ],
)
def test_tier_errors_have_an_http_status_and_a_title(code: str, status: int) -> None:
    from storage_engine.errors import ObjectMissingError
    from storage_engine.node_api.problem import TITLES
    from storage_engine.node_api.wire import problem_for, status_for
    from storage_engine.tier.manifest import ManifestError
    from storage_engine.tier.upload import TierVerifyError

    errors = {
        "tier_unavailable": TierError("s3://b", "k", "put", "connection refused"),
        "tier_verify_failed": TierVerifyError("k", "the size", 1, 2),
        "tier_object_missing": ObjectMissingError("s3://b", "k", "get"),
        "tier_manifest_invalid": ManifestError("k", "not JSON"),
    }
    exc = errors[code]
    assert exc.code == code and status_for(exc) == status
    body = problem_for(exc, "/v1/x")
    assert (body["status"], body["title"]) == (status, TITLES[code]) and body["key"] == "k"


def test_an_unreachable_s3_store_fails_fast_backs_off_and_leaves_local_data_alone(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.storage_engine.tier_engine import engine_for
    from tests.storage_engine.tier_util import free_ports

    [port] = free_ports(1)  # nothing listens there
    monkeypatch.setenv("TIER_S3_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    e = engine_for(tmp_path / "data", "s3://nowhere/tier", clock)
    try:
        ns = make_ns(e, "t", segment_bytes=4096, remote_storage_enabled=True, local_retention_ms=0)
        for i in range(60):
            e.append(ns, 0, [NewRecord(b"%d" % i + b"v" * 200)])
        clock.advance(1)
        with pytest.raises(TierError) as failed:
            e.offload(ns)
        assert failed.value.code == "tier_unavailable"
        for delay in (1000, 2000, 4000):  # doubling: deferred until each retry time, then tried again
            assert e.offload(ns).skipped == "backoff"
            clock.advance(delay)
            with pytest.raises(TierError):
                e.offload(ns)
        counters = e.stats().counters
        assert counters["tier_offload_retries_total"] == 3 and counters["tier_offload_deferred_total"] == 3
        assert all(s.tier is not SegmentTier.REMOTE for s in e.list_segments(ns, 0))
        assert [r.value for r in read_all(e, ns)] == [b"%d" % i + b"v" * 200 for i in range(60)]
        assert e.stats().counters["tier_offload_lag_seconds"] > 0
    finally:
        e.close()
