"""The setups and observations of tests/node/test_node_arguments.py: each setup gives a trial's
namespace a known state, each observation reads an argument's effect from the answer or from the
node's state after it (a dry run leaves the state as it was)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from storage_engine.api import NewRecord, SegmentTier
from storage_engine.node_api.client import NodeClient
from storage_engine.policies.policy import NamespacePolicy
from tests.node.test_ttl_ingest import write_sst
from tests.storage_engine.tier_engine import policy as tiered_policy
from tests.support.processes import NodeProc


@dataclass
class Ctx:
    """One trial: the node, a client, and a namespace name nothing else uses."""

    node: NodeProc
    http: httpx.Client
    client: NodeClient
    ns: str
    memo: dict[str, Any] = field(default_factory=dict)


Setup = Callable[[Ctx], None]
Observe = Callable[[Ctx, httpx.Response], Any]


def nothing(ctx: Ctx) -> None:
    pass


def status_or(read: Observe) -> Observe:
    """``read`` of a successful answer; an error answer observes as its status and field."""

    def observe(ctx: Ctx, r: httpx.Response) -> Any:
        if r.status_code >= 400:
            return ("error", r.status_code, r.json().get("field"))
        return read(ctx, r)

    return observe


def answer(key: str) -> Observe:
    return status_or(lambda ctx, r: r.json()[key])


def count_of(key: str) -> Observe:
    return status_or(lambda ctx, r: len(r.json()[key]))


def first_offset(ctx: Ctx, r: httpx.Response) -> int:
    return int(r.json()["records"][0]["offset"])


def namespace(shards: int = 1, **policy: Any) -> Setup:
    def setup(ctx: Ctx) -> None:
        ctx.client.create_namespace(ctx.ns, shards, NamespacePolicy(**policy))

    return setup


def filled(n: int = 10, shards: int = 1, subscriptions: tuple[str, ...] = (), **policy: Any) -> Setup:
    """``n`` records per shard: value 100 bytes, tag ``t``, key ``k<i mod 3>``, timestamp ``1000 + 10 i``,
    appended one by one (a batch stays in one segment)."""

    def setup(ctx: Ctx) -> None:
        namespace(shards, **policy)(ctx)
        for shard, i in itertools.product(range(shards), range(n)):
            record = NewRecord(value=b"v" * 100, key=b"k%d" % (i % 3), tags=("t",), timestamp=1000 + 10 * i)
            ctx.client.append(ctx.ns, shard, [record])
        for name in subscriptions:
            ctx.client.create_subscription(ctx.ns, name)

    return setup


def expiring(expired: tuple[int, ...], kept: int = 1) -> Setup:
    """A namespace with ``expired[s]`` expired records on shard ``s`` and ``kept`` live ones on each."""

    def setup(ctx: Ctx) -> None:
        ctx.client.create_namespace(ctx.ns, len(expired))
        for shard, n in enumerate(expired):
            ctx.client.append(
                ctx.ns, shard, [NewRecord(value=b"gone", expire_at=1)] * n + [NewRecord(value=b"x")] * kept
            )

    return setup


def pending_expiry(ctx: Ctx, r: httpx.Response) -> int:
    """What a scan of the trial's namespace would still mark expired (a dry run leaves it all)."""
    return ctx.client.lifecycle_step(ctx.ns, "expire-scan", manual=True, dry_run=True).expired_records


def off_peak_elsewhere(then: Setup) -> Setup:
    """Off-peak hours twelve hours away, so only a manual step scans a namespace that is not urgent."""

    def setup(ctx: Ctx) -> None:
        ctx.memo["node_policy"] = ctx.client.node_policy()
        hour = (time.gmtime().tm_hour + 12) % 24
        ctx.client.set_node_policy({**ctx.memo["node_policy"], "off_peak_hours": f"{hour:02d}"})
        then(ctx)

    return setup


def restore_node_policy(ctx: Ctx) -> None:
    if "node_policy" in ctx.memo:
        ctx.client.set_node_policy(ctx.memo["node_policy"])


def stored(shard: int) -> Callable[[Ctx], int]:
    return lambda ctx: int(ctx.client.shard_stats(ctx.ns, shard)["record_count"])


COMPACTABLE = {"cleanup_policy": "compact", "segment_bytes": 4096, "min_cleanable_dirty_ratio": 0.1}


def keyed(shards: tuple[int, ...], n: int = 200) -> Setup:
    """``n`` records over 10 keys on each shard of ``shards`` (a compactable namespace of two shards)."""

    def setup(ctx: Ctx) -> None:
        ctx.client.create_namespace(ctx.ns, 2, NamespacePolicy(**COMPACTABLE))  # type: ignore[arg-type]
        for shard in shards:
            for i in range(n):
                ctx.client.append(ctx.ns, shard, [NewRecord(value=b"v%d" % i * 5, key=b"k%d" % (i % 10))])
        ctx.memo["stored"] = [stored(s)(ctx) for s in (0, 1)]

    return setup


def offloaded(ctx: Ctx) -> None:
    """A tiered namespace whose sealed segments are all remote only, then kept local by its policy."""
    ctx.client.create_namespace(ctx.ns, 1, tiered_policy())
    for i in range(120):
        ctx.client.append(ctx.ns, 0, [NewRecord(value=b"%d:" % i + b"v" * 200, key=b"k%d" % (i % 7))])
    while ctx.client.lifecycle_step(ctx.ns, "offload").more:
        pass
    ctx.client.update_namespace(ctx.ns, tiered_policy(local_retention_ms=None))
    ctx.memo["remote"] = remote_segments(ctx)
    assert ctx.memo["remote"] >= 3


def remote_segments(ctx: Ctx) -> int:
    return sum(s.tier is SegmentTier.REMOTE for s in ctx.client.list_segments(ctx.ns, 0))


def placed_sst(ctx: Ctx) -> None:
    """Four records, and an SST in the node's import directory expiring two of them."""
    filled(4)(ctx)
    info = ctx.client.ttl_index_info(ctx.ns)
    now = int(time.time() * 1000)
    write_sst(ctx.node.data_dir / "import" / f"{ctx.ns}.sst", [(now - 1, info["ns_id"], 0, o) for o in (0, 1)])


def segment_states(ctx: Ctx, r: httpx.Response) -> Any:
    return sorted({s["state"] for s in r.json()["segments"]})


def dead_lists(ctx: Ctx, r: httpx.Response) -> Any:
    return {str(s["dead"]) for s in r.json()["segments"]}


def past_first(ctx: Ctx, r: httpx.Response) -> bool:
    return bool(r.json()["segments"][0]["base_offset"] > 0)


def name_is_trials(ctx: Ctx, r: httpx.Response) -> bool:
    return bool(r.json()["name"] == ctx.ns)


def created_with_shards(ctx: Ctx, r: httpx.Response) -> Any:
    return (r.status_code, r.json()["shards"])


def key_offset(ctx: Ctx, r: httpx.Response) -> Any:
    return r.json()["record"]["offset"]


def shard_0_untouched(ctx: Ctx, r: httpx.Response) -> bool:
    return stored(0)(ctx) == ctx.memo["stored"][0]


def plan_effect(ctx: Ctx, r: httpx.Response) -> Any:
    return (shard_0_untouched(ctx, r), stored(1)(ctx) < ctx.memo["stored"][1])


def remote_untouched(ctx: Ctx, r: httpx.Response) -> bool:
    return remote_segments(ctx) == ctx.memo["remote"]


def backlog_subscriptions(ctx: Ctx, r: httpx.Response) -> Any:
    return sorted({b["subscription"] for b in r.json()["backlog"]})


FILLED, SEGMENTED = filled(), filled(30, segment_bytes=1024)
SUBSCRIBED = filled(5, subscriptions=("sub",))
MANUAL = {"manual": True}
OFF_PEAK = off_peak_elsewhere(expiring((2,), kept=8))  # 20 % expired: not urgent
