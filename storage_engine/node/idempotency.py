"""Idempotency keys for produce requests: a retried batch is not written twice.

Bounded and in memory: the node remembers the last ``capacity`` keys and their
answers. A retry after a node restart is not covered (the producer sees the
restart as a failed request and decides); this matches Kafka's producer
sequence window rather than promising exactly-once across crashes.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

Answer = dict[str, Any]  # a produce request's JSON answer


class IdempotencyCache:
    def __init__(self, capacity: int = 100_000) -> None:
        self._capacity = capacity
        self._done: OrderedDict[str, Answer] = OrderedDict()
        self._pending: dict[str, asyncio.Future[Answer]] = {}

    async def run(self, key: str, produce: Callable[[], Awaitable[Answer]]) -> Answer:
        """Run ``produce`` once per ``key``; concurrent and later calls get the first answer.

        A failed attempt is not remembered, so the producer can retry it.
        """
        if key in self._done:
            self._done.move_to_end(key)
            return self._done[key]
        if key in self._pending:
            return await asyncio.shield(self._pending[key])
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            result = await produce()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved; waiters re-raise it
            raise
        finally:
            self._pending.pop(key, None)
        future.set_result(result)
        self._done[key] = result
        while len(self._done) > self._capacity:
            self._done.popitem(last=False)
        return result
