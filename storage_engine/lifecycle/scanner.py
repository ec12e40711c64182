"""Layer 2 of TTL (DESIGN §3): the TTL-index scan.

The scan walks the TTL index (entries keyed by ``expire_at``) from its start up to now and
applies the per-entry step to each due entry's shard (:meth:`LifecycleShard.expire_entries`):
the record is marked dead and its index entries go, in one WriteBatch. Per namespace or
node-wide (one walk for every namespace), capped by ``max_delete_per_scan``, paced by
``delete_rate_per_s`` and sliced so appends never wait on it.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from storage_engine.api import LifecycleResult
from storage_engine.errors import InvalidArgumentError, StorageError
from storage_engine.lifecycle.runtime import LifecycleRuntime
from storage_engine.lifecycle.shards import LifecycleShard, TTLEntry
from storage_engine.policies.policy import NamespacePolicy
from storage_engine.rules.cleaning import in_off_peak
from storage_engine.rules.pacing import Slices
from storage_engine.rules.work import sum_work, would_expire


class TTLScanner:
    def __init__(self, rt: LifecycleRuntime) -> None:
        self._rt = rt

    def expire_scan(
        self,
        namespace: str | None,
        shard: int | None = None,
        limit: int | None = None,
        *,
        manual: bool = False,
        dry_run: bool = False,
    ) -> LifecycleResult:
        """Layer 2 on one namespace (or one shard), or with ``namespace=None`` a node-wide sweep.

        The sweep walks the TTL index once for every namespace (its keys lead with
        ``expire_at``, so per-namespace scans each walk past the others' due entries:
        namespaces × entries; the sweep costs the due entries once). Namespaces outside
        off-peak hours and not urgent are skipped as a per-namespace scan would skip
        them; the cap is ``limit`` or the largest ``max_delete_per_scan`` of the
        namespaces, batches follow the built-in ``scan_batch_size``.

        Appends never wait on the scan (DESIGN §3 "Timeliness"): it runs in slices of
        about half a millisecond (:class:`~storage_engine.rules.pacing.Slices`), applies a
        batch to a shard in chunks of at most a few hundred entries (one shard lock hold
        and one WriteBatch each), and between slices gives the interpreter to whoever
        waits for it, or, while appends are in flight, waits until they have finished.

        ``dry_run`` counts the due entries instead (:meth:`_count_due`).
        """
        t0 = time.perf_counter()
        self._rt.check_limit(limit)
        now = self._rt.clock.now_ms()
        if namespace is None:
            if shard is not None:
                raise InvalidArgumentError("shard", "needs a namespace")
            targets = self._targets(now, manual)
            caps = [policy.max_delete_per_scan for policy, _ in targets.values()]
            cap = min(limit or max(caps, default=1), max(caps, default=1))
            batch_size = NamespacePolicy().scan_batch_size
        else:
            policy, shards = self._rt.select(namespace, shard)
            if not manual and not in_off_peak(now, self._rt.node_policy) and not self._rt.urgent(policy, shards):
                # Outside off-peak hours: call again later (a dry run says so once: it never asks to be repeated).
                return self._rt.result("expire_scan", namespace, shard, t0, skipped="off_peak", more=not dry_run)
            cap = policy.max_delete_per_scan if limit is None else min(limit, policy.max_delete_per_scan)
            targets = {namespace: (policy, {s.shard: s for s in shards})}
            batch_size = policy.scan_batch_size
        totals: dict[str, Any] = {}
        scanned = [0]
        done = 0
        more = False
        batch: list[TTLEntry] = []
        by_index = {(name, index): s for name, (_, shards_of) in targets.items() for index, s in shards_of.items()}
        if dry_run:
            self._rt.seal_idle(((p, shards_of.values()) for p, shards_of in targets.values()), now, totals, dry_run)
            changed: set[str] = set()
            sum_work(totals, would_expire(self._count_due(namespace, shard, now, by_index, scanned, changed)))
            totals["namespaces_changed"] = changed
            return self._rt.result("expire_scan", namespace, shard, t0, **{**totals, "scanned": scanned[0]})
        slices = Slices(self._rt.foreground)
        seen = 0
        stop: TTLEntry | None = None  # the first entry left for a later scan
        with self._rt.ops:
            self._rt.seal_idle(((p, shards_of.values()) for p, shards_of in targets.values()), now, totals)
            token = self._rt.source.ttl_scan_begin(list(targets) if shard is None else [])
            try:
                for entry in self._rt.source.ttl_candidates(namespace, shard, now, scanned):
                    seen += 1
                    if not seen & 31:  # the walk itself is sliced too
                        slices.check()
                    if (entry.namespace, entry.shard) not in by_index:
                        continue  # a namespace the sweep skips (not off-peak, not urgent) or deleted meanwhile
                    if done + len(batch) >= cap:
                        more = True
                        stop = entry
                        break
                    batch.append(entry)
                    if len(batch) >= batch_size:
                        if not self._expire_batch(batch, by_index, now, totals, slices):
                            more = True
                            stop = batch[0]
                            break
                        done += len(batch)
                        batch = []
                if batch:
                    if self._expire_batch(batch, by_index, now, totals, slices):
                        done += len(batch)
                    else:
                        more = True
                        stop = batch[0]
            except BaseException:
                self._rt.source.ttl_scan_end(token, None, now, False)
                raise
            self._rt.source.ttl_scan_end(token, stop, now, True)
        totals["scanned"] = scanned[0]
        result = self._rt.result("expire_scan", namespace, shard, t0, more=more, **totals)
        seconds = result.duration_ms / 1000
        self._rt.counters.add_many(
            {
                "ttl_scan_runs_total": 1,
                "ttl_scan_entries_scanned_total": result.scanned,
                "ttl_scan_expired_records_total": result.expired_records,
                "index_entries_deleted_total": result.index_entries_deleted,
                "ttl_scan_duration_seconds_total": seconds,
                "ttl_scan_pauses_total": slices.pauses,
                "ttl_scan_waits_total": slices.waits,
            }
        )
        self._rt.counters.set_many(  # gauges of the last run
            {
                "ttl_scan_last_duration_seconds": seconds,
                "ttl_scan_last_expired_records": result.expired_records,
                "ttl_scan_last_delete_rate_per_second": result.expired_records / seconds if seconds else 0.0,
            }
        )
        return result

    def _count_due(
        self,
        namespace: str | None,
        shard: int | None,
        now: int,
        shards: Collection[tuple[str, int]],
        scanned: list[int],
        changed: set[str],
    ) -> int:
        """How many TTL-index entries of ``shards`` are due at ``now`` (a dry run's scan: the
        same walk, sliced the same way, with no cap and nothing deleted); their namespaces go in ``changed``."""
        slices = Slices(self._rt.foreground)
        due = 0
        for seen, entry in enumerate(self._rt.source.ttl_candidates(namespace, shard, now, scanned), 1):
            if not seen & 31:
                slices.check()
            if (entry.namespace, entry.shard) in shards:
                due += 1
                changed.add(entry.namespace)
        return due

    def _targets(self, now: int, manual: bool) -> dict[str, tuple[NamespacePolicy, dict[int, LifecycleShard]]]:
        """Every namespace a node-wide step may work on now: off-peak, urgent, or a manual request."""
        peak_ok = manual or in_off_peak(now, self._rt.node_policy)
        targets = {}
        for name in self._rt.source.namespace_names():
            try:
                policy, shards = self._rt.source.lifecycle_namespace(name)
            except StorageError:
                continue  # deleted meanwhile
            if peak_ok or self._rt.urgent(policy, shards):
                targets[name] = (policy, {s.shard: s for s in shards})
        return targets

    def _expire_batch(
        self,
        batch: list[TTLEntry],
        shards: dict[tuple[str, int], LifecycleShard],
        now: int,
        totals: dict[str, Any],
        slices: Slices,
    ) -> bool:
        """One batch (paced by ``delete_rate_per_s``), applied a chunk per shard lock hold.

        Each entry's operations stay in one WriteBatch (DESIGN §3); a chunk is
        ``slices.chunk()`` entries of one shard, and the scan may pause after each.
        """
        if not self._rt.delete_bucket.take(len(batch)):
            return False
        groups: dict[tuple[str, int], list[TTLEntry]] = {}
        for e in batch:
            groups.setdefault((e.namespace, e.shard), []).append(e)
        for index, entries in groups.items():
            shard = shards[index]
            i = 0
            while i < len(entries):
                n = slices.chunk()
                work = shard.expire_entries(entries[i : i + n], now)
                i += n
                work.scanned = 0
                sum_work(totals, work)
                if work.expired_records or work.index_entries_deleted:  # a node-wide scan names whom it changed
                    totals.setdefault("namespaces_changed", set()).add(index[0])
                slices.check()
        return True
