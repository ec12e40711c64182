"""ShardStatus carries the engine's split of its stored bytes (issue 26): local_bytes + remote_only_bytes =
size_bytes. The old remote_bytes (everything in the object store, overlapping local_bytes) goes. Existing rows
get the split of their catalog segments (remote only: tier remote; local: the rest of size_bytes), so the
identity holds at once; the next metrics collection writes both from the node's /v1/stats."""

from django.db import migrations, models
from django.db.models import Sum


def split_existing(apps, schema_editor):
    ShardStatus = apps.get_model("catalog", "ShardStatus")
    Segment = apps.get_model("catalog", "Segment")
    remote = {
        (row["namespace_id"], row["shard"]): int(row["total"] or 0)
        for row in Segment.objects.filter(tier="remote")
        .values("namespace_id", "shard")
        .annotate(total=Sum("size_bytes"))
    }
    for row in ShardStatus.objects.all().iterator():
        remote_only = min(remote.get((row.namespace_id, row.shard), 0), row.size_bytes)
        ShardStatus.objects.filter(pk=row.pk).update(
            remote_only_bytes=remote_only, local_bytes=row.size_bytes - remote_only
        )


class Migration(migrations.Migration):
    dependencies = [("catalog", "0006_segment_tier")]

    operations = [
        migrations.RemoveField(model_name="shardstatus", name="remote_bytes"),
        migrations.AddField(
            model_name="shardstatus", name="remote_only_bytes", field=models.BigIntegerField(default=0)
        ),
        migrations.RunPython(split_existing, migrations.RunPython.noop),
    ]
