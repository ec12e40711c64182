from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from backend.apps.core.views import admin_login, api_not_found, livez, readyz, spa
from backend.apps.metrics.views import PrometheusView

api = [
    path("", include("backend.apps.core.urls")),
    path("", include("backend.apps.namespaces.urls")),
    path("", include("backend.apps.nodes.urls")),
    path("", include("backend.apps.policies.urls")),
    path("", include("backend.apps.audit.urls")),
    path("", include("backend.apps.catalog.urls")),
    path("", include("backend.apps.runs.urls")),
    path("", include("backend.apps.messages.urls")),
    path("", include("backend.apps.lifecycle.urls")),
    path("", include("backend.apps.metrics.urls")),
    path("", include("backend.apps.alerts.urls")),
    path("", include("backend.apps.reports.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    re_path(r"^.*$", api_not_found),
]

urlpatterns = [
    path("api/", include(api)),
    path("admin/login/", admin_login, name="admin-login-throttled"),  # before the admin: throttled
    path("admin/", admin.site.urls),
    path("metrics", PrometheusView.as_view(), name="metrics-prometheus"),  # before the SPA catch-all
    path("livez", livez, name="livez"),
    path("readyz", readyz, name="readyz"),
    re_path(r"^(?!api/|admin/|static/)(?P<path>.*)$", spa, name="spa"),
]

# Django's error answers: problem details under /api/, Django's pages elsewhere.
handler400 = "backend.apps.core.views.bad_request"
handler403 = "backend.apps.core.views.permission_denied"
handler404 = "backend.apps.core.views.page_not_found"
handler500 = "backend.apps.core.views.server_error"
