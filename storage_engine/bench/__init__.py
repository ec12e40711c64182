"""Benchmarks: ``python -m storage_engine.bench <bench> [options] --json``.

Each bench is a module exposing ``add_arguments(parser)`` and
``run(args, data_dir) -> Iterator[dict]``; every result line carries at least
``bench, system, records, seconds, msgs_per_s, mb_per_s, p50_ms, p99_ms``.
"""
