from django.conf import settings
from django.db import models


class ClusterPolicy(models.Model):
    """The editable cluster default: overrides of the built-in namespace policy (one row)."""

    overrides = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        verbose_name_plural = "cluster policy"

    def __str__(self) -> str:
        return f"cluster policy ({len(self.overrides)} overrides)"
