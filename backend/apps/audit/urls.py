from django.urls import path

from backend.apps.audit.views import AuditEntryListView

urlpatterns = [path("audit/", AuditEntryListView.as_view(), name="audit-list")]
