"""Verification of the object-store tier, part of :meth:`StorageAdapter.verify` for the ``segment``
adapter: what the catalog says is uploaded is there and intact, and nothing else is.

Per shard, for every live segment whose tier is *both* or *remote*:

- its data object exists and has the segment's size, and its checksum (read back whole: verify is
  a diagnostic) is the one its manifest records;
- its manifest exists, parses (:mod:`storage_engine.tier.manifest`) and describes this segment:
  base and last offset, generation, size, record count;
- a *remote* segment has no local file left; a *both* one still has its file.

And every object under the shard's prefix belongs to a live segment's current generation, an
*uploading* one included (an interrupted offload that the next one overwrites), or to its stale
generation (a rewrite's upload abandoned by a crash, or the generation a rewrite replaced: named
in the metadata and deleted by the next tier step, :mod:`storage_engine.tier.rewrite`): anything
else is a leftover ("stray object"), which a crash-safe offload, rewrite or deletion never leaves.
"""

from __future__ import annotations

from collections.abc import Sequence

from storage_engine.errors import ObjectMissingError, TierError
from storage_engine.segment.meta import SegmentMeta, TierState
from storage_engine.segment.segment import file_name
from storage_engine.segment.tiered_log import TieredShardLog
from storage_engine.tier.context import ShardTier
from storage_engine.tier.fetch import fetch_verified
from storage_engine.tier.layout import parse_key
from storage_engine.tier.manifest import Manifest, ManifestError
from storage_engine.tier.upload import TierVerifyError


def manifest_mismatches(hooks: ShardTier, meta: SegmentMeta, manifest: Manifest) -> list[str]:
    """Where ``manifest`` does not describe ``meta``'s segment (verify, and a recall before it
    trusts the manifest's checksum)."""
    expected = {
        "base_offset": meta.base_offset,
        "last_offset": meta.last_offset,
        "generation": f"{meta.tier_generation:016x}",
        "size_bytes": meta.size_bytes,
        "record_count": meta.record_count,
        "data_object": hooks.data_key(meta),
    }
    return [
        f"manifest {name} is {getattr(manifest, name)!r}, expected {value!r}"
        for name, value in expected.items()
        if getattr(manifest, name) != value
    ]


def _check_segment(hooks: ShardTier, route: str, meta: SegmentMeta, has_file: bool) -> list[str]:
    tier = hooks.tier
    data_key, manifest_key = hooks.data_key(meta), hooks.manifest_key(meta)
    where = f"{route} segment {meta.base_offset} ({meta.tier.public.value})"
    problems: list[str] = []
    if meta.tier is TierState.REMOTE and has_file:
        problems.append(f"{where}: a local file is left")
    if meta.tier is TierState.BOTH and not has_file:
        problems.append(f"{where}: its local file is missing")
    try:
        manifest = Manifest.from_bytes(manifest_key, tier.get(manifest_key))
    except ObjectMissingError:
        return [*problems, f"{where}: manifest {manifest_key} is missing"]
    except (ManifestError, TierError) as exc:
        return [*problems, f"{where}: {exc}"]
    problems += [f"{where}: {p}" for p in manifest_mismatches(hooks, meta, manifest)]
    try:  # the check a recall and Spark make before they trust a download
        fetch_verified(tier, data_key, manifest, meta.size_bytes, _discard)
    except ObjectMissingError:
        problems.append(f"{where}: data object {data_key} is missing")
    except (TierError, TierVerifyError, ValueError) as exc:  # ValueError: a checksum of no known algorithm
        problems.append(f"{where}: {exc}")
    return problems


def _discard(_chunk: object) -> None:
    return None


def verify_tier(logs: Sequence[TieredShardLog], enabled: bool) -> tuple[int, list[str]]:
    """``(objects checked, problems)`` over these shards (see the module docstring). The object
    store is not contacted for a shard with nothing in it unless its namespace has remote
    storage ``enabled`` (then objects of segments deleted since must be gone too)."""
    checked = 0
    problems: list[str] = []
    for log in logs:
        hooks = log.tier
        if not isinstance(hooks, ShardTier):
            continue
        with log.reading() as view:
            metas: list[SegmentMeta] = view.metas()[:-1]
        wanted: set[tuple[int, int]] = set()
        for meta in metas:
            if meta.tier is TierState.LOCAL:
                continue
            wanted.add((meta.base_offset, meta.tier_generation))
            if meta.stale_generation:  # a rewrite's other generation, deleted by the next tier step
                wanted.add((meta.base_offset, meta.stale_generation))
            if meta.tier is TierState.UPLOADING:
                continue  # objects may be partial until the next offload finishes them
            has_file = (log.directory / file_name(meta.base_offset)).exists()
            problems += _check_segment(hooks, log.route, meta, has_file)
            checked += 2
        if not wanted and not enabled:
            continue
        try:
            listed = hooks.tier.list(hooks.prefix)
        except TierError as exc:
            problems.append(f"{log.route}: cannot list {hooks.prefix}: {exc}")
            continue
        for obj in listed:
            parsed = parse_key(hooks.prefix, obj.key)
            if parsed is None or parsed not in wanted:
                problems.append(f"{log.route}: stray object {obj.key} ({obj.size} bytes) belongs to no segment")
    return checked, problems
