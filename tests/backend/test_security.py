"""Safety of the control plane: login throttling, outgoing URLs, node tokens, denied writes, strict input,
the offline API docs."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urlsplit

from rest_framework.test import APIClient


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.urls.append(value)


def test_swagger_ui_is_served_offline_from_the_app(db):
    client = APIClient()
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    parser = _Assets()
    parser.feed(html)
    assert len(parser.urls) >= 3, parser.urls  # stylesheet, bundle, preset (and the favicon)
    for url in parser.urls:
        parts = urlsplit(url)
        assert not parts.scheme and not parts.netloc, f"{url} is not same-origin"
        answer = client.get(url)
        assert answer.status_code == 200, url
        if answer.streaming:
            assert b"".join(answer.streaming_content)
    assert "cdn" not in html.lower()
    assert client.get("/api/schema/").status_code == 200
