"""Parsing of node request parameters and bodies: bad input is an
:class:`InvalidArgumentError` naming the parameter and the rule."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from storage_engine.errors import InvalidArgumentError

MAX_BODY_BYTES = 64 << 20


def int_param(request: Request, name: str, default: int | None = None, minimum: int = 0) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        if default is None:
            raise InvalidArgumentError(name, "is required")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgumentError(name, "must be an integer") from None
    if value < minimum:
        raise InvalidArgumentError(name, f"must be ≥ {minimum}")
    return value


def shard_param(request: Request) -> int:
    raw = request.path_params["shard"]
    if not raw.isdigit():
        raise InvalidArgumentError("shard", "must be a non-negative integer")
    return int(raw)


async def json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise InvalidArgumentError("body", f"must be at most {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InvalidArgumentError("body", "must be valid JSON") from None
    if not isinstance(body, dict):
        raise InvalidArgumentError("body", "must be a JSON object")
    return body


def only(body: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidArgumentError(unknown[0], "unknown field")
