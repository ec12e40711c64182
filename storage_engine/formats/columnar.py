"""Vectorised (numpy) views of encoded record batches, for key compaction.

:mod:`storage_engine.formats.codec` stays pure Python (Spark jobs import it); this module reads
the same format (see the codec's docstring) with numpy, the batches of a read chunk at
a time, and never decodes values, tags or headers:

- :func:`chunk_layout` finds where every record of some batches starts and reads the
  fields compaction needs into arrays (:class:`Layout`);
- :meth:`Layout.key_words` reads keys 8 bytes at a time, for hashing them;
- :func:`rebuild` makes a new batch of some of a batch's records from their encoded
  bytes (byte for byte what :func:`storage_engine.formats.codec.rebuild_batch` makes).

**Record positions.** A record starts where the previous one ends (``4 + size`` after
its start), a chain through the data. A batch whose records all have the first one's
size (checked: every size field at that stride, and the batch length) is a strided
view: every field is a column of it, read without a gather, and rebuilding it is a row
copy. Other batches are *walked*: from a known start whose record has size ``s``, the
next starts are guessed at a stride of ``4 + s`` and the size fields at the guesses read
in one gather; the guesses hold up to the first record of another size (the start
after it is then known, and guessing goes on from there). Every such batch of a chunk
is a lane of the same numpy calls; when guesses keep failing (records of many sizes)
and few records are found per step, the rest is walked in Python, so the cost stays
near the plain walk's. The structural checks are the codec's
(:func:`~storage_engine.formats.codec.batch_columns`): sizes, attributes, strictly increasing
deltas, the key within its record, the record count and last delta against the header,
the records filling the batch exactly. A batch failing one is handed to the codec's
walk, which raises the :class:`~storage_engine.errors.CorruptSegmentError` with its
exact reason.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Any, cast

import numpy as np

from storage_engine.errors import CorruptSegmentError
from storage_engine.formats.batch_columns import RecordColumns, batch_columns
from storage_engine.formats.codec import (
    ATTR_EXPIRE,
    ATTR_KEY,
    FLAG_HAS_EXPIRE,
    FLAG_HAS_HEADERS,
    FLAG_HAS_KEYS,
    FLAG_HAS_TAGS,
    FLAG_HAS_UNBOUNDED,
    HEADER_SIZE,
    RECORD_FIXED_SIZE,
    BatchHeader,
    EncodedRecords,
)

I64 = np.int64
U64 = np.uint64
_KNOWN_ATTRS = 0x07
_RECORD_SIZE_BASE = RECORD_FIXED_SIZE - 4
_FIELDS: dict[str, Any] = {
    "names": ["size", "attrs", "delta", "ts", "exp", "klen", "ntags", "nheaders"],
    "formats": [">u4", "u1", ">u4", ">i8", ">i8", ">u4", ">u2", ">u2"],
    "offsets": [0, 4, 5, 9, 17, 25, 29, 31],
}
# A record's fixed part (codec ``_RECORD`` = ">IBIqqIHH"), packed: one gather reads them all.
RECORD_DTYPE = np.dtype(cast(Any, {**_FIELDS, "itemsize": RECORD_FIXED_SIZE}))
assert RECORD_DTYPE.itemsize == RECORD_FIXED_SIZE
_U32 = struct.Struct(">I")
_PY_WALK_BELOW = 96  # records found per guessing step under which the rest is walked in Python
_VIEW_MIN = 8  # records a batch needs to be read as a strided view (fewer: gathered with others)
_strided_dtypes: dict[int, np.dtype] = {}


def _strided(stride: int) -> np.dtype:
    """The fixed fields of records ``stride`` bytes apart (a record and what follows it)."""
    dt = _strided_dtypes.get(stride)
    if dt is None:
        dt = _strided_dtypes[stride] = np.dtype(cast(Any, {**_FIELDS, "itemsize": stride}))
    return dt


def as_u8(buf: bytes | bytearray | memoryview) -> np.ndarray:
    """``buf`` as a ``uint8`` array (no copy)."""
    return np.frombuffer(buf, dtype=np.uint8)


def rows(u8: np.ndarray, width: int) -> np.ndarray:
    """Overlapping rows: ``rows(u8, w)[p]`` is ``u8[p : p + w]`` (a read-only view; a gather
    of row indexes copies ``w`` bytes per index in one call)."""
    return np.ndarray((max(0, u8.size - width + 1), width), dtype=np.uint8, buffer=u8, strides=(1, 1))


def be32_at(u8: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The big-endian u32 at each position, as int64."""
    values: np.ndarray = rows(u8, 4)[pos].view(">u4").ravel().astype(I64)
    return values


def words_at(u8: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The little-endian u64 at each position (bytes past the buffer read as 0)."""
    if not pos.size:
        return np.empty(0, dtype=U64)
    inside = pos + 8 <= u8.size
    if inside.all():
        words: np.ndarray = rows(u8, 8)[pos].view(U64).ravel()
        return words
    out = np.zeros(pos.size, dtype=U64)
    out[inside] = rows(u8, 8)[pos[inside]].view(U64).ravel()
    for i in np.flatnonzero(~inside).tolist():
        p = int(pos[i])
        out[i] = int.from_bytes(u8[p : p + 8].tobytes().ljust(8, b"\0"), "little")
    return out


class Layout:
    """The records of some batches of one buffer, one array entry per record (in buffer
    order): where they start, their offsets, attributes and key lengths; batch ``b``'s
    records are ``first[b] : first[b + 1]``."""

    __slots__ = ("_batch_ends", "_ends", "_views", "attrs", "bases", "first", "klen", "offsets", "p0", "starts", "u8")

    def __init__(
        self,
        u8: np.ndarray,
        first: np.ndarray,
        bases: list[int],
        p0: list[int],
        views: list[np.ndarray | None],
        starts: np.ndarray,
        batch_ends: list[int],
        offsets: np.ndarray,
        attrs: np.ndarray,
        klen: np.ndarray,
    ) -> None:
        self.u8 = u8
        self.first = first
        self.bases = bases
        self.p0 = p0
        self._views = views  # per batch: its records as a strided view, or None (walked)
        self.starts = starts
        self._batch_ends = batch_ends
        self._ends: np.ndarray | None = None
        self.offsets = offsets
        self.attrs = attrs
        self.klen = klen

    @property
    def ends(self) -> np.ndarray:
        """Where each record ends (the next one's start, or its batch's end)."""
        if self._ends is None:
            ends = np.empty_like(self.starts)
            ends[:-1] = self.starts[1:]
            ends[self.first[1:] - 1] = self._batch_ends
            self._ends = ends
        return self._ends

    def fixed(self, idx: np.ndarray) -> np.ndarray:
        """The fixed fields (:data:`RECORD_DTYPE`) of the records at ``idx``."""
        fixed: np.ndarray = rows(self.u8, RECORD_FIXED_SIZE)[self.starts[idx]].view(RECORD_DTYPE).ravel()
        return fixed

    def key_words(self, idx: np.ndarray, byte: int) -> np.ndarray:
        """The little-endian u64 at ``byte`` of the key of each record at ``idx`` (ascending;
        bytes past the key are whatever follows it: callers mask them)."""
        u8 = self.u8
        at = RECORD_FIXED_SIZE + byte
        if not any(v is not None for v in self._views):
            return words_at(u8, self.starts[idx] + at)
        parts: list[np.ndarray] = []
        cuts = np.searchsorted(idx, self.first).tolist()
        for b, view in enumerate(self._views):
            sel = idx[cuts[b] : cuts[b + 1]]
            if not sel.size:
                continue
            n = 0 if view is None else view.size
            stride = 0 if view is None else view.dtype.itemsize
            o = self.p0[b] + at
            if view is None or o + (n - 1) * stride + 8 > u8.size:
                parts.append(words_at(u8, self.starts[sel] + at))
                continue
            col = np.ndarray((n,), dtype="<u8", buffer=u8, offset=o, strides=(stride,))
            parts.append(col.astype(U64) if sel.size == n else col[sel - int(self.first[b])].astype(U64))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


def batch_groups(
    batches: Iterator[tuple[int, BatchHeader, bytes, int]],
) -> Iterator[tuple[bytes, list[tuple[int, BatchHeader, int]]]]:
    """The batches of :meth:`Segment.iter_batches <storage_engine.segment.segment.Segment.
    iter_batches>` as ``(read chunk, [(file position, header, offset in the chunk), ...])``:
    the batches of one read chunk together. A group is handed out as soon as its chunk
    holds no further whole batch, before the next chunk is read (one chunk in memory)."""
    group: list[tuple[int, BatchHeader, int]] = []
    group_buf = b""
    for file_pos, h, buf, off in batches:
        if buf is not group_buf and group:
            yield group_buf, group
            group = []
        group_buf = buf
        group.append((file_pos, h, off))
        nxt = off + h.length
        if len(buf) - nxt < HEADER_SIZE or _U32.unpack_from(buf, nxt)[0] > len(buf) - nxt:
            yield group_buf, group  # the next batch (if any) is read anew
            group = []
    if group:
        yield group_buf, group


def _py_walk(buf: bytes | memoryview, p: int, end: int, count: int, out: list[int]) -> int:
    """The plain walk of ``count`` records from ``p``; returns the position after them."""
    unpack = _U32.unpack_from
    for _ in range(count):
        if p + 4 > end:
            return -1
        out.append(p)
        p += 4 + unpack(buf, p)[0]
    return p


def _walk(buf: bytes | memoryview, u8: np.ndarray, p0: np.ndarray, e0: np.ndarray, n0: np.ndarray) -> np.ndarray | None:
    """Record starts of the batches whose record sections are ``[p0, e0)`` holding ``n0``
    records each (sorted: buffer order); ``None`` when the sizes do not add up."""
    found: list[np.ndarray] = []
    p, e, r = p0.copy(), e0.copy(), n0.astype(I64)
    k = r.copy()  # the first guess: every record of the batch has the first one's size
    while p.size:
        if (p + 4 > e).any():
            return None
        s = be32_at(u8, p)
        stride = s + 4
        lane_of = np.repeat(np.arange(p.size), k)
        firsts = np.cumsum(k) - k
        j = np.arange(lane_of.size, dtype=I64) - np.repeat(firsts, k)
        q = p[lane_of] + j * stride[lane_of]
        inside = q + 4 <= e[lane_of]
        ok = inside & (be32_at(u8, np.where(inside, q, 0)) == s[lane_of])
        m = np.minimum.reduceat(np.where(ok, k[lane_of], j), firsts)  # first failed guess per lane
        found.append(q[j < m[lane_of]])
        p = p + m * stride
        r = r - m
        if ((r == 0) != (p >= e)).any() or (p > e).any():
            return None  # sizes run past a batch, or a batch ends before its record count
        more = r > 0
        k = np.where(m == k, 2 * k, np.maximum(m, 1))
        p, e, r, k = p[more], e[more], r[more], np.minimum(k[more], r[more])
        if p.size and int(m.sum()) < _PY_WALK_BELOW:  # guesses keep failing: walk the rest
            rest: list[int] = []
            for pi, ei, ri in zip(p.tolist(), e.tolist(), r.tolist(), strict=True):
                if _py_walk(buf, pi, ei, ri, rest) != ei:
                    return None
            found.append(np.array(rest, dtype=I64))
            break
    starts = np.concatenate(found) if len(found) > 1 else found[0]
    starts.sort()
    return starts


def chunk_layout(
    buf: bytes | memoryview, batches: Sequence[tuple[int, BatchHeader]], *, path: str = "<buffer>"
) -> Layout:
    """The :class:`Layout` of ``batches`` (``(position in buf, checked header)``, in buffer
    order) with the codec's structural checks; raises :class:`CorruptSegmentError`."""
    u8 = as_u8(buf)
    unpack = _U32.unpack_from
    counts = [h.record_count for _, h in batches]
    first = np.zeros(len(batches) + 1, dtype=I64)
    np.cumsum(counts, out=first[1:])
    p0 = [off + HEADER_SIZE for off, _ in batches]
    views: list[np.ndarray | None] = []
    walked: list[int] = []
    for b, (_off, h) in enumerate(batches):
        n = counts[b]
        stride = 4 + unpack(buf, p0[b])[0]
        view = None
        if n >= _VIEW_MIN and stride * n == h.length - HEADER_SIZE and stride >= RECORD_FIXED_SIZE:
            view = np.ndarray((n,), dtype=_strided(stride), buffer=u8, offset=p0[b])
            if not (view["size"] == stride - 4).all():
                view = None
        views.append(view)
        if view is None:
            walked.append(b)
    walked_starts = None
    if walked:
        walked_starts = _walk(
            buf,
            u8,
            np.array([p0[b] for b in walked], dtype=I64),
            np.array([batches[b][0] + batches[b][1].length for b in walked], dtype=I64),
            np.array([counts[b] for b in walked], dtype=I64),
        )
        if walked_starts is None or walked_starts.size != sum(counts[b] for b in walked):
            _raise_first_bad(buf, batches, path)
        assert walked_starts is not None
    parts_starts: list[np.ndarray] = []
    parts_fields: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # size, attrs, delta, klen
    w_at = 0
    for b, view in enumerate(views):
        n = counts[b]
        if view is not None:
            stride = view.dtype.itemsize
            parts_starts.append(p0[b] + stride * np.arange(n, dtype=I64))
            fields = view
        else:
            assert walked_starts is not None
            st = walked_starts[w_at : w_at + n]
            w_at += n
            end = batches[b][0] + batches[b][1].length
            if int(st[-1]) + RECORD_FIXED_SIZE > end:
                _raise_first_bad(buf, batches, path)
            parts_starts.append(st)
            fields = rows(u8, RECORD_FIXED_SIZE)[st].view(RECORD_DTYPE).ravel()
        parts_fields.append((fields["size"], fields["attrs"], fields["delta"], fields["klen"]))
    one = len(batches) == 1
    starts = parts_starts[0] if one else np.concatenate(parts_starts)

    def column(i: int, dtype: type) -> np.ndarray:
        return (parts_fields[0][i] if one else np.concatenate([f[i] for f in parts_fields])).astype(dtype)

    sizes, attrs, deltas, klen = column(0, I64), column(1, np.uint8), column(2, I64), column(3, I64)
    steps = np.diff(deltas)
    steps[first[1:-1] - 1] = 1  # a batch boundary: the next batch starts its own deltas
    keyed = (attrs & ATTR_KEY) != 0
    lasts = np.array([h.last_offset_delta for _, h in batches], dtype=I64)
    bad = (
        (sizes < _RECORD_SIZE_BASE).any()  # sizes and starts agree: each start came from its size
        or (attrs > _KNOWN_ATTRS).any()
        or (steps <= 0).any()
        or (deltas[first[1:] - 1] != lasts).any()
        or (keyed & (klen + RECORD_FIXED_SIZE > sizes + 4)).any()
    )
    if bad:
        _raise_first_bad(buf, batches, path)
    bases = [h.base_offset for _, h in batches]
    offsets = deltas + bases[0] if one else deltas + np.repeat(np.array(bases, dtype=I64), counts)
    batch_ends = [off + h.length for off, h in batches]
    return Layout(u8, first, bases, p0, views, starts, batch_ends, offsets, attrs, klen)


def _raise_first_bad(buf: bytes | memoryview, batches: Sequence[tuple[int, BatchHeader]], path: str) -> None:
    """The codec's walk of each batch, which raises the exact reason of the first bad one."""
    for off, h in batches:
        batch_columns(buf, off, h, path=path, times=False)
    raise CorruptSegmentError(path, batches[0][0], "bad record section")


def batch_layout(buf: bytes | memoryview, pos: int, h: BatchHeader, *, path: str = "<buffer>") -> Layout:
    return chunk_layout(buf, [(pos, h)], path=path)


def rebuild(layout: Layout, b: int, keep: np.ndarray) -> bytes:
    """A new batch of the records ``keep`` (indexes within batch ``b``, ascending,
    non-empty) of ``layout``, from their encoded bytes: the header is recomputed, offset
    deltas are rebased on the first kept record, nothing else re-encoded (offsets stay
    the same)."""
    lo = int(layout.first[b])
    offsets = layout.offsets[lo + keep]
    base = int(offsets[0])
    rel = offsets - base
    view = layout._views[b]
    if view is not None:  # one record size: a row copy
        stride = view.dtype.itemsize
        table = np.ndarray((view.size, stride), dtype=np.uint8, buffer=layout.u8, offset=layout.p0[b])
        data = table[keep]
        fx = data.view(view.dtype).ravel()
        fx["delta"] = rel
        data = data.ravel()
    else:
        idx = lo + keep
        ks = layout.starts[idx]
        ke = layout.ends[idx]
        fx = layout.fixed(idx)
        count = keep.size
        cut = np.flatnonzero(ks[1:] != ke[:-1]) + 1  # runs of adjacent records: one slice each
        run_s = ks[np.concatenate(([0], cut))].tolist()
        run_e = ke[np.concatenate((cut - 1, [count - 1]))].tolist()
        mv = layout.u8.data
        data = np.frombuffer(bytearray(b"".join([mv[s:e] for s, e in zip(run_s, run_e, strict=True)])), np.uint8)
        lens = ke - ks
        new_starts = np.cumsum(lens) - lens
        data[new_starts[:, None] + np.arange(5, 9)] = rel.astype(">u4").view(np.uint8).reshape(count, 4)
    attrs = fx["attrs"]
    ts = fx["ts"]
    flags = 0
    if (attrs & ATTR_KEY).any():
        flags |= FLAG_HAS_KEYS
    has_exp = (attrs & ATTR_EXPIRE) != 0
    max_exp = -1
    if has_exp.any():
        flags |= FLAG_HAS_EXPIRE
        max_exp = int(fx["exp"][has_exp].max())
    if not has_exp.all():
        flags |= FLAG_HAS_UNBOUNDED
    if fx["ntags"].any():
        flags |= FLAG_HAS_TAGS
    if fx["nheaders"].any():
        flags |= FLAG_HAS_HEADERS
    encoded = EncodedRecords(
        data,  # any buffer: only its length and bytes are read
        keep.size,
        int(rel[-1]),
        int(ts[0]),
        int(ts.min()),
        int(ts.max()),
        max_exp,
        flags,
        [],
        [],
        [],
    )
    return encoded.header(base) + memoryview(data)


def layout_columns(buf: bytes | memoryview, layout: Layout, b: int) -> RecordColumns:
    """The :class:`~storage_engine.formats.codec.RecordColumns` of batch ``b`` of a layout (lists,
    keys as bytes), for removal rules that are not vectorised."""
    lo, hi = int(layout.first[b]), int(layout.first[b + 1])
    fx = layout.fixed(np.arange(lo, hi))
    attrs = fx["attrs"]
    key_at = (layout.starts[lo:hi] + RECORD_FIXED_SIZE).tolist()
    keys = [
        bytes(buf[q : q + k]) if a & ATTR_KEY else None
        for q, k, a in zip(key_at, fx["klen"].tolist(), attrs.tolist(), strict=True)
    ]
    return RecordColumns(
        layout.offsets[lo:hi].tolist(),
        keys,
        attrs.tolist(),
        fx["ts"].tolist(),
        np.where((attrs & ATTR_EXPIRE) != 0, fx["exp"], 0).tolist(),
        layout.starts[lo:hi].tolist(),
        layout.ends[lo:hi].tolist(),
    )


def rebuild_many(layout: Layout, batches: list[int], keep: np.ndarray) -> dict[int, bytes]:
    """:func:`rebuild` of each of ``batches`` (layout indexes, ascending) with its records
    where ``keep`` (a mask over the layout's records) holds, each keeping some but not
    all: when they all have one record size, in one go (one row gather, the headers'
    fields by segmented reductions); otherwise one by one."""
    if not batches:
        return {}
    views = [layout._views[b] for b in batches]
    stride = views[0].dtype.itemsize if views[0] is not None else 0
    if len(batches) < 2 or any(v is None or v.dtype.itemsize != stride for v in views):
        first = layout.first
        return {b: rebuild(layout, b, np.flatnonzero(keep[first[b] : first[b + 1]])) for b in batches}
    counts = np.diff(layout.first)
    chosen = np.zeros(counts.size, dtype=bool)
    chosen[batches] = True
    kept = np.flatnonzero(keep & np.repeat(chosen, counts))
    cnt = np.add.reduceat(keep.astype(I64), layout.first[:-1])[batches]
    si = np.cumsum(cnt) - cnt
    data = rows(layout.u8, stride)[layout.starts[kept]]
    fx = data.view(_strided(stride)).ravel()
    offsets = layout.offsets[kept]
    bases = offsets[si]
    rel = offsets - np.repeat(bases, cnt)
    fx["delta"] = rel
    attrs = fx["attrs"]
    ts = fx["ts"].astype(I64)
    exp = np.where((attrs & ATTR_EXPIRE) != 0, fx["exp"].astype(I64), -1)
    cols = zip(
        batches,
        cnt.tolist(),
        si.tolist(),
        bases.tolist(),
        rel[si + cnt - 1].tolist(),
        ts[si].tolist(),
        np.minimum.reduceat(ts, si).tolist(),
        np.maximum.reduceat(ts, si).tolist(),
        np.maximum.reduceat(exp, si).tolist(),
        np.bitwise_or.reduceat(attrs, si).tolist(),
        np.bitwise_and.reduceat(attrs, si).tolist(),
        np.maximum.reduceat(fx["ntags"].astype(I64), si).tolist(),
        np.maximum.reduceat(fx["nheaders"].astype(I64), si).tolist(),
        strict=True,
    )
    mv = data.ravel().data
    out: dict[int, bytes] = {}
    for b, n, s, base, last, first_ts, min_ts, max_ts, max_exp, any_attrs, all_attrs, tags, headers in cols:
        flags = (
            (FLAG_HAS_KEYS if any_attrs & ATTR_KEY else 0)
            | (FLAG_HAS_EXPIRE if any_attrs & ATTR_EXPIRE else 0)
            | (0 if all_attrs & ATTR_EXPIRE else FLAG_HAS_UNBOUNDED)
            | (FLAG_HAS_TAGS if tags else 0)
            | (FLAG_HAS_HEADERS if headers else 0)
        )
        body = mv[s * stride : (s + n) * stride]
        encoded = EncodedRecords(body, n, last, first_ts, min_ts, max_ts, max_exp, flags, [], [], [])
        out[b] = encoded.header(base) + body
    return out
