"""Helpers for the operator's story (tests/integration/test_operator_story.py).

- :class:`Cluster` is the story's ground truth: every record the story produced, where it lives
  (shard, segment, offset) and what each lifecycle step does to it, counted by hand from DESIGN §3
  (effective expiry = min(expire_at, timestamp + ttl_ms); reclaim drops wholly expired sealed
  segments and rewrites sealed ones more than half expired; compaction keeps the latest record per
  key; backlog = end − cursor − 1 over stored offsets, live = unexpired records after the cursor).
  It never asks the system anything.
- ``read_*`` read the figures a page shows (by data-testid) and parse them.
- :func:`settle` reloads a page until what it shows equals the ground truth, or fails with both.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from playwright.sync_api import APIResponse, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests.support import browser

ROOT = Path(__file__).resolve().parents[2]


def now_ms() -> int:
    return int(time.time() * 1000)


# -- ground truth ----------------------------------------------------------------------------------------------
@dataclass
class Rec:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    expire_at: int | None = None


@dataclass
class Seg:
    base: int
    records: list[Rec] = field(default_factory=list)
    sealed: bool = False
    first_timestamp: int | None = None  # the first record's time: a segment's age for rolling


@dataclass
class ShardModel:
    segments: list[Seg] = field(default_factory=lambda: [Seg(0)])
    end: int = 0
    cursors: dict[str, int] = field(default_factory=dict)

    @property
    def active(self) -> Seg:
        return self.segments[-1]

    @property
    def log_start(self) -> int:
        return self.segments[0].base

    def records(self) -> list[Rec]:
        return [r for s in self.segments for r in s.records]


class NamespaceModel:
    def __init__(
        self,
        name: str,
        shards: int,
        *,
        ttl_ms: int | None = None,
        segment_ms: int = 7 * 24 * 3_600_000,
        compacted: bool = False,
        retention_ms: int | None = 7 * 24 * 3_600_000,
    ) -> None:
        self.name = name
        self.ttl_ms = ttl_ms
        self.retention_ms = retention_ms
        self.segment_ms = segment_ms
        self.compacted = compacted
        self.shards = [ShardModel() for _ in range(shards)]
        self.subscriptions: list[str] = []

    # The rules, from DESIGN §3 -------------------------------------------------------------
    def expiry(self, r: Rec) -> int | None:
        """min(expire_at, timestamp + ttl_ms), either side absent = never."""
        by_ttl = None if self.ttl_ms is None else r.timestamp + self.ttl_ms
        if r.expire_at is None:
            return by_ttl
        return r.expire_at if by_ttl is None else min(r.expire_at, by_ttl)

    def expired(self, r: Rec, now: int) -> bool:
        e = self.expiry(r)
        return e is not None and e <= now

    def wholly_expired(self, seg: Seg, now: int) -> bool:
        return bool(seg.records) and all(self.expired(r, now) for r in seg.records)

    def append(self, shard: int, batch: list[dict[str, Any]]) -> list[Rec]:
        """Offsets are dense; the active segment rolls before a batch whose newest record is more than
        ``segment_ms`` younger than the segment's first record (Kafka's rule, DESIGN §2)."""
        s = self.shards[shard]
        newest = max(r["timestamp"] for r in batch)
        active = s.active
        if active.first_timestamp is not None and newest - active.first_timestamp > self.segment_ms:
            active.sealed = True
            s.segments.append(Seg(s.end))
        active = s.active
        out = []
        for r in batch:
            rec = Rec(s.end, r["timestamp"], r.get("key"), r.get("value"), r.get("expire_at"))
            if active.first_timestamp is None:
                active.first_timestamp = rec.timestamp
            active.records.append(rec)
            out.append(rec)
            s.end += 1
        return out

    def seal_idle(self, now: int) -> None:
        """A lifecycle step seals an active segment older than segment_ms or wholly expired (idle shards)."""
        for s in self.shards:
            a = s.active
            if a.records and (now - a.first_timestamp > self.segment_ms or self.wholly_expired(a, now)):  # type: ignore[operator]
                a.sealed = True
                s.segments.append(Seg(s.end))

    def drop_wholly_expired(self, now: int) -> int:
        dropped = 0
        for s in self.shards:
            keep = [g for g in s.segments if not (g.sealed and self.wholly_expired(g, now))]
            dropped += len(s.segments) - len(keep)
            s.segments = keep
        return dropped

    def due_reclaim(self, now: int) -> int:
        """What the deadline-driven reclaim does on its own: whole expired segments leave."""
        self.seal_idle(now)
        return self.drop_wholly_expired(now)

    def retention(self, now: int) -> int:
        """Kafka's time rule, as the deadline-driven retention sweep applies it: from the oldest segment,
        drop those whose newest record is older than retention_ms, stopping at the first that is not;
        when every segment goes (the active one too), an empty active segment keeps the end offset."""
        if self.compacted or self.retention_ms is None:
            return 0
        dropped = 0
        for s in self.shards:
            count = 0
            for g in s.segments:
                if not g.records or now - max(r.timestamp for r in g.records) <= self.retention_ms:
                    break
                count += 1
            if count == len(s.segments):
                s.segments.append(Seg(s.end))
            s.segments = s.segments[count:]
            dropped += count
        return dropped

    def reclaim(self, now: int, *, dry_run: bool = False) -> dict[str, int]:
        """Manual reclamation: drop wholly expired sealed segments, rewrite sealed segments whose
        expired fraction passes reclaim_dead_ratio (0.5) without their expired records. A dry run
        counts the same on a copy and changes nothing."""
        if dry_run:
            return copy.deepcopy(self).reclaim(now)
        self.seal_idle(now)
        counts = {"segments_deleted": 0, "segments_rewritten": 0, "records_removed": 0}
        for s in self.shards:
            for g in list(s.segments):
                if not g.sealed or not g.records:
                    continue
                gone = [r for r in g.records if self.expired(r, now)]
                if len(gone) == len(g.records):
                    counts["segments_deleted"] += 1
                    counts["records_removed"] += len(gone)
                    s.segments.remove(g)
                elif len(gone) / len(g.records) > 0.5:
                    counts["segments_rewritten"] += 1
                    counts["records_removed"] += len(gone)
                    g.records = [r for r in g.records if r not in gone]
        return counts

    def compact(self, now: int) -> dict[str, int]:
        """Key compaction of the sealed segments: keep each key's latest record (a tombstone too,
        within its 24 h delete horizon), drop the superseded ones."""
        self.seal_idle(now)
        counts = {"segments_rewritten": 0, "records_removed": 0}
        for s in self.shards:
            sealed = [g for g in s.segments if g.sealed]
            latest: dict[bytes | None, int] = {}
            for g in sealed:
                for r in g.records:
                    latest[r.key] = r.offset
            for g in sealed:
                kept = [r for r in g.records if latest[r.key] == r.offset and not self.expired(r, now)]
                if len(kept) != len(g.records):
                    counts["segments_rewritten"] += 1
                    counts["records_removed"] += len(g.records) - len(kept)
                    g.records = kept
        return counts

    def subscribe(self, name: str) -> None:
        """A subscription at earliest: every shard's cursor before the log start."""
        self.subscriptions.append(name)
        for s in self.shards:
            s.cursors[name] = s.log_start - 1

    def ack(self, name: str, shard: int, offset: int) -> None:
        self.shards[shard].cursors[name] = offset

    def visible_after(self, name: str, shard: int, now: int) -> list[Rec]:
        s = self.shards[shard]
        return [r for r in s.records() if r.offset > s.cursors[name] and not self.expired(r, now)]

    # Figures --------------------------------------------------------------------------------
    def shard_figures(self, i: int, now: int) -> dict[str, Any]:
        s = self.shards[i]
        recs = s.records()
        expired = sum(self.expired(r, now) for r in recs)
        messages = sum(s.end - max(s.cursors[n] + 1, s.log_start) for n in self.subscriptions)
        live = sum(len(self.visible_after(n, i, now)) for n in self.subscriptions)
        return {
            "log_start": s.log_start,
            "end": s.end,
            "records": len(recs),
            "live": len(recs) - expired,
            "expired": expired,
            "expired_pct": pct(expired, len(recs)),
            "segments": len(s.segments),
            "backlog": messages,  # summed over the subscriptions: 0 without any
            "backlog_live": live,
        }

    def figures(self, now: int) -> dict[str, Any]:
        shards = [self.shard_figures(i, now) for i in range(len(self.shards))]
        records = sum(f["records"] for f in shards)
        expired = sum(f["expired"] for f in shards)
        return {
            "records": records,
            "live": records - expired,
            "expired": expired,
            "expired_pct": pct(expired, records),
            "segments": sum(f["segments"] for f in shards),
            "backlog": sum(f["backlog"] for f in shards),
            "backlog_live": sum(f["backlog_live"] for f in shards),
            "shards": shards,
        }

    def segment_rows(self, now: int) -> list[dict[str, Any]]:
        rows = []
        for i, s in enumerate(self.shards):
            for g in s.segments:
                expired = sum(self.expired(r, now) for r in g.records)
                rows.append(
                    {
                        "shard": i,
                        "base": g.base,
                        "state": "sealed" if g.sealed else "active",
                        "records": len(g.records),
                        "live": len(g.records) - expired,
                        "expired_pct": pct(expired, len(g.records)),
                    }
                )
        return rows

    def subscription_figures(self, name: str, now: int) -> dict[str, Any]:
        shards = []
        for i, s in enumerate(self.shards):
            shards.append(
                {
                    "cursor": s.cursors[name],
                    "end": s.end,
                    "messages": s.end - max(s.cursors[name] + 1, s.log_start),
                    "live": len(self.visible_after(name, i, now)),
                }
            )
        return {
            "messages": sum(x["messages"] for x in shards),
            "live": sum(x["live"] for x in shards),
            "shards": shards,
        }


class Cluster:
    """The story's namespaces; the cluster's figures are their sums (the demo namespaces stay empty)."""

    def __init__(self, *namespaces: NamespaceModel) -> None:
        self.namespaces = {n.name: n for n in namespaces}

    def __getitem__(self, name: str) -> NamespaceModel:
        return self.namespaces[name]

    def add(self, namespace: NamespaceModel) -> None:
        self.namespaces[namespace.name] = namespace

    def remove(self, name: str) -> None:
        del self.namespaces[name]

    def at(self, now: int) -> Cluster:
        """The ground truth at ``now``: a copy with what happens on its own by then applied."""
        copied = copy.deepcopy(self)
        copied.automatic(now)
        return copied

    def automatic(self, now: int) -> None:
        """What the deadline-driven sweeps do with no one asking: whole expired segments leave, and
        segments past the retention time."""
        for n in self.namespaces.values():
            n.retention(now)
            n.due_reclaim(now)

    def figures(self, now: int) -> dict[str, Any]:
        per = [n.figures(now) for n in self.namespaces.values()]
        records = sum(f["records"] for f in per)
        expired = sum(f["expired"] for f in per)
        return {
            "records": records,
            "expired_pct": pct(expired, records),
            "backlog": sum(f["backlog"] for f in per),
            "backlog_live": sum(f["backlog_live"] for f in per),
        }


# -- formatting as the console shows figures ------------------------------------------------------------------
def pct(part: int, whole: int) -> Decimal:
    """A ratio as the console prints it: percent with one decimal, rounded half up (JS toFixed)."""
    ratio = part / whole if whole else 0.0
    return Decimal(ratio * 100).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)


def parse_count(text: str) -> int:
    return int(text.strip().replace(",", ""))


def parse_pct(text: str) -> Decimal:
    found = re.match(r"\s*(-?[\d.]+)%", text)
    assert found, f"not a percentage: {text!r}"
    return Decimal(found.group(1)).quantize(Decimal("0.1"))


def parse_records_live(text: str) -> tuple[int, int]:
    found = re.match(r"\s*([\d,]+)\s*\(([\d,]+)\)", text)
    assert found, f"not 'records (live)': {text!r}"
    return parse_count(found.group(1)), parse_count(found.group(2))


def parse_backlog(text: str) -> tuple[int | None, int | None]:
    """'130 msgs (65 live)' → (130, 65); '—' → (None, None)."""
    if text.strip() == "—":
        return None, None
    found = re.match(r"\s*([\d,]+) msgs(?: \(([\d,]+) live\))?", text)
    assert found, f"not a backlog: {text!r}"
    return parse_count(found.group(1)), None if found.group(2) is None else parse_count(found.group(2))


UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def parse_size(text: str) -> tuple[float, float]:
    """'12.3 KiB' → (bytes, the rounding error it may carry: half a shown digit)."""
    found = re.match(r"\s*([\d.]+) (B|KiB|MiB|GiB)", text)
    assert found, f"not a size: {text!r}"
    unit = UNITS[found.group(2)]
    return float(found.group(1)) * unit, 0.5 * (1 if unit == 1 else 0.1 * unit)


def sizes_add_up(total: str, parts: Iterable[str]) -> bool:
    """A shown total agrees with the shown parts within what their rounding allows."""
    value, slack = parse_size(total)
    summed = [parse_size(p) for p in parts]
    return abs(value - sum(v for v, _ in summed)) <= slack + sum(s for _, s in summed)


# -- reading pages ----------------------------------------------------------------------------------------------
FIGURES_TIMEOUT_MS = 20_000
# Every element with a test id and its text, in one round trip (a Stat card: its value; a table row: its
# header cell too, under "<id>::th", and the namespace in it under "<id>::ns").
SNAPSHOT_JS = """() => {
    const out = {};
    for (const el of document.querySelectorAll('[data-testid]')) {
        const id = el.dataset.testid;
        const value = el.querySelector(':scope > .stat-value');
        out[id] = (value ?? el).innerText;
        const th = el.tagName === 'TR' ? el.querySelector('th') : null;
        if (th) {
            out[id + '::th'] = th.innerText;
            out[id + '::ns'] = th.querySelector('.mono')?.innerText ?? '';
        }
    }
    return out;
}"""


class Texts(dict[str, str]):
    """The texts of a page's test ids (see SNAPSHOT_JS); a missing one fails the read, naming it."""

    def __missing__(self, key: str) -> str:
        raise AssertionError(f"no element with data-testid {key!r}")

    def ids(self, prefix: str) -> list[str]:
        """The suffixes of the test ids starting with ``prefix`` (rows), in page order."""
        return [k[len(prefix) :] for k in self if k.startswith(prefix) and "::" not in k]


def texts(page: Page, ready: str) -> Texts:
    """Wait until the test id ``ready`` shows, then read every test id's text at once."""
    expect(page.get_by_test_id(ready).first).to_be_visible(timeout=FIGURES_TIMEOUT_MS)
    return Texts(page.evaluate(SNAPSHOT_JS))


def read_overview(page: Page) -> dict[str, Any]:
    t = texts(page, "metric-stored-records")
    backlog, live = parse_backlog(t["metric-backlog"])
    return {
        "records": parse_count(t["metric-stored-records"]),
        "expired_pct": parse_pct(t["metric-expired-ratio"]),
        "backlog": backlog,
        "backlog_live": live,
        "stored_bytes": t["metric-stored-bytes"],
    }


def read_namespaces(page: Page) -> dict[str, dict[str, Any]]:
    t = texts(page, "namespaces-table")
    return {
        name: {
            "records": parse_count(t[f"namespace-records-{name}"]),
            "expired_pct": parse_pct(t[f"namespace-expired-{name}"]),
            "segments": parse_count(t[f"namespace-segments-{name}"]),
            "size": t[f"namespace-size-{name}"],
        }
        for name in t.ids("namespace-row-")
    }


def expired_with_count(text: str) -> tuple[Decimal, int]:
    """'46.4% (65)' → (46.4, 65)."""
    found = re.match(r"\s*(.*%)\s*\(([\d,]+)\)", text)
    assert found, f"not 'ratio (count)': {text!r}"
    return parse_pct(found.group(1)), parse_count(found.group(2))


def read_namespace_summary(page: Page) -> dict[str, Any]:
    t = texts(page, "shards-table")
    pct_shown, expired = expired_with_count(t["summary-expired-ratio"])
    backlog, backlog_live = parse_backlog(t["summary-backlog"])
    shards = []
    for n in t.ids("shard-row-"):
        records, live = parse_records_live(t[f"shard-records-{n}"])
        shard_pct, shard_expired = expired_with_count(t[f"shard-expired-{n}"])
        shard_backlog = t[f"shard-backlog-{n}"].strip()
        shards.append(
            {
                "log_start": parse_count(t[f"shard-log-start-{n}"]),
                "end": parse_count(t[f"shard-end-offset-{n}"]),
                "records": records,
                "live": live,
                "expired": shard_expired,
                "expired_pct": shard_pct,
                "segments": parse_count(t[f"shard-segments-{n}"]),
                "backlog": None if shard_backlog == "—" else parse_count(shard_backlog),
                "size": t[f"shard-size-{n}"],
            }
        )
    return {
        "records": parse_count(t["summary-records"]),
        "live": parse_count(t["summary-live-records"]),
        "expired": expired,
        "expired_pct": pct_shown,
        "segments": parse_count(t["summary-segments"]),
        "backlog": backlog,
        "backlog_live": backlog_live,
        "stored_bytes": t["summary-stored-bytes"],
        "shards": shards,
    }


def read_segments(page: Page) -> dict[str, list[dict[str, Any]]]:
    """The Segments table (one page): each namespace's rows, sorted by shard and base offset."""
    t = texts(page, "segments-table")
    rows: list[dict[str, Any]] = []
    for sid in t.ids("segment-row-"):
        shard = re.search(r"shard (\d+)", t[f"segment-row-{sid}::th"])
        assert shard, t[f"segment-row-{sid}::th"]
        records, live = parse_records_live(t[f"segment-records-{sid}"])
        rows.append(
            {
                "namespace": t[f"segment-row-{sid}::ns"].strip(),
                "shard": int(shard.group(1)),
                "base": parse_count(t[f"segment-offsets-{sid}"].split("–")[0]),
                "state": t[f"segment-state-{sid}"].strip(),
                "records": records,
                "live": live,
                "expired_pct": parse_pct(t[f"segment-expired-{sid}"]),
                "size": t[f"segment-size-{sid}"],
            }
        )
    out: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: (r["shard"], r["base"])):
        out.setdefault(r.pop("namespace"), []).append(r)
    return out


def read_subscription(page: Page, name: str) -> dict[str, Any]:
    expect(page.get_by_test_id(f"subscription-row-{name}")).to_be_visible(timeout=FIGURES_TIMEOUT_MS)
    expand = page.get_by_test_id(f"subscription-expand-{name}")
    if expand.get_attribute("aria-expanded") != "true":
        expand.click()
    t = texts(page, f"subscription-shards-{name}")
    shards = [
        {
            "cursor": int(t[f"subscription-shard-cursor-{name}-{i}"]),
            "end": int(t[f"subscription-shard-end-{name}-{i}"]),
            "messages": parse_count(t[f"subscription-shard-messages-{name}-{i}"]),
            "live": parse_count(t[f"subscription-shard-live-{name}-{i}"]),
        }
        for i in t.ids(f"subscription-shard-{name}-")
    ]
    return {
        "messages": parse_count(t[f"subscription-messages-{name}"]),
        "live": parse_count(t[f"subscription-live-{name}"]),
        "shards": shards,
    }


def read_run_counts(page: Page, run_id: str) -> dict[str, int]:
    """A run's counts as the Tasks table shows them ('segments rewritten 1' → {'segments_rewritten': 1})."""
    counts = page.get_by_test_id(f"run-counts-{run_id}")
    pairs = counts.locator(":scope > span").evaluate_all(
        "spans => spans.map(s => [s.querySelector('.muted')?.textContent ?? '', s.textContent])"
    )
    out = {}
    for key, whole in pairs:
        if key:
            out[key.strip().replace(" ", "_")] = parse_count(whole[len(key) :])
    return out


def pick(shown: Any, expected: Any) -> Any:
    """``shown`` limited to the keys ``expected`` names (recursively), so extras stay out of the comparison."""
    if isinstance(expected, dict) and isinstance(shown, dict):
        return {k: pick(shown.get(k, "<missing>"), v) for k, v in expected.items()}
    if isinstance(expected, list) and isinstance(shown, list) and len(shown) == len(expected):
        return [pick(s, e) for s, e in zip(shown, expected, strict=True)]
    return shown


# A page's figures come from the last metrics collection (every METRICS_INTERVAL_S = 2 s) and the page load:
# what it shows is the truth of some moment in the last few seconds.
LAG_MS = 5_000


def settle(
    page: Page,
    url: str,
    read: Callable[[Page], Any],
    truth: Callable[[int], Any],
    what: str,
    timeout_s: float = 30,
    after_ms: int | None = None,
) -> Any:
    """Load ``url`` until ``read`` shows the ground truth ``truth(t)`` of a moment ``t`` of the last
    ``LAG_MS`` (and not before ``after_ms``: the step's own moment, which may still be to come); fail
    with what was shown and what is true. Figures change at a few known moments (expiries, the
    operator's actions), so the two ends of that window cover every state the page may show."""
    deadline = time.monotonic() + timeout_s
    while True:
        page.goto(url)
        now = now_ms()
        try:
            shown = read(page)
        except (AssertionError, ValueError, PlaywrightTimeoutError) as exc:
            shown = f"not readable: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        moments = [] if after_ms is not None and now < after_ms else {max(now - LAG_MS, after_ms or 0), now}
        for t in sorted(moments):
            expected = truth(t)
            if pick(shown, expected) == expected:
                return shown
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what} disagrees with the ground truth\n  shown:    {shown}\n  expected: {truth(now_ms())}"
            )
        page.wait_for_timeout(1000)


def shot(page: Page, number: int, step: str, ready: str) -> None:
    """docs/screenshots/story-<NN>-<step>.png of ``page`` once ``ready`` (a test id) shows and the
    page's requests have settled."""
    expect(page.get_by_test_id(ready).first).to_be_visible(timeout=FIGURES_TIMEOUT_MS)
    page.wait_for_load_state("networkidle")
    browser.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(browser.SCREENSHOTS / f"story-{number:02d}-{step}.png"), full_page=True)


# -- the API and the command line, as the console's users would -----------------------------------------------
def api(page: Page, base: str, method: str, path: str, body: Any = None) -> APIResponse:
    """A call with the browser session of ``page`` (its cookies and CSRF token)."""
    token = next((c["value"] for c in page.context.cookies() if c["name"] == "csrftoken"), "")
    headers = {"X-CSRFToken": token, "Content-Type": "application/json", "Origin": base.rstrip("/")}
    data = None if body is None else json.dumps(body)
    return page.request.fetch(f"{base.rstrip('/')}{path}", method=method, headers=headers, data=data)


def manage(var_dir: Path, *args: str) -> str:
    """``manage.py`` against the launched system's database (as system.launch configures it)."""
    env = {
        **os.environ,
        "APP_ENV": "development",
        "VAR_DIR": str(var_dir),
        "DATABASE_URL": f"sqlite:///{var_dir / 'db.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "backend.config.settings",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
