"""A storage node on an injected clock, served over HTTP in this process: the real app and engine, with a
:class:`~storage_engine.clock.ManualClock` the test sets apart from the wall clock (a node process takes
no clock option)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from storage_engine import open_engine
from storage_engine.clock import ManualClock
from storage_engine.config import Durability, EngineConfig
from storage_engine.node.app import build_app
from tests.support.processes import free_port, wait_until


@contextmanager
def clocked_node(data_dir: Path, clock: ManualClock, token: str = "t") -> Iterator[str]:
    """Serve a node whose engine and routes read ``clock``; yields its base URL. The app's lifespan
    closes the engine when the server stops."""
    config = EngineConfig(data_dir=data_dir, durability=Durability.NONE, lifecycle_worker=False)
    app = build_app(open_engine(config, clock=clock), token=token, clock=clock)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), 20, "the in-process node")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)
