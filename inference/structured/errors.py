"""The one error structured output raises at the caller."""


class StructuredOutputError(ValueError):
    """A constraint (``StructuredOutputsParams``) that does not compile; the message is the grammar library's.

    Raised by ``LLMEngine.add_request`` before anything is queued (``AsyncLLM.stream`` raises it on iteration,
    as every rejected request's ``ValueError``)."""
