from django.apps import AppConfig


class StudioConfig(AppConfig):
    """The owner's studio: the assistant's prompt, settings and versions."""

    name = "shop_assistant.studio"
    # The label the tables and migrations were made under (the app was called "prompts"): renaming it would
    # rename every table.
    label = "prompts"
    default_auto_field = "django.db.models.BigAutoField"
