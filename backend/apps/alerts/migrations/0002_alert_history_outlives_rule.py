"""Alerts outlive their rule (issue 16): ``rule`` becomes nullable (SET_NULL) and each alert keeps a copy of
its rule's name, metric and severity, filled here for the alerts already stored.

Resolved alerts that never fired (stored before pending alerts that clear were dropped) are kept: the
console reads them as "cleared before firing".
"""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def copy_rule_fields(apps, schema_editor):
    Alert = apps.get_model("alerts", "Alert")
    AlertRule = apps.get_model("alerts", "AlertRule")
    rule = AlertRule.objects.filter(pk=OuterRef("rule_id"))
    Alert.objects.update(
        rule_name=Subquery(rule.values("name")[:1]),
        metric=Subquery(rule.values("metric")[:1]),
        severity=Subquery(rule.values("severity")[:1]),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("alerts", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="alert",
            name="metric",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="alert",
            name="rule_name",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name="alert",
            name="severity",
            field=models.CharField(
                choices=[("info", "Info"), ("warning", "Warning"), ("critical", "Critical")],
                default="warning",
                max_length=10,
            ),
        ),
        migrations.AlterField(
            model_name="alert",
            name="rule",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="alerts",
                to="alerts.alertrule",
            ),
        ),
        migrations.RunPython(copy_rule_fields, migrations.RunPython.noop),
    ]
