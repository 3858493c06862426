from django.apps import AppConfig


class StudioConfig(AppConfig):
    """The owner's studio: the assistant's prompt, settings and versions."""

    name = "shop_assistant.studio"
    # Its tables (the prompt's versions, the sample questions) are the ``prompts`` app's, below the chat.
    label = "studio"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from .receivers import give_new_store_the_default_prompt, record_a_document_written_outside_the_studio

        post_save.connect(give_new_store_the_default_prompt, sender="catalog.Store", dispatch_uid="studio-default-prompt")
        post_save.connect(
            record_a_document_written_outside_the_studio, sender="catalog.StoreDocument",
            dispatch_uid="studio-document-versions",
        )
