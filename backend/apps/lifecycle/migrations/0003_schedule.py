import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("lifecycle", "0002_duesweep"),
        ("namespaces", "0004_shardplacement"),
        ("nodes", "0003_storagenode_policy_sync"),
    ]

    operations = [
        migrations.CreateModel(
            name="Schedule",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(max_length=40)),
                ("interval_s", models.PositiveIntegerField()),
                ("next_due", models.DateTimeField(db_index=True)),
                ("last_started", models.DateTimeField(blank=True, null=True)),
                ("enabled", models.BooleanField(default=True)),
                (
                    "namespace",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="schedules",
                        to="namespaces.namespace",
                    ),
                ),
                (
                    "node",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="schedules",
                        to="nodes.storagenode",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("namespace__isnull", False), ("node__isnull", True)),
                            models.Q(("namespace__isnull", True), ("node__isnull", False)),
                            _connector="OR",
                        ),
                        name="schedule_targets_a_namespace_or_a_node",
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("namespace__isnull", False)),
                        fields=("namespace", "kind"),
                        name="one_schedule_per_namespace_and_kind",
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("node__isnull", False)),
                        fields=("node", "kind"),
                        name="one_schedule_per_node_and_kind",
                    ),
                ],
            },
        ),
    ]
