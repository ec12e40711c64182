from typing import Any

from rest_framework import serializers

from backend.apps.core.serializers import Int64TextField, ProblemSerializer, StrictSerializer
from backend.apps.core.serializers import NodeRefusalSerializer as NodeRefusalSerializer  # the views' 413/429/507
from storage_engine.policies.bounds import MAX_TTL_MS, int_rule, range_rule


def bounded_int(field: str, minimum: int, maximum: int, **kwargs: Any) -> serializers.IntegerField:
    """An integer field refused in the engine's words (:mod:`storage_engine.policies.bounds`): its numbers and the
    unit its name carries (``ttl_ms``: "must be at least 1 ms"), not DRF's unit-less defaults."""
    messages = {
        "invalid": int_rule(minimum, maximum, field),
        "max_string_length": int_rule(minimum, maximum, field),
        "min_value": range_rule(field, minimum, None),
        "max_value": range_rule(field, None, maximum),
    }
    return serializers.IntegerField(min_value=minimum, max_value=maximum, error_messages=messages, **kwargs)


class BrowseInputSerializer(serializers.Serializer):
    shard = serializers.IntegerField(
        min_value=0,
        required=False,
        help_text="the shard to read; without it a key is looked up in its own shard first "
        "(then the others) and a time searches every shard",
    )
    offset = Int64TextField(required=False, help_text="start at this offset of the shard (decimal digits)")
    time = Int64TextField(
        required=False, help_text="epoch ms (decimal digits): start at the first record at or after it"
    )
    key = serializers.CharField(required=False, max_length=1000, help_text="the latest record with this key (UTF-8)")
    tag = serializers.CharField(required=False, max_length=255, help_text="only records carrying this tag")
    positions = serializers.CharField(
        required=False,
        max_length=10_000,
        help_text="continue a search across shards: shard:offset pairs (the last page's next_positions)",
    )
    all_shards = serializers.BooleanField(
        required=False,
        default=False,
        help_text="key lookup without a shard: ask every shard, not only until one has the key",
    )
    limit = serializers.IntegerField(min_value=1, max_value=200, default=50, help_text="at most this many records")
    display = serializers.ChoiceField(choices=["text", "hex"], default="text", help_text="how values are shown")


class ShownBytesSerializer(serializers.Serializer):
    text = serializers.CharField(allow_null=True)
    hex = serializers.CharField(allow_null=True)
    size = serializers.IntegerField()
    truncated = serializers.BooleanField()
    tombstone = serializers.BooleanField()


class MessageSerializer(serializers.Serializer):
    shard = serializers.IntegerField(help_text="the shard the record was read from")
    offset = serializers.IntegerField()
    timestamp = serializers.IntegerField()
    expire_at = serializers.IntegerField(allow_null=True)
    effective_expires_at = serializers.IntegerField(
        allow_null=True,
        help_text="epoch ms when the record expires: min(expire_at, timestamp + the namespace's ttl_ms); "
        "null when it never does",
    )
    key = ShownBytesSerializer(allow_null=True)
    value = ShownBytesSerializer()
    tags = serializers.ListField(child=serializers.CharField())
    headers = serializers.DictField(child=ShownBytesSerializer())


class BrowseOutputSerializer(serializers.Serializer):
    records = MessageSerializer(many=True)
    next_offset = serializers.IntegerField(allow_null=True, help_text="one shard: where the next page starts")
    next_positions = serializers.CharField(
        allow_null=True, help_text="across shards: pass back as positions for the next page (null: nothing read)"
    )
    shards = serializers.ListField(child=serializers.IntegerField(), help_text="the shards asked, in order")
    key_shard = serializers.IntegerField(
        required=False, help_text="key lookup without a shard: the shard placement by key puts the key on"
    )


class OutOfRangeSerializer(ProblemSerializer):
    """416 problem details (code offset_out_of_range) with both bounds."""

    namespace = serializers.CharField()
    shard = serializers.IntegerField()
    offset = serializers.IntegerField()
    log_start_offset = serializers.IntegerField(help_text="the first offset still stored")
    end_offset = serializers.IntegerField(help_text="one past the last offset")
    below_log_start = serializers.BooleanField(help_text="true: deleted by retention or expiry; false: past the end")


class ProduceInputSerializer(StrictSerializer):
    """A test message. Text in, UTF-8 on the wire; unknown fields are refused."""

    key = serializers.CharField(
        required=False, allow_null=True, max_length=1000, trim_whitespace=False, help_text="places the record by key"
    )
    value = serializers.CharField(
        allow_null=True, allow_blank=True, trim_whitespace=False, max_length=1 << 20, help_text="null: a tombstone"
    )
    tags = serializers.ListField(
        child=serializers.CharField(max_length=255, trim_whitespace=False), required=False, max_length=64, default=list
    )
    headers = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=65_536),
        required=False,
        default=dict,
    )
    ttl_ms = bounded_int(
        "ttl_ms", 1, MAX_TTL_MS, required=False, allow_null=True, help_text="expires this long after the node has it"
    )
    shard = serializers.IntegerField(
        min_value=0, required=False, allow_null=True, help_text="a chosen shard; default: by key, keyless round-robin"
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        for name in attrs.get("headers", {}):
            if not name or len(name) > 255:
                raise serializers.ValidationError({"headers": [f"a header name must be 1-255 characters: {name!r}"]})
        shards = self.context["namespace"].shards
        if attrs.get("shard") is not None and attrs["shard"] >= shards:
            raise serializers.ValidationError({"shard": [f"must be from 0 to {shards - 1}"]})
        return attrs


class ProduceOutputSerializer(serializers.Serializer):
    shard = serializers.IntegerField()
    offset = serializers.IntegerField()
    node = serializers.CharField(help_text="the node that stored it")
