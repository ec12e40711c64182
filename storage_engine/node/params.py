"""Parsing of node request parameters and bodies: bad input is an
:class:`InvalidArgumentError` naming the parameter (or the JSON field, as a path such as
``policy.retention_ms`` or ``records[3].timestamp``) and the rule, never a 500."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from starlette.requests import Request

from storage_engine.bounds import MAX_INT64, MIN_INT64, int_rule
from storage_engine.errors import InvalidArgumentError
from storage_engine.validation import int_from_text

MAX_BODY_BYTES = 64 << 20
MAX_FIELD_CHARS = 64  # of a JSON key echoed in an error's field path
# A JSON ``\u`` escape of a UTF-16 surrogate: only a body holding one can carry an unpaired
# surrogate, a str that has no UTF-8 form (it would fail later in ``str.encode``).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def int_param(request: Request, name: str, default: int | None = None, minimum: int = 0) -> int:
    """A query parameter: a decimal integer in ASCII digits from ``minimum`` to 2^63-1."""
    raw = request.query_params.get(name)
    if raw is None:
        if default is None:
            raise InvalidArgumentError(name, "is required")
        return default
    return int_from_text(raw, name, minimum)


def shard_param(request: Request) -> int:
    """The ``{shard}`` path parameter; whether the namespace has it is the engine's 404."""
    return int_from_text(request.path_params["shard"], "shard")


class _Refused:
    """A JSON number the node does not take, left in the parsed value so that
    :func:`_refuse_first` can name the field that holds it."""

    __slots__ = ("rule",)

    def __init__(self, rule: str) -> None:
        self.rule = rule


def parse_json(raw: bytes, field: str = "body") -> Any:
    """``raw`` as JSON, stricter than :func:`json.loads`: UTF-8 text, integers within signed
    64 bits, finite numbers only (no ``NaN``, ``Infinity``, ``1e999``), no unpaired surrogate
    escapes, and a nesting depth Python can recurse into."""
    refused: list[_Refused] = []

    def refuse(rule: str) -> _Refused:
        refused.append(_Refused(rule))
        return refused[-1]

    def parse_int(text: str) -> int | _Refused:
        # Past 4,300 digits int() raises a bare ValueError; past 64 bits nothing downstream can store it.
        if len(text) > 20:
            return refuse(int_rule(MIN_INT64, MAX_INT64))
        value = int(text)
        return value if MIN_INT64 <= value <= MAX_INT64 else refuse(int_rule(MIN_INT64, MAX_INT64))

    def parse_float(text: str) -> float | _Refused:
        value = float(text)
        return value if math.isfinite(value) else refuse("must be a finite number")

    def parse_constant(text: str) -> _Refused:
        return refuse(f"must be a finite number ({text} is not JSON)")

    try:
        text = raw.decode("utf-8")  # JSON over HTTP is UTF-8 (RFC 8259)
        value = json.loads(text, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant)
    except RecursionError:
        raise InvalidArgumentError(field, "must be valid JSON: it nests too deeply") from None
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise InvalidArgumentError(field, "must be valid JSON (UTF-8)") from None
    if refused or _SURROGATE_ESCAPE.search(text):
        _refuse_first(value, field)
    return value


def _is_text(s: str) -> bool:
    if s.isascii():
        return True
    try:
        s.encode()
    except UnicodeEncodeError:
        return False
    return True


def _key_path(parent: str, key: str) -> str:
    shown = key if len(key) <= MAX_FIELD_CHARS else key[:MAX_FIELD_CHARS] + "…"
    return f"{parent}.{shown}" if parent else shown


def _refuse_first(value: Any, root: str) -> None:
    """Raise for the first refused number or unpaired surrogate, naming its path. Iterative,
    so that a body nested as deep as the parser allowed cannot exhaust the stack here."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, _Refused):
            raise InvalidArgumentError(path or root, item.rule)
        if isinstance(item, str) and not _is_text(item):
            raise InvalidArgumentError(path or root, "must be valid Unicode text (an unpaired surrogate escape)")
        if isinstance(item, dict):
            children = []
            for key, child in item.items():
                if not _is_text(key):
                    raise InvalidArgumentError(path or root, "keys must be valid Unicode text (an unpaired surrogate)")
                children.append((_key_path(path, key), child))
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend(reversed([(f"{path or root}[{i}]", child) for i, child in enumerate(item)]))


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request body, refused as soon as it passes ``limit`` bytes (not after reading it all)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise InvalidArgumentError("body", f"must be at most {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def json_body(request: Request) -> dict[str, Any]:
    body = parse_json(await read_body(request) or b"{}")
    if not isinstance(body, dict):
        raise InvalidArgumentError("body", "must be a JSON object")
    return body


def only(body: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidArgumentError(_key_path("", unknown[0]), "unknown field")
