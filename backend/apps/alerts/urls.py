from django.urls import path

from backend.apps.alerts import views

urlpatterns = [
    path("alerts/", views.AlertListView.as_view(), name="alert-list"),
    path("alerts/status", views.AlertStatusView.as_view(), name="alert-status"),
    path("alerts/<int:pk>/", views.AlertDetailView.as_view(), name="alert-detail"),
    path("alerts/<int:pk>/ack", views.AlertAckView.as_view(), name="alert-ack"),
    path("alerts/<int:pk>/silence", views.AlertSilenceView.as_view(), name="alert-silence"),
    path("alert-rules/", views.AlertRuleListCreateView.as_view(), name="alert-rule-list"),
    path("alert-rules/<int:pk>/", views.AlertRuleDetailView.as_view(), name="alert-rule-detail"),
    path("alert-rules/<int:pk>/enabled", views.AlertRuleEnabledView.as_view(), name="alert-rule-enabled"),
    path("alert-channels/", views.ChannelListCreateView.as_view(), name="alert-channel-list"),
    path("alert-channels/<int:pk>/", views.ChannelDetailView.as_view(), name="alert-channel-detail"),
    path("alert-channels/<int:pk>/test", views.ChannelTestView.as_view(), name="alert-channel-test"),
]
