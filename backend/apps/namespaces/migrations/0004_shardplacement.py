import django.db.models.deletion
from django.db import migrations, models


def place_existing_shards(apps, schema_editor):
    """Namespaces created before placement existed keep every shard on their node."""
    Namespace = apps.get_model("namespaces", "Namespace")
    ShardPlacement = apps.get_model("namespaces", "ShardPlacement")
    rows = [
        ShardPlacement(namespace_id=ns.pk, shard=shard, node_id=ns.node_id)
        for ns in Namespace.objects.all()
        for shard in range(ns.shards)
    ]
    ShardPlacement.objects.bulk_create(rows, batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [
        ("namespaces", "0003_subscription"),
        ("nodes", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="ShardPlacement",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("shard", models.PositiveIntegerField()),
                (
                    "namespace",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="placements",
                        to="namespaces.namespace",
                    ),
                ),
                (
                    "node",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="shard_placements",
                        to="nodes.storagenode",
                    ),
                ),
            ],
            options={
                "ordering": ["namespace_id", "shard"],
                "constraints": [models.UniqueConstraint(fields=("namespace", "shard"), name="placement_unique_shard")],
            },
        ),
        migrations.RunPython(place_existing_shards, migrations.RunPython.noop),
    ]
