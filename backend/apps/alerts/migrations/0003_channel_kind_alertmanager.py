"""Issue 18: a channel may be an Alertmanager (its alerts API v2); the kind's column grows to hold the name."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("alerts", "0002_alert_history_outlives_rule"),
    ]

    operations = [
        migrations.AlterField(
            model_name="channel",
            name="kind",
            field=models.CharField(
                choices=[("email", "Email"), ("webhook", "Webhook"), ("alertmanager", "Alertmanager")], max_length=20
            ),
        ),
    ]
