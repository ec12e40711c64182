"""docker-compose.yml follows the Compose specification and the configuration it implies works.

Docker does not run here, so the file is checked as far as this machine allows: against the
Compose specification's JSON schema (check-jsonschema's vendored copy), and by what the
services need from each other — the hosts they call, the volumes they share, the probes
their healthchecks ask for, the settings the web, worker and beat start with.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EXPECTED = {"redis", "postgres", "node", "web", "worker", "beat"}
APP_SERVICES = {"node", "web", "worker", "beat"}
DJANGO_SERVICES = {"web", "worker", "beat"}
# What an operator puts in .env (compose refuses to start without them: `${VAR:?…}`).
OPERATOR_ENV = {"SECRET_KEY": "s" * 50, "NODE_TOKEN": "t" * 40, "ADMIN_PASSWORD": "a-long-admin-password"}
_VAR = re.compile(r"\$\{(\w+)(?::?[-?]([^}]*))?\}")


def load() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def interpolate(value: str) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}`` with the operator's .env."""

    def one(m: re.Match[str]) -> str:
        name, rest = m.group(1), m.group(2)
        if name in OPERATOR_ENV:
            return OPERATOR_ENV[name]
        if rest is not None and ":?" not in m.group(0):
            return rest
        raise AssertionError(f"{name} has no value and no default")

    return _VAR.sub(one, value)


def environment(service: str) -> dict[str, str]:
    return {k: interpolate(str(v)) for k, v in load()["services"][service].get("environment", {}).items()}


def mounts(service: str) -> dict[str, tuple[str, bool]]:
    """Container path → (volume, read-only) of a service's named volumes."""
    out = {}
    for spec in load()["services"][service].get("volumes", []):
        source, target, *mode = spec.split(":")
        out[target] = (source, bool(mode) and mode[0] == "ro")
    return out


def volume_of(service: str, path: str) -> tuple[str, bool, str] | None:
    """(volume, read-only, path inside the volume) holding ``path`` in ``service``."""
    for target, (volume, ro) in sorted(mounts(service).items(), key=lambda m: -len(m[0])):
        if PurePosixPath(path).is_relative_to(target):
            return volume, ro, str(PurePosixPath(path).relative_to(target))
    return None


def test_the_file_follows_the_compose_specification() -> None:
    checker = BIN / "check-jsonschema"
    result = subprocess.run(
        [str(checker), "--builtin-schema", "vendor.compose-spec", str(ROOT / "docker-compose.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_parses_with_every_service() -> None:
    compose = load()
    assert set(compose["services"]) == EXPECTED
    for name in APP_SERVICES:
        assert "NODE_TOKEN" in compose["services"][name]["environment"], name


def test_app_services_share_the_configuration_variables() -> None:
    for name in DJANGO_SERVICES:
        env = environment(name)
        for var in ("SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "NODE_URL", "NODE_TOKEN", "LAKE_PATH"):
            assert var in env, f"{name} lacks {var}"


def test_every_host_a_service_calls_is_a_service_that_accepts_the_name() -> None:
    services = set(load()["services"])
    for name in DJANGO_SERVICES:
        env = environment(name)
        for var in ("NODE_URL", "CONTROL_PLANE_URL", "DATABASE_URL", "CELERY_BROKER_URL"):
            assert urlsplit(env[var]).hostname in services, f"{name}: {var}={env[var]}"
    # The worker posts the lifecycle report to CONTROL_PLANE_URL: the web must accept that Host header.
    report_host = urlsplit(environment("worker")["CONTROL_PLANE_URL"]).hostname
    assert report_host in environment("web")["ALLOWED_HOSTS"].split(",")


def test_the_worker_reads_the_node_s_data_directory_and_writes_the_lake() -> None:
    node_dir = load()["services"]["node"]["command"]
    node_data = node_dir[node_dir.index("--data-dir") + 1]
    on_node = volume_of("node", node_data)
    worker_env = environment("worker")
    on_worker = volume_of("worker", worker_env["NODE_DATA_DIR"])
    assert on_node is not None and on_worker is not None
    assert (on_worker[0], on_worker[2]) == (on_node[0], on_node[2])  # the same directory of the same volume
    assert on_node[1] is False and on_worker[1] is True  # the node writes it, the worker only reads
    lake = volume_of("worker", worker_env["LAKE_PATH"])
    assert lake is not None and lake[1] is False  # the lake survives the container and is writable
    assert lake[0] in load()["volumes"]


def test_every_service_restarts_and_the_long_running_ones_have_healthchecks() -> None:
    compose = load()
    for name, service in compose["services"].items():
        assert service.get("restart") == "unless-stopped", name
    for name in ("redis", "postgres", "node", "web", "worker"):
        assert "healthcheck" in compose["services"][name], name


def test_healthchecks_ask_for_probes_that_exist() -> None:
    from django.urls import resolve

    compose = load()
    web_probe = " ".join(compose["services"]["web"]["healthcheck"]["test"])
    assert "/readyz" in web_probe
    assert resolve("/readyz").url_name == "readyz"
    node_probe = " ".join(compose["services"]["node"]["healthcheck"]["test"])
    assert "/health" in node_probe
    routes = (ROOT / "storage_engine" / "node").rglob("*.py")
    assert any('"/health"' in path.read_text() for path in routes)


def programs_of(command: list[str]) -> list[str]:
    """The programs a compose command runs (each step of an `sh -c "a && exec b"` too)."""
    if command[0] == "sh":
        steps = [shlex.split(step) for step in command[2].split("&&")]
        return [s[1] if s[0] == "exec" else s[0] for s in steps]
    return [command[0]]


def test_every_command_exists_in_the_project() -> None:
    compose = load()
    for name in APP_SERVICES:
        for program in programs_of(compose["services"][name]["command"]):
            assert (BIN / program).exists() or shutil.which(program), f"{name}: {program} is not installed"
    web = compose["services"]["web"]["command"][2]
    for django_command in ("migrate", "collectstatic", "bootstrap"):
        assert f"manage.py {django_command}" in web
    assert (ROOT / "manage.py").exists()
    assert "backend.config.wsgi:application" in web


def test_the_web_server_receives_sigterm_itself() -> None:
    """``sh -c "… && gunicorn"`` would leave sh as PID 1, which ignores SIGTERM: gunicorn must be exec'd."""
    web = load()["services"]["web"]["command"]
    last = web[2].split("&&")[-1].split()
    assert last[:2] == ["exec", "gunicorn"]
    assert "--graceful-timeout" in last


def test_procfile_and_compose_run_the_same_programs() -> None:
    procfile = dict(line.split(":", 1) for line in (ROOT / "Procfile").read_text().splitlines() if line.strip())
    compose = load()
    for name in APP_SERVICES - {"web"}:
        assert procfile[name].split()[0] == compose["services"][name]["command"][0]


@pytest.mark.parametrize("service", sorted(DJANGO_SERVICES))
def test_the_settings_start_with_the_compose_environment(service: str) -> None:
    """Production settings refuse a missing or unreadable variable: the compose environment has none."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "DATABASE", "CELERY", "REDIS"))}
    env.update(environment(service))
    env["VAR_DIR"] = str(ROOT / "var" / "compose-check")  # the image's /app/var
    code = (
        "import backend.config.settings as s;"
        "print(s.LOG_FORMAT, s.CELERY_BROKER_TRANSPORT_OPTIONS['visibility_timeout'])"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    log_format, visibility = result.stdout.split()
    assert log_format == "json"
    assert int(visibility) > 3600


def test_the_allow_list_lets_nodes_and_the_alertmanager_be_reached_and_nothing_else_local(settings, monkeypatch):
    """Every compose service has a private address: the node URL is allowed as one, an Alertmanager named
    ``alertmanager`` (the README's example) because the list names it, the other services not as a channel."""
    from backend.apps.core.outgoing import CHANNEL, NODE, OutgoingURLRefused, check_outgoing_url

    real = socket.getaddrinfo
    private = {name: f"172.18.0.{i}" for i, name in enumerate([*EXPECTED, "alertmanager"], start=2)}

    def compose_dns(host, port, *args, **kwargs):  # compose's network, which is not here
        if host in private:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (private[host], port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", compose_dns)
    for service in sorted(DJANGO_SERVICES):
        env = environment(service)
        settings.OUTGOING_URL_ALLOW = env["OUTGOING_URL_ALLOW"]
        check_outgoing_url(env["NODE_URL"], purpose=NODE)
        check_outgoing_url("http://alertmanager:9093/api/v2/alerts", purpose=CHANNEL)
        check_outgoing_url("https://hooks.example.com/x", purpose=CHANNEL)
        for url in ("http://redis:6379/", "http://postgres:5432/", "http://node:7070/", "http://web:8000/"):
            with pytest.raises(OutgoingURLRefused, match="a private address: name it in OUTGOING_URL_ALLOW"):
                check_outgoing_url(url, purpose=CHANNEL)
