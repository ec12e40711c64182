"""Filling a node's disk quota raises the disk alerts, the file cleaner's forced
deletion brings use back down, and the alerts resolve (real node, injected time)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from backend.apps.alerts import evaluation as alerts
from backend.apps.alerts.models import Alert
from backend.apps.lifecycle import services as lifecycle
from backend.apps.metrics import services as metrics
from backend.apps.namespaces.models import Namespace
from backend.apps.namespaces.services import create_namespace, delete_namespace
from backend.apps.nodes.gateway import node_health_summary
from backend.apps.nodes.models import StorageNode
from storage_engine.api import NewRecord
from storage_engine.errors import StorageError
from storage_engine.node_api.client import NodeClient
from tests.support.processes import start_node

CAPACITY = 3_000_000


@pytest.fixture
def small_node(tmp_path, settings, django_capture_on_commit_callbacks):
    proc = start_node(tmp_path / "node", extra=["--disk-capacity", str(CAPACITY)])
    settings.NODE_URL, settings.NODE_TOKEN = proc.url, proc.token
    row = StorageNode.objects.create(name="node-1", url=proc.url, token=proc.token)
    yield row, proc
    proc.stop()


def firing(now) -> set[str]:  # type: ignore[no-untyped-def]
    alerts.evaluate(now=now)
    return set(Alert.objects.filter(state="firing").values_list("rule__default_key", flat=True))


def test_disk_alerts_fire_forced_deletion_cleans_and_they_resolve(db, small_node):
    row, proc = small_node
    create_namespace(name="fill", shards=1, policy={"segment_bytes": 64 * 1024, "retention_ms": None})
    with NodeClient(proc.url, proc.token) as client:
        used = client.check_disk()["used_ratio"]
        while used <= 0.92:
            try:
                client.append("fill", 0, [NewRecord(value=b"x" * 8000)] * 4)
            except StorageError:
                break  # disk full: the node refuses writes above the warning watermark
            used = client.check_disk()["used_ratio"]
        assert client.check_disk()["used_ratio"] > 0.90
        # The console's health names the node degraded while it refuses writes (its /health says why).
        healthy, detail = node_health_summary()
        assert not healthy and detail == "node-1: degraded (disk_full)", (detail, client.check_disk())
    now = timezone.now()
    metrics.collect(now=now)
    assert "disk_warning" in firing(now)  # `for` 0: at once
    metrics.collect(now=now + timedelta(seconds=61))
    assert {"disk_warning", "disk_clean_forcibly"} <= firing(now + timedelta(seconds=61))

    run = lifecycle.create_run(kind="file_clean", node=row, schedule="test")
    while lifecycle.run_step(run.pk) is lifecycle.StepOutcome.MORE:
        pass
    run.refresh_from_db()
    assert run.state == "succeeded" and run.counts["forced_deletes"] > 0, (run.state, run.counts, run.error)

    with NodeClient(proc.url, proc.token) as client:
        # Forced cleaning stopped once use was back at disk_clean_forcibly_ratio. About a second
        # later RocksDB writes ~30 KB of compaction notes to its info log (index/LOG), which the
        # quota counts too (1 point of this 3 MB disk): a CI run that measured after that saw
        # 0.852. What the cleaner freed is judged without that log; the alerts below use it all.
        disk = client.check_disk()
        info_log = sum(f.stat().st_size for f in proc.data_dir.rglob("LOG*") if f.is_file())
        assert (disk["used_bytes"] - info_log) / disk["capacity_bytes"] <= 0.85, (disk, info_log)
        assert not disk["disk_full"], disk
        client.append("fill", 0, [NewRecord(value=b"writes resume")])
    assert node_health_summary()[0]
    later = now + timedelta(seconds=180)
    metrics.collect(now=later)
    # Forced cleaning stops as soon as use is back at disk_clean_forcibly_ratio, so use may sit just
    # under it and the node's own writes (the append above, RocksDB's WAL and LOG) may take it back
    # over: only the warning watermark, 5 points higher, is sure to have cleared.
    assert "disk_warning" not in firing(later)
    assert Alert.objects.filter(rule__default_key="disk_warning", state="resolved").exists()

    # The operator frees the disk for good: the clean-forcibly alert resolves too.
    delete_namespace(namespace=Namespace.objects.get(name="fill"), actor=None)
    with NodeClient(proc.url, proc.token) as client:
        assert client.check_disk()["used_ratio"] < 0.5
    freed = later + timedelta(seconds=60)
    metrics.collect(now=freed)
    assert not {"disk_warning", "disk_clean_forcibly"} & firing(freed)
    assert Alert.objects.filter(rule__default_key="disk_clean_forcibly", state="resolved").exists()
