"""Key compaction's vectorised pieces against their plain references: the numpy key map
against a dict (latest offsets, superseded bits, the cut when full), the batch layout and
rebuild against the codec (byte for byte, uniform and mixed record sizes, damaged
batches refused with the codec's reason), and key hashes read from batches against the
hashes of the same keys as byte strings; and the compact bench's three lines."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from storage_engine.api import Record
from storage_engine.bench.__main__ import main as bench_main
from storage_engine.compaction import keymap
from storage_engine.compaction.keymap import KeyMap, hash_keys, layout_key_hashes
from storage_engine.errors import CorruptSegmentError
from storage_engine.formats.batch_columns import batch_columns, rebuild_batch
from storage_engine.formats.codec import decode_header, encode_batch
from storage_engine.formats.columnar import batch_groups, chunk_layout, rebuild

T0 = 1_700_000_000_000


@pytest.mark.parametrize("seed", range(12))
def test_keymap_matches_a_dict(seed: int) -> None:
    """Random keys put in random chunks: the map holds each key's latest offset, marks
    exactly the earlier offsets of a key superseded, and when full stops at the first
    record of the first key that does not fit."""
    rng = random.Random(seed)
    budget = rng.choice([96, 200, 1024, 4096, 64 * 1024])
    m = KeyMap(budget, base=500)
    keys = [b"k%d" % rng.randrange(rng.choice([3, 50, 5000])) + b"x" * rng.randrange(20) for _ in range(3000)]
    offsets = [500 + i for i in range(len(keys))]
    latest: dict[bytes, int] = {}
    superseded: set[int] = set()
    pos = 0
    while pos < len(keys):
        n = rng.randrange(1, 400)
        chunk_keys, chunk_offsets = keys[pos : pos + n], offsets[pos : pos + n]
        done = m.put_many(chunk_offsets, chunk_keys)
        for o, k in zip(chunk_offsets[:done], chunk_keys[:done], strict=True):
            if k in latest:
                superseded.add(latest[k])
            latest[k] = o
        if done < len(chunk_keys):
            if chunk_offsets[done] - 500 >= m.span:  # past the bitmap's offsets
                assert chunk_offsets[done] - 500 == m.span
            else:  # full at a new key
                assert chunk_keys[done] not in latest and len(latest) == m.capacity
            break
        pos += n
    assert len(m) == len(latest)
    assert m.latest_many(list(latest)) == list(latest.values())
    assert m.latest_many([b"never", None]) == [-1, -1]
    top = max(latest.values(), default=500)
    assert {o for o in range(500, top + 1) if m.superseded(o)} == superseded
    assert m.memory_bytes <= budget


def _records(rng: random.Random, n: int, uniform: bool, first: int) -> list[Record]:
    out, offset = [], first
    for i in range(n):
        offset += rng.choice((1, 1, 2, 5))
        if uniform:
            out.append(Record(offset, T0 + i, b"v" * 12, b"key-%04d" % rng.randrange(100), (), (), None))
        else:
            out.append(
                Record(
                    offset,
                    T0 + rng.randrange(-5000, 5000),
                    None if rng.random() < 0.2 else bytes(rng.randrange(256) for _ in range(rng.randrange(30))),
                    None if rng.random() < 0.2 else b"k%d" % rng.randrange(10 ** rng.randrange(1, 12)),
                    tuple(sorted({f"tag{rng.randrange(4)}" for _ in range(rng.randrange(3))})),
                    tuple((f"h{i}", b"x" * i) for i in range(rng.randrange(3))),
                    None if rng.random() < 0.5 else T0 + rng.randrange(100_000),
                )
            )
    return out


@pytest.mark.parametrize("seed", range(24))
def test_layout_and_rebuild_match_the_codec(seed: int) -> None:
    rng = random.Random(seed)
    batches, offset = [], 1000
    for _ in range(rng.randrange(1, 5)):
        recs = _records(rng, rng.randrange(1, 50), rng.random() < 0.5, offset)
        batches.append(recs)
        offset = recs[-1].offset + rng.randrange(1, 9)
    buf = b"\0" * 5 + b"".join(encode_batch(r[0].offset, r) for r in batches)
    positions, pos = [], 5
    for _ in batches:
        h = decode_header(buf, pos)
        positions.append((pos, h))
        pos += h.length
    layout = chunk_layout(buf, positions)
    for b, ((pos, h), recs) in enumerate(zip(positions, batches, strict=True)):
        cols = batch_columns(buf, pos, h)
        lo, hi = int(layout.first[b]), int(layout.first[b + 1])
        assert layout.offsets[lo:hi].tolist() == cols.offsets == [r.offset for r in recs]
        assert layout.starts[lo:hi].tolist() == cols.starts
        assert layout.ends[lo:hi].tolist() == cols.ends
        assert layout.attrs[lo:hi].tolist() == cols.attrs
        keep = sorted(rng.sample(range(len(recs)), rng.randrange(1, len(recs) + 1)))
        rebuilt = bytes(rebuild(layout, b, np.array(keep)))
        assert rebuilt == rebuild_batch(buf, cols, keep) == encode_batch(recs[keep[0]].offset, [recs[i] for i in keep])
    keyed = np.flatnonzero(layout.attrs & 2)
    h, c = layout_key_hashes(layout, keyed)
    h2, c2 = hash_keys([r.key for recs in batches for r in recs if r.key is not None])
    assert h.tolist() == h2.tolist() and c.tolist() == c2.tolist()


def test_one_size_batches_are_read_in_one_step_and_whole_chunks_group() -> None:
    rng = random.Random(3)
    recs = _records(rng, 500, True, 0)
    one = encode_batch(recs[0].offset, recs)
    chunk = one + one  # the same batch twice: a chunk of two
    h = decode_header(chunk, 0)
    layout = chunk_layout(chunk, [(0, h), (len(one), h)])
    assert all(v is not None for v in layout._views)  # strided views, no walk
    groups = list(batch_groups(iter([(0, h, chunk, 0), (len(one), h, chunk, len(one))])))
    assert [(buf is chunk, [g[0] for g in group]) for buf, group in groups] == [(True, [0, len(one)])]


@pytest.mark.parametrize(
    ("where", "value"),
    [(60 + 4, 0x80), (60, 0xFF), (60 + 5, 0xFF)],  # bad attributes, a size past the batch, a delta
)
def test_damaged_batches_are_refused_with_the_codec_reason(where: int, value: int) -> None:
    recs = _records(random.Random(1), 20, True, 0)
    buf = bytearray(encode_batch(0, recs))
    buf[where] = value
    h = decode_header(bytes(buf), 0, verify=False)
    with pytest.raises(CorruptSegmentError) as codec:
        batch_columns(bytes(buf), 0, h)
    with pytest.raises(CorruptSegmentError) as ours:
        chunk_layout(bytes(buf), [(0, h)])
    assert ours.value.reason == codec.value.reason


def test_keymap_stops_at_its_span() -> None:
    """A round spans the bitmap's offsets: a chunk crossing that end goes in up to it."""
    m = KeyMap(4096, base=100)
    offsets = list(range(100, 100 + m.span + 50))
    keys = [b"k%d" % (o % 3) for o in offsets]
    assert m.put_many(offsets, keys) == m.span
    assert m.latest_many([b"k0", b"k1", b"k2"]) == [o for o in offsets[m.span - 3 : m.span] if o % 3 == 0] + [
        o for o in offsets[m.span - 3 : m.span] if o % 3 == 1
    ] + [o for o in offsets[m.span - 3 : m.span] if o % 3 == 2]
    assert sum(m.superseded(o) for o in offsets[: m.span]) == m.span - 3


@pytest.mark.parametrize(
    "tails",
    [None, (0, 0), (10**9, 0), (10**9, 10**9)],
    ids=["as-built", "numpy-steps-only", "wide-steps-only", "scalar-only"],
)
def test_a_nearly_full_large_map_matches_a_dict(tails: tuple[int, int] | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thousands of keys probing at once in a map filled to its load factor: the numpy
    steps, the wide steps of the tail and the scalar end, each alone and together."""
    if tails is not None:
        monkeypatch.setattr(keymap, "_SCALAR_TAIL", tails[0])
        monkeypatch.setattr(keymap, "_SCALAR_TAIL_WIDE", tails[1])
    rng = random.Random(5)
    m = KeyMap(256 * 1024)
    latest: dict[bytes, int] = {}
    superseded: set[int] = set()
    keys = [b"key-%d" % rng.randrange(m.capacity + 2000) for _ in range(6 * m.capacity)]
    for start in range(0, len(keys), 5000):
        chunk = keys[start : start + 5000]
        done = m.put_many(list(range(start, start + len(chunk))), chunk)
        for o, k in enumerate(chunk[:done], start):
            if k in latest:
                superseded.add(latest[k])
            latest[k] = o
        if done < len(chunk):
            assert chunk[done] not in latest and len(latest) == m.capacity
            break
    assert len(m) == len(latest) == m.capacity
    assert m.latest_many(list(latest)) == list(latest.values())
    assert m.latest_many([b"absent-%d" % i for i in range(3000)]) == [-1] * 3000
    assert {o for o in range(max(latest.values()) + 1) if m.superseded(o)} == superseded


@pytest.mark.parametrize("jitter", ["0", "40"])
def test_the_compact_bench_prints_the_baseline_the_compaction_and_the_ratio(
    capsys: pytest.CaptureFixture[str], jitter: str
) -> None:
    argv = ["compact", "--records", "3000", "--keys", "500", "--map-budget", "8192", "--value-jitter", jitter, "--json"]
    assert bench_main(argv) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["system"] for line in lines] == ["sequential-rewrite", lines[1]["system"], "ratio"]
    baseline, compaction, ratio = lines
    assert baseline["bytes"] == compaction["bytes_before"] and baseline["files"] >= 1
    assert compaction["correct"] is True and compaction["rounds"] > 1
    assert ratio["compact_vs_sequential"] > 0


@pytest.mark.parametrize("last_key", [b"", b"abc", b"k" * 8, b"z" * 23])
def test_keys_at_the_very_end_of_a_buffer_hash_as_byte_strings(last_key: bytes) -> None:
    """A tombstone's key ends its batch and the buffer (the 8-byte reads past it are cut),
    empty and long keys included."""
    recs = [Record(i, T0, b"v", b"key-%d" % i, (), (), None) for i in range(20)]
    recs.append(Record(20, T0, None, last_key, (), (), None))
    buf = encode_batch(0, recs)
    layout = chunk_layout(buf, [(0, decode_header(buf, 0))])
    keyed = np.flatnonzero(layout.attrs & 2)
    h, c = layout_key_hashes(layout, keyed)
    h2, c2 = hash_keys([r.key for r in recs if r.key is not None])
    assert h.tolist() == h2.tolist() and c.tolist() == c2.tolist()
    assert len(set(h.tolist())) == len(recs)
