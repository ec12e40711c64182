"""Parsing of node request arguments and bodies: bad input is an
:class:`InvalidArgumentError` naming the argument (or the JSON field, as a path such as
``policy.retention_ms`` or ``records[3].timestamp``) and the rule, never a 500.

Every route reads its arguments through :func:`arguments` (docs/node-api.md, "Arguments"): one
:class:`Arguments` per request, from the query string and, for a request whose body carries its
arguments, the JSON object body. An argument may come from either place and is checked by one rule
whichever it came from; an unknown one, or one given in both places with different values, is a 400
naming it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from starlette.requests import Request

from storage_engine.errors import InvalidArgumentError
from storage_engine.policies.bounds import MAX_INT64, MIN_INT64, int_rule
from storage_engine.rules.validation import flag_value, int_from_text, int_value

MAX_BODY_BYTES = 64 << 20
MAX_FIELD_CHARS = 64  # of a JSON key echoed in an error's field path
# A JSON ``\u`` escape of a UTF-16 surrogate: only a body holding one can carry an unpaired
# surrogate, a str that has no UTF-8 form (it would fail later in ``str.encode``).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def shard_param(request: Request) -> int:
    """The ``{shard}`` path parameter; whether the namespace has it is the engine's 404."""
    return int_from_text(request.path_params["shard"], "shard")


class _Refused:
    """A JSON number the node does not take, left in the parsed value so that
    :func:`_refuse_first` can name the field that holds it. ``rule`` is ``None`` for an integer
    outside 64 bits: its rule is worded once the field, hence the unit, is known."""

    __slots__ = ("rule",)

    def __init__(self, rule: str | None) -> None:
        self.rule = rule

    def rule_for(self, field: str) -> str:
        return self.rule if self.rule is not None else int_rule(MIN_INT64, MAX_INT64, field)


def parse_json(raw: bytes, field: str = "body") -> Any:
    """``raw`` as JSON, stricter than :func:`json.loads`: UTF-8 text, integers within signed
    64 bits, finite numbers only (no ``NaN``, ``Infinity``, ``1e999``), no unpaired surrogate
    escapes, and a nesting depth Python can recurse into."""
    refused: list[_Refused] = []

    def refuse(rule: str | None) -> _Refused:
        refused.append(_Refused(rule))
        return refused[-1]

    def parse_int(text: str) -> int | _Refused:
        # Past 4,300 digits int() raises a bare ValueError; past 64 bits nothing downstream can store it.
        if len(text) > 20:
            return refuse(None)
        value = int(text)
        return value if MIN_INT64 <= value <= MAX_INT64 else refuse(None)

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
            raise InvalidArgumentError(path or root, item.rule_for(path or root))
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


def _same(text: str, value: object) -> bool:
    """Whether a query's ``text`` and a JSON body's ``value`` give an argument the same value
    (``7`` and ``"7"``, ``true`` and ``"true"`` or ``"1"``), so giving it in both places is no conflict."""
    if isinstance(value, str):
        return text == value
    try:
        parsed: object = flag_value(text, "") if isinstance(value, bool) else int_value(text, "", MIN_INT64)
    except InvalidArgumentError:
        return False
    return type(parsed) is type(value) and parsed == value


class Arguments(Mapping[str, Any]):
    """A request's arguments, read once (:func:`arguments`): each name to its value, a query's text or a
    JSON body's value (a body's ``null`` is an argument not given). ``takes`` are the names the route
    takes from either place, ``body_only`` those that are JSON values only a body can carry (a policy,
    records, a compaction plan). The typed getters check a value by one rule, whichever place it came
    from; as a mapping it is what :meth:`storage_engine.node_api.protocol.StepRequest.from_params` reads."""

    def __init__(
        self,
        query: Sequence[tuple[str, str]],
        body: Mapping[str, Any],
        takes: Iterable[str] = (),
        body_only: Iterable[str] = (),
    ) -> None:
        taken, only_body = frozenset(takes), frozenset(body_only)
        known = ", ".join(sorted(taken | only_body)) or "none"
        from_query: dict[str, str] = {}
        for name, text in query:
            if name in only_body:
                raise InvalidArgumentError(name, "must be given in the JSON body (it is a JSON value)")
            if name not in taken:
                raise InvalidArgumentError(_key_path("", name), f"unknown argument (this route takes: {known})")
            if name in from_query:
                raise InvalidArgumentError(name, "is given more than once in the query")
            from_query[name] = text
        for name in body:
            if name not in taken and name not in only_body:
                raise InvalidArgumentError(_key_path("", name), f"unknown argument (this route takes: {known})")
        from_body = {name: value for name, value in body.items() if value is not None}
        for name in sorted(from_query.keys() & from_body.keys()):
            if not _same(from_query[name], from_body[name]):
                raise InvalidArgumentError(name, "is given in both the query and the body, with different values")
        self._values: dict[str, Any] = {**from_query, **from_body}

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def integer(self, name: str, default: int | None = None, *, minimum: int = 0, maximum: int = MAX_INT64) -> int:
        """An integer from ``minimum`` to ``maximum``: required when there is no ``default``."""
        found = self.optional_integer(name, minimum=minimum, maximum=maximum)
        if found is not None:
            return found
        if default is None:
            raise InvalidArgumentError(name, f"is required; it {int_rule(minimum, maximum, name)}")
        return default

    def optional_integer(self, name: str, *, minimum: int = 0, maximum: int = MAX_INT64) -> int | None:
        value = self._values.get(name)
        return None if value is None else int_value(value, name, minimum, maximum)

    def flag(self, name: str, default: bool) -> bool:
        value = self._values.get(name)
        return default if value is None else flag_value(value, name)

    def text(self, name: str) -> str | None:
        """A text argument (a JSON string in a body), or ``None`` when not given."""
        value = self._values.get(name)
        if value is not None and not isinstance(value, str):
            raise InvalidArgumentError(name, "must be a string")
        return value

    def json(self, name: str) -> Any:
        """A ``body_only`` argument as the body gave it (``None`` when not given)."""
        return self._values.get(name)


async def arguments(
    request: Request, takes: Iterable[str] = (), *, body_only: Iterable[str] = (), body: bool = True
) -> Arguments:
    """The request's arguments. A ``GET`` (or ``HEAD``) takes them from the query only (a body is
    refused), as does a route whose body is no JSON object of arguments (``body=False``: an upload, a
    binary batch); any other request also from its body, a JSON object (an empty body gives none)."""
    fields: dict[str, Any] = {}
    if request.method in ("GET", "HEAD"):
        async for chunk in request.stream():  # refused, not ignored: it may hold arguments meant for the route
            if chunk:
                raise InvalidArgumentError("body", f"must be empty: {request.method} takes its arguments in the query")
    elif body:
        fields = await json_body(request)
    return Arguments(request.query_params.multi_items(), fields, takes, body_only)
