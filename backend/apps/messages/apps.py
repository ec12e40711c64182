from django.apps import AppConfig


class MessagesConfig(AppConfig):
    name = "backend.apps.messages"
    label = "lcs_messages"  # "messages" is Django's contrib app
