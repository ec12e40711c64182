"""Control-plane benchmarks: ``python -m backend.bench <name> --json``."""
