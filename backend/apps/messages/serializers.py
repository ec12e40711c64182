from rest_framework import serializers


class BrowseInputSerializer(serializers.Serializer):
    shard = serializers.IntegerField(min_value=0)
    offset = serializers.IntegerField(min_value=0, required=False)
    time = serializers.IntegerField(
        min_value=0, required=False, help_text="epoch ms: start at the first record at or after it"
    )
    key = serializers.CharField(required=False, max_length=1000)
    tag = serializers.CharField(required=False, max_length=255)
    limit = serializers.IntegerField(min_value=1, max_value=200, default=50)
    display = serializers.ChoiceField(choices=["text", "hex"], default="text", help_text="how values are shown")


class ShownBytesSerializer(serializers.Serializer):
    text = serializers.CharField(allow_null=True)
    hex = serializers.CharField(allow_null=True)
    size = serializers.IntegerField()
    truncated = serializers.BooleanField()
    tombstone = serializers.BooleanField()


class MessageSerializer(serializers.Serializer):
    offset = serializers.IntegerField()
    timestamp = serializers.IntegerField()
    expire_at = serializers.IntegerField(allow_null=True)
    key = ShownBytesSerializer(allow_null=True)
    value = ShownBytesSerializer()
    tags = serializers.ListField(child=serializers.CharField())
    headers = serializers.DictField(child=ShownBytesSerializer())


class BrowseOutputSerializer(serializers.Serializer):
    records = MessageSerializer(many=True)
    next_offset = serializers.IntegerField(allow_null=True)
