"""orders.replies: a reply that sends a request to agents says what was asked for, then the one sentence on what
happens next (``UNTIL_DECIDED``), for returns, exchanges and cancellations alike."""

from __future__ import annotations

from shop_assistant.orders import replies

NEXT = "A person will confirm it here in this chat; nothing changes on your order until then."


def test_each_request_reply_ends_with_what_happens_next():
    assert replies.requested(replies.RETURN_REQUESTED, items="1 × Boots", number="1001") == (
        f"I've sent a return request for 1 × Boots from order #1001 to our team. {NEXT}"
    )
    assert replies.requested(replies.EXCHANGE_REQUESTED, items="Boots", number="1001", wanted=" (for US 10)") == (
        f"I've sent an exchange request for Boots from order #1001 (for US 10) to our team. {NEXT}"
    )
    assert replies.requested(replies.CANCEL_REQUESTED, number="1004") == (
        f"Order #1004 hasn't shipped yet, so I've asked our team to cancel it. {NEXT}"
    )
