"""The lifecycle schedules move from one django-celery-beat periodic task per target ("lifecycle: <kind> of
namespace <n>", "lifecycle: <kind> of node <n>", "lifecycle: due times of node <n>") to the ``Schedule``
table. The old rows go; ``manage.py bootstrap`` (run after every migrate by ``make up`` and the compose
file) derives the table from the policies, and beat ticks it through one static periodic task."""

from django.db import migrations

OLD_PREFIX = "lifecycle: "  # every per-target task the old code wrote (``schedule_name``, ``due_poll_name``)


def remove_per_target_periodic_tasks(apps, schema_editor):
    periodic_task = apps.get_model("django_celery_beat", "PeriodicTask")
    periodic_tasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    deleted, _ = periodic_task.objects.filter(name__startswith=OLD_PREFIX).delete()
    if deleted:  # tell a running beat its schedule changed (what PeriodicTasks.update_changed does)
        from django.utils import timezone

        periodic_tasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


class Migration(migrations.Migration):
    dependencies = [
        ("lifecycle", "0003_schedule"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(remove_per_target_periodic_tasks, migrations.RunPython.noop)]
