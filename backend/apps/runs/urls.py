from django.urls import path

from backend.apps.runs import views

urlpatterns = [
    path("runs/", views.TaskRunListView.as_view(), name="run-list"),
    path("runs/<int:pk>/", views.TaskRunDetailView.as_view(), name="run-detail"),
    path("runs/<int:pk>/cancel", views.TaskRunCancelView.as_view(), name="run-cancel"),
]
