from django.urls import path

from backend.apps.messages.views import MessageBrowseView

urlpatterns = [path("namespaces/<str:name>/messages", MessageBrowseView.as_view(), name="namespace-messages")]
