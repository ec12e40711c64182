from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("lifecycle", "0001_initial"),
        ("nodes", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="DueSweep",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(max_length=40)),
                ("due_ms", models.BigIntegerField()),
                ("eta", models.DateTimeField()),
                ("token", models.CharField(blank=True, default="", max_length=40)),
                ("fired", models.BooleanField(default=False)),
                (
                    "node",
                    models.ForeignKey(
                        on_delete=models.deletion.CASCADE, related_name="due_sweeps", to="nodes.storagenode"
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("node", "kind"), name="one_due_sweep_per_node_and_kind")
                ],
            },
        ),
    ]
