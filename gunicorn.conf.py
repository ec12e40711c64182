"""gunicorn's settings, read from the working directory (``make up``'s Procfile and the compose web service
run gunicorn at the repository root; a command line ``-c`` file replaces this one).

prometheus_client's multiprocess mode: each worker keeps its request and database metrics (django-prometheus)
in files under ``PROMETHEUS_MULTIPROC_DIR``, and ``/metrics`` adds every worker's up
(``backend/apps/metrics/exposition.py``), so a scrape sees the whole web whichever worker answers it.

What the server writes lives under its system's ``VAR_DIR`` (``<VAR_DIR>/run``), so two systems on one
machine never touch each other's files: the metrics directory (one per server, unless
``PROMETHEUS_MULTIPROC_DIR`` names one) and gunicorn's control socket (``gunicornc -s <VAR_DIR>/run/gunicorn.ctl``),
which gunicorn would otherwise put at one path for the whole user ($XDG_RUNTIME_DIR or ~/.gunicorn), where a
second server takes it over and, stopping, removes it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

# VAR_DIR as the settings read it (backend/config/settings.py), without importing Django here.
RUN_DIR = Path(os.environ.get("VAR_DIR") or Path(__file__).resolve().parent / "var") / "run"
RUN_DIR.mkdir(parents=True, exist_ok=True)

control_socket = str(RUN_DIR / "gunicorn.ctl")
# A Unix socket's path holds at most 107 bytes: past that the socket is off rather than elsewhere.
control_socket_disable = len(os.fsencode(control_socket)) > 107

# Set before a worker imports prometheus_client, which picks how it stores values when imported.
_OWN_DIRECTORY = "PROMETHEUS_MULTIPROC_DIR" not in os.environ
if _OWN_DIRECTORY:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="web-metrics-", dir=RUN_DIR)


def on_starting(server: Any) -> None:
    """Start from an empty directory: files left by an earlier server's workers would be counted again."""
    directory = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    directory.mkdir(parents=True, exist_ok=True)
    for leftover in directory.glob("*.db"):
        leftover.unlink()


def child_exit(server: Any, worker: Any) -> None:
    """A worker is gone: its counters stay counted, its live gauges go."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server: Any) -> None:
    if _OWN_DIRECTORY:
        shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)
