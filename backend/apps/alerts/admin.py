from django.contrib import admin

from backend.apps.alerts.models import Alert, AlertEvent, AlertRule, Channel, Notification


@admin.register(AlertRule)
class AlertRuleAdmin(admin.ModelAdmin):
    list_display = ("name", "metric", "comparator", "threshold", "threshold_policy", "for_s", "severity", "enabled")
    list_filter = ("severity", "enabled", "metric")


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "target", "enabled")
    exclude = ("secret",)


class AlertEventInline(admin.TabularInline):
    model = AlertEvent
    extra = 0
    readonly_fields = ("kind", "at", "value", "actor", "detail")


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ("id", "rule", "labels_key", "state", "value", "started_at", "fired_at", "resolved_at")
    list_filter = ("state",)
    list_select_related = ("rule",)
    inlines = [AlertEventInline]
    readonly_fields = [f.name for f in Alert._meta.fields]


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("id", "channel", "alert", "status", "attempts", "next_attempt_at", "sent_at")
    list_filter = ("status",)
    readonly_fields = [f.name for f in Notification._meta.fields]
