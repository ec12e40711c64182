from django.contrib import admin

from backend.apps.lifecycle.models import Lease


@admin.register(Lease)
class LeaseAdmin(admin.ModelAdmin):
    list_display = ("key", "holder", "expires_at")
    readonly_fields = ("key", "holder", "expires_at")
