"""The package's version, as installed (``pyproject.toml``), for ``--version`` and build-info metrics."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "lifecycle-store"


def package_version() -> str:
    """The installed distribution's version; ``unknown`` when run from a tree that was never installed."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"
