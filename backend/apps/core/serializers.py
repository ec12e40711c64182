from rest_framework import serializers


class ComponentHealthSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    detail = serializers.CharField()
    last_heartbeat = serializers.DateTimeField(allow_null=True)


class HealthOutputSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "degraded"])
    checked_at = serializers.DateTimeField()
    components = serializers.DictField(child=ComponentHealthSerializer())


class LoginInputSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=200, trim_whitespace=False)


class MeOutputSerializer(serializers.Serializer):
    username = serializers.CharField()
    role = serializers.CharField()


class CsrfOutputSerializer(serializers.Serializer):
    csrftoken = serializers.CharField()
