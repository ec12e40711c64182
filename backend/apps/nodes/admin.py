from typing import Any

from django import forms
from django.contrib import admin
from rest_framework import serializers

from backend.apps.nodes.models import StorageNode
from backend.apps.nodes.serializers import check_node_token, check_node_url
from backend.apps.nodes.services import TOKEN_REQUIRED, given_token


class StorageNodeForm(forms.ModelForm):
    """The stored token is never shown; a new one is typed in, and must be with a new URL."""

    url = forms.URLField(max_length=300, assume_scheme="http")
    new_token = forms.CharField(
        required=False,
        strip=False,
        max_length=300,
        widget=forms.PasswordInput(render_value=False),
        help_text="Leave empty to keep the stored token. Required when the URL changes.",
    )

    class Meta:
        model = StorageNode
        exclude = ("token",)

    def _checked(self, check: Any, value: str) -> str:
        try:
            return str(check(value))
        except serializers.ValidationError as exc:
            raise forms.ValidationError(" ".join(str(m) for m in exc.detail)) from None

    def clean_url(self) -> str:
        return self._checked(check_node_url, self.cleaned_data["url"])

    def clean_new_token(self) -> str:
        return self._checked(check_node_token, given_token(self.cleaned_data.get("new_token")) or "")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.instance.pk and "url" in self.changed_data and not data.get("new_token"):
            self.add_error("new_token", TOKEN_REQUIRED)
        return data

    def save(self, commit: bool = True) -> StorageNode:
        node = super().save(commit=False)
        if self.cleaned_data.get("new_token"):
            node.token = self.cleaned_data["new_token"]
        if commit:
            node.save()
        return node


@admin.register(StorageNode)
class StorageNodeAdmin(admin.ModelAdmin):
    form = StorageNodeForm
    list_display = ("name", "url", "healthy", "last_seen_at", "policy_sync_state", "policy_version")
