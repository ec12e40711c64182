from functools import cache
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import authenticate, login, logout
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.views import defaults
from django.views.csrf import csrf_failure as django_csrf_failure
from django.views.decorators.csrf import csrf_exempt, ensure_csrf_cookie
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.apps.core.exceptions import InvalidCredentials
from backend.apps.core.problems import is_api, problem_json, sentence
from backend.apps.core.roles import role_of
from backend.apps.core.selectors import readiness
from backend.apps.core.serializers import (
    CsrfOutputSerializer,
    LoginInputSerializer,
    MeOutputSerializer,
)
from backend.apps.core.throttling import LoginRateThrottle, check_login_attempt


def _me(user: Any) -> dict[str, Any]:
    return MeOutputSerializer({"username": user.get_username(), "role": role_of(user)}).data


class CsrfView(APIView):
    """The CSRF token a browser sends back in X-CSRFToken with every write (also set as the csrftoken
    cookie)."""

    permission_classes = [AllowAny]

    @extend_schema(summary="Get a CSRF token", responses=CsrfOutputSerializer, tags=["auth"])
    def get(self, request: Request) -> Response:
        return Response({"csrftoken": get_token(request._request)})


class LoginView(APIView):
    """Log in with a username and password: a session cookie. Throttled per client address, together with the
    admin's login page (429 with Retry-After); a wrong password is 400 (`invalid_credentials`)."""

    permission_classes = [AllowAny]
    throttle_classes = [LoginRateThrottle]  # shared with /admin/login/ (see throttling)

    @extend_schema(summary="Log in", request=LoginInputSerializer, responses={200: MeOutputSerializer}, tags=["auth"])
    def post(self, request: Request) -> Response:
        # DRF exempts anonymous requests from CSRF; a login form must not be (login CSRF).
        SessionAuthentication().enforce_csrf(request)
        data = LoginInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = authenticate(request._request, **data.validated_data)
        if user is None:
            raise InvalidCredentials()
        login(request._request, user)
        return Response(_me(user))


class LogoutView(APIView):
    """End the session."""

    permission_classes = [IsAuthenticated]

    @extend_schema(summary="Log out", request=None, responses={204: None}, tags=["auth"])
    def post(self, request: Request) -> Response:
        logout(request._request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MeView(APIView):
    """Who is logged in (session or token) and with which role."""

    permission_classes = [IsAuthenticated]

    @extend_schema(summary="The current user", responses=MeOutputSerializer, tags=["auth"])
    def get(self, request: Request) -> Response:
        return Response(_me(request.user))


def admin_login(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    """The admin's login page, under the same login throttle as ``/api/auth/login``."""
    if request.method == "POST":
        wait = check_login_attempt(request)
        if wait is not None:
            response = HttpResponse(
                f"Too many login attempts from your address; try again in {wait:.0f} s.\n",
                status=429,
                content_type="text/plain; charset=utf-8",
            )
            response["Retry-After"] = f"{wait:.0f}"
            return response
    return admin.site.login(request, extra_context)


@cache
def _index_html() -> bytes | None:
    path = settings.FRONTEND_DIST / "index.html"
    return path.read_bytes() if path.exists() else None


@ensure_csrf_cookie
def spa(request: HttpRequest, path: str = "") -> HttpResponse:
    """Every non-API path serves the single-page app, which routes in the browser."""
    html = _index_html()
    if html is None:
        return HttpResponse("The UI is not built. Run `make ui` (or `make up`).", status=503, content_type="text/plain")
    return HttpResponse(html, content_type="text/html; charset=utf-8")


@csrf_exempt  # it changes nothing, and a CSRF refusal would hide the real answer
def api_not_found(request: HttpRequest) -> JsonResponse:
    """Unknown ``/api/`` routes answer problem details like every other API error, not an HTML page."""
    return problem_json(request, 404, "not_found", f"No API route {request.path}.")


def livez(request: HttpRequest) -> JsonResponse:
    """Liveness probe: the process answers (no dependency is checked: restarting would not fix one)."""
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness probe: 200 when the database and the broker answer, else 503 naming what failed
    (a load balancer then sends no traffic here)."""
    checks = readiness()
    ready = all(c.ok for c in checks.values())
    body = {
        "status": "ready" if ready else "not ready",
        "checks": {name: {"ok": c.ok, "detail": c.detail} for name, c in checks.items()},
    }
    return JsonResponse(body, status=200 if ready else 503)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF refusals answer JSON on the API (the UI shows the message) and Django's page elsewhere."""
    if is_api(request.path):
        return problem_json(request, 403, "csrf_failed", sentence(f"CSRF check failed: {reason}"))
    return django_csrf_failure(request, reason)


# Django's own error pages (handler400/403/404/500 in the root URLconf): problem details on /api/ paths,
# Django's pages elsewhere (the SPA and the admin are unchanged).
def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request.path):
        return problem_json(request, 400, "bad_request", "The request could not be understood.")
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request.path):
        return problem_json(request, 403, "permission_denied", "You do not have permission to perform this action.")
    return defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request.path):
        return problem_json(request, 404, "not_found", f"No API route {request.path}.")
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api(request.path):
        return problem_json(
            request, 500, "internal_error", "The server failed to answer; the details are in its log only."
        )
    return defaults.server_error(request)
