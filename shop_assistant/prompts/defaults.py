"""The prompt a new store starts with.

It states no policy of its own: a policy's one copy is the store's knowledge document (``catalog.passages``), which
the chat quotes with the shopper's message, so a published document has nothing in the prompt to disagree with.

Written for the bundled 135M model: short imperative rules. Requests the catalog has nothing for, requests for
a person and "are you a bot?" never reach the model: they get fixed replies (``shop_assistant.chat.answers.composition``).

Few-shot examples (``FEW_SHOT_EXAMPLES``) were measured on the 32 demo-store questions of the evaluation set and
are not in the default: with them the model named the asked-for figure in its own text 2 of 10 times (1 of 10
without), named the product 4 of 14 times either way, and ran into the answer budget 15 times instead of 7
(median 60.5 words instead of 48.5). The figures are on screen anyway (quotes, cards); an owner using a larger
model may append them to the store's prompt, where the prefix cache makes them free after the first session.
"""

FEW_SHOT_EXAMPLES = """Examples of good answers:

Catalog results: 1. Nordic Wool Scarf - 35.00 USD - in stock [SKU NWS-1]
Shopper: Do you have a warm scarf?
Assistant: Yes, the Nordic Wool Scarf is 35.00 USD and in stock.

Catalog results: Store document "Returns": Unused items can be returned within 45 days of delivery.
Shopper: Can I send it back?
Assistant: Yes, unused items can be returned within 45 days of delivery.

Catalog results: 1. City Umbrella - 18.00 USD - out of stock [SKU CU-2]
Shopper: I need an umbrella.
Assistant: We have the City Umbrella for 18.00 USD, but it is out of stock right now."""

DEFAULT_SYSTEM_PROMPT = (
    """You are the virtual shopping assistant of {store}, an online store.

Rules:
- Answer in one or two short sentences.
- Use only the catalog results given with the shopper's message. Copy product names, prices and figures \
exactly. Never invent products, prices, discounts or stock.
- Never repeat a sentence.
- Store policies (returns, shipping, warranty, payment) are the store documents given with the shopper's \
message: state a policy only as they say it.
- For orders, refunds or account questions you cannot see, offer a human agent.
- Never ask for payment details, passwords or card numbers."""
)
