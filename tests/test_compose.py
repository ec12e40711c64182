"""docker-compose.yml is valid and every service runs a command that exists here."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EXPECTED = {"redis", "postgres", "node", "web", "worker", "beat"}
APP_SERVICES = {"node", "web", "worker", "beat"}


def load() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_parses_with_every_service():
    compose = load()
    assert set(compose["services"]) == EXPECTED
    for name in APP_SERVICES:
        env = compose["services"][name]["environment"]
        assert "NODE_TOKEN" in env, name


def test_app_services_share_the_configuration_variables():
    compose = load()
    for name in ("web", "worker", "beat"):
        env = compose["services"][name]["environment"]
        for var in ("SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "NODE_URL", "NODE_TOKEN", "DATA_DIR"):
            assert var in env, f"{name} lacks {var}"


def programs_of(command: list[str]) -> list[str]:
    """The programs a compose command runs (each step of an `sh -c "a && b"` too)."""
    if command[0] == "sh":
        return [step.split()[0] for step in command[2].split("&&")]
    return [command[0]]


def test_every_command_exists_in_the_project():
    compose = load()
    for name in APP_SERVICES:
        for program in programs_of(compose["services"][name]["command"]):
            assert (BIN / program).exists() or shutil.which(program), f"{name}: {program} is not installed"
    web = compose["services"]["web"]["command"][2]
    for django_command in ("migrate", "collectstatic", "bootstrap"):
        assert f"manage.py {django_command}" in web
    assert (ROOT / "manage.py").exists()
    assert "backend.config.wsgi:application" in web


def test_procfile_and_compose_run_the_same_programs():
    procfile = dict(line.split(":", 1) for line in (ROOT / "Procfile").read_text().splitlines() if line.strip())
    compose = load()
    for name in APP_SERVICES - {"web"}:
        assert procfile[name].split()[0] == compose["services"][name]["command"][0]
