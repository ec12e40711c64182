"""``make up``: prepare and start the whole system on embedded defaults.

1. Choose the Celery broker: ``CELERY_BROKER_URL`` if set, else ``REDIS_URL``
   if set, else a Redis answering on 127.0.0.1:6379, else Celery's filesystem
   transport under the data directory (a real transport, not eager mode).
2. Migrate, collect the built UI, create the default node, the admin account
   and the demo namespaces (``manage.py bootstrap --demo``).
3. Print the URL and login, then run the ``Procfile`` (node, web, worker,
   beat) under honcho, which stops them all on Ctrl-C.

Everything a running system writes is under its ``VAR_DIR`` (``var/``): the
database, the node's data (``data/node``) and tier, the broker's files, the
generated secrets, static files, the lake, and ``run/`` (gunicorn's control
socket and metrics files, see ``gunicorn.conf.py``); beat keeps its schedule in
the database and writes no pid file. So two systems on one machine, each with
its own ``VAR_DIR`` and ports, never touch each other's files; on one Redis each
has its own Celery queue (:func:`system_queue`).
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import django
from django.conf import settings
from django.core.management import call_command

BASE_DIR = Path(__file__).resolve().parents[1]


def redis_answers(host: str = "127.0.0.1", port: int = 6379) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def choose_broker(environ: dict[str, str], probe: Callable[[], bool] = redis_answers) -> str:
    if environ.get("CELERY_BROKER_URL"):
        return environ["CELERY_BROKER_URL"]
    if environ.get("REDIS_URL"):
        return environ["REDIS_URL"]
    return "redis://127.0.0.1:6379/0" if probe() else "filesystem://"


def system_queue(var_dir: Path) -> str:
    """The Celery queue of the system whose files are in ``var_dir``: ``celery`` for the repository's own
    ``var/``, ``celery-<hash of the directory>`` for any other, so that systems sharing one Redis (the one
    found on 127.0.0.1:6379) never take each other's tasks, nor answer each other's worker pings."""
    here = var_dir.resolve()
    if here == (BASE_DIR / "var").resolve():
        return "celery"
    return "celery-" + hashlib.sha256(str(here).encode()).hexdigest()[:10]


def prepare_environment(environ: dict[str, str]) -> dict[str, str]:
    """Fill every unset (or empty) variable with its embedded default."""
    env = dict(environ)

    def default(name: str, value: str) -> str:
        if not env.get(name):
            env[name] = value
        return env[name]

    var_dir = Path(default("VAR_DIR", str(BASE_DIR / "var")))
    data_dir = Path(default("DATA_DIR", str(var_dir / "data")))
    default("NODE_DATA_DIR", str(data_dir / "node"))
    default("WEB_HOST", "127.0.0.1")
    default("WEB_PORT", "8000")
    default("NODE_PORT", "7070")
    default("NODE_URL", f"http://127.0.0.1:{env['NODE_PORT']}")
    default("CELERY_QUEUE", system_queue(var_dir))
    default("SPARK_MASTER", "local[*]")
    default("DJANGO_SETTINGS_MODULE", "backend.config.settings")
    env["CELERY_BROKER_URL"] = choose_broker(env)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def main() -> int:
    env = prepare_environment(dict(os.environ))
    environ_token = bool(env.get("NODE_METRICS_TOKEN"))
    os.environ.update(env)
    sys.path.insert(0, str(BASE_DIR))

    django.setup()
    # The node runs without Django: hand it the tokens the settings resolved (never on its command line).
    env["NODE_TOKEN"] = settings.NODE_TOKEN
    if settings.NODE_METRICS_TOKEN:
        env["NODE_METRICS_TOKEN"] = settings.NODE_METRICS_TOKEN
    call_command("migrate", interactive=False, verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    call_command("bootstrap", demo=True)
    url = f"http://{env['WEB_HOST']}:{env['WEB_PORT']}/"
    metrics_token = "NODE_METRICS_TOKEN" if environ_token else Path(env["VAR_DIR"]) / "node_metrics_token"
    print(
        f"\n  Console:  {url}\n  API docs: {url}api/docs/\n  Broker:   {env['CELERY_BROKER_URL'].split('://')[0]}"
        f"\n  Login:    see the LOGIN line above"
        f"\n  Metrics:  {env['NODE_URL']}/metrics, scrape-only token in {metrics_token}"
        f"\n  Stop:     Ctrl-C\n",
        flush=True,
    )
    honcho = str(Path(sys.executable).parent / "honcho")
    os.execvpe(honcho, [honcho, "start", "-f", str(BASE_DIR / "Procfile"), "-d", str(BASE_DIR)], env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
