"""The lake-export bench's pieces that need no Spark: the segment generator and the file statistics."""

from __future__ import annotations

import os
from pathlib import Path

from spark_jobs.bench import GenSpec, MiB, _tree_cpu_seconds, file_stats, generate_segments
from spark_jobs.segments import decode_segment_table
from spark_jobs.source import offline_segment_files


def test_generator_writes_sealed_segments_with_the_real_engine(tmp_path: Path) -> None:
    spec = GenSpec(
        total_bytes=MiB // 2, namespaces=1, shards=2, segment_bytes=64 * 1024, value_bytes=256, batch_records=20
    )
    figures = generate_segments(tmp_path / "data", spec)
    files = offline_segment_files(tmp_path / "data", include_active=True)
    assert figures["segment_files"] == len(files) and figures["sealed_segments"] >= 4
    assert figures["bytes"] == sum(f.size for f in files) >= MiB // 4
    decoded = sum(decode_segment_table(f).num_rows for f in files)
    assert decoded == figures["records"]
    table = decode_segment_table(files[0])
    assert table.column("key").null_count > 0 and table.column("expire_at").null_count < table.num_rows


def test_file_stats() -> None:
    assert file_stats([]) == {"count": 0, "min": 0, "median": 0, "max": 0, "total": 0, "under_64mib": 0}
    stats = file_stats([100 * MiB, 10, 70 * MiB])
    assert stats == {
        "count": 3,
        "min": 10,
        "median": 70 * MiB,
        "max": 100 * MiB,
        "total": 170 * MiB + 10,
        "under_64mib": 1,
    }


def test_cpu_of_a_process_tree() -> None:
    seconds = _tree_cpu_seconds(os.getpid())
    assert seconds is None or seconds > 0
