from django.apps import AppConfig


class PromptsConfig(AppConfig):
    """The store's system prompt as versions, and the sample questions: the tables, and the read the chat needs
    (``models.published_prompt``). Below the chat and the studio: the studio writes the versions, the chat reads
    the published one, and neither has to import the other for it."""

    name = "shop_assistant.prompts"
    # The tables and migrations were made under this label when these models were the studio's.
    label = "prompts"
    default_auto_field = "django.db.models.BigAutoField"
