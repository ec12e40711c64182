"""Binary framing of record batches on the node's produce and fetch routes.

Media type ``application/vnd.lcs.batch``: the body is exactly one batch in the
segment file format of :mod:`storage_engine.formats.codec` (header, CRC-32, records),
so a damaged or truncated body is detected before anything is written.

- Produce: the batch's base offset is 0 and offsets are 0..n-1; a record
  timestamp of ``-1`` means "broker time" (the node stamps it).
- Fetch: the batch holds the returned records with their real offsets (gaps
  allowed); an empty body means no records. The shard bounds travel in the
  ``X-Next-Offset``, ``X-Log-Start-Offset`` and ``X-End-Offset`` headers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from storage_engine.api import NewRecord, ReadResult, Record
from storage_engine.errors import CorruptSegmentError, InvalidArgumentError
from storage_engine.formats.codec import decode_header, decode_records, encode_batch, encode_records

MEDIA_TYPE = "application/vnd.lcs.batch"
BROKER_TIME = -1


def encode_produce(records: Sequence[NewRecord]) -> bytes:
    stamps = [BROKER_TIME if r.timestamp is None else r.timestamp for r in records]
    return encode_records(records, stamps).seal(0)


def decode_produce(body: bytes) -> list[NewRecord]:
    """The records of a produce body; :class:`InvalidArgumentError` naming ``body`` when malformed."""
    try:
        header = decode_header(body, 0, path="<request body>")
        if header.length != len(body):
            raise InvalidArgumentError(
                "body", f"must be exactly one batch: {len(body)} bytes, batch of {header.length}"
            )
        if header.base_offset != 0:
            raise InvalidArgumentError("body", "a produced batch must have base offset 0")
        records = decode_records(body, 0, header, path="<request body>")
    except CorruptSegmentError as exc:
        raise InvalidArgumentError("body", f"malformed batch: {exc.reason}") from None
    return [
        NewRecord(
            value=r.value,
            key=r.key,
            timestamp=None if r.timestamp == BROKER_TIME else r.timestamp,
            tags=r.tags,
            headers=r.headers,
            expire_at=r.expire_at,
        )
        for r in records
    ]


def encode_fetch(result: ReadResult) -> tuple[bytes, dict[str, str]]:
    headers = {
        "X-Next-Offset": str(result.next_offset),
        "X-Log-Start-Offset": str(result.log_start_offset),
        "X-End-Offset": str(result.end_offset),
    }
    if not result.records:
        return b"", headers
    return encode_batch(result.records[0].offset, result.records), headers


def decode_fetch(body: bytes, headers: Mapping[str, str]) -> ReadResult:
    records: tuple[Record, ...] = ()
    if body:
        header = decode_header(body, 0, path="<response body>")
        records = tuple(decode_records(body, 0, header, path="<response body>"))
    return ReadResult(
        records=records,
        next_offset=int(headers["x-next-offset"]),
        log_start_offset=int(headers["x-log-start-offset"]),
        end_offset=int(headers["x-end-offset"]),
    )
