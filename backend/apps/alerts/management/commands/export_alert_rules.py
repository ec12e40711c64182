"""Write the alert rules as a Prometheus rule file (for teams that alert through Prometheus and Alertmanager).

The expressions read the storage nodes' own series and compare them with the thresholds the console
publishes on its ``/metrics`` (``backend/apps/alerts/promql.py``): a threshold, a policy value or a rule's
enabled state change without a new export; a new rule, or a changed metric, scope, comparator, ``for`` or
severity, needs one. Prometheus scrapes the nodes as job ``--node-job`` and the console as ``--web-job``.
"""

from __future__ import annotations

from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandParser

from backend.apps.alerts.models import AlertRule
from backend.apps.alerts.promql import NODE_JOB, WEB_JOB, export


class Command(BaseCommand):
    help = "Write the alert rules as a Prometheus rule file over the nodes' series (docs/metrics.md)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-o", "--output", default="-", help="file to write (default: standard output)")
        parser.add_argument(
            "--all", action="store_true", help="include disabled rules (inert until enabled in the console)"
        )
        parser.add_argument("--node-job", default=NODE_JOB, help=f"the nodes' scrape job (default {NODE_JOB})")
        parser.add_argument("--web-job", default=WEB_JOB, help=f"the console's scrape job (default {WEB_JOB})")

    def handle(self, *args: Any, **options: Any) -> None:
        rules = AlertRule.objects.order_by("name")
        if not options["all"]:
            rules = rules.filter(enabled=True)
        document = export(list(rules), node_job=options["node_job"], web_job=options["web_job"])
        text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=1_000)
        if options["output"] == "-":
            self.stdout.write(text, ending="")
        else:
            with open(options["output"], "w", encoding="utf-8") as handle:
                handle.write(text)
            count = sum(len(group["rules"]) for group in document["groups"])
            self.stdout.write(f"wrote {count} rules to {options['output']}")
