"""shop_assistant.chat.protocol.frames: each frame's schema, and the protocol's error code and message for a wrong one."""

import uuid

import pytest

from shop_assistant.chat.protocol import frames
from shop_assistant.chat.protocol.frames import ProtocolError

ID = str(uuid.uuid4())


def refused(frame: dict) -> tuple[str, str, dict]:
    with pytest.raises(ProtocolError) as caught:
        frames.parse(frame)
    return caught.value.code, caught.value.message, caught.value.extra


def test_good_frames_become_their_schemas_and_ignore_other_keys():
    message = frames.parse({"type": "message", "text": "hi", "client_id": ID, "extra": 1})
    assert isinstance(message, frames.MessageFrame) and message.text == "hi" and message.client_id == uuid.UUID(ID)
    assert frames.parse({"type": "message", "text": "hi"}).client_id is None
    assert frames.parse({"type": "rate", "message_id": ID, "value": -1}).value == -1
    csat = frames.parse({"type": "csat", "rating": 5, "comment": None})
    assert (csat.rating, csat.comment) == (5, "")
    assert frames.parse({"type": "csat", "rating": 4, "comment": " great\x00 "}).comment == "great"
    assert frames.parse({"type": "card_click", "message_id": ID, "sku": "A-1"}).sku == "A-1"
    assert isinstance(frames.parse({"type": "stop"}), frames.StopFrame)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        ({"type": "message"}, 'a message needs a string "text"'),
        ({"type": "message", "text": 3}, 'a message needs a string "text"'),
        ({"type": "message", "text": "hi", "client_id": "nope"}, '"client_id" is a UUID string (the widget\'s id of the message)'),
        ({"type": "rate", "message_id": 5, "value": 1}, 'a string "message_id" is needed'),
        ({"type": "rate", "message_id": "x", "value": 1}, '"message_id" is not a message id'),
        ({"type": "rate", "message_id": ID, "value": True}, '"value" is 1 (helpful), -1 (not helpful) or 0 (no rating)'),
        ({"type": "csat", "rating": 6}, '"rating" is a whole number from 1 to 5'),
        ({"type": "csat", "rating": True}, '"rating" is a whole number from 1 to 5'),
        ({"type": "csat", "rating": 3, "comment": "x" * 5000}, '"comment" is text of at most 2000 characters'),
        ({"type": "email"}, 'an email frame needs a string "email"'),
        ({"type": "card_click", "message_id": ID, "sku": ""}, 'a card click needs the card\'s string "sku"'),
    ],
)
def test_a_wrong_field_is_a_bad_frame_with_the_protocols_message(frame, message):
    code, said, _ = refused(frame)
    assert (code, said) == ("bad_frame", message)


def test_the_first_wrong_field_is_reported_and_a_refused_text_names_its_message():
    assert refused({"type": "message", "text": 3, "client_id": "nope"})[2] == {}  # the client_id, first
    assert refused({"type": "message", "text": 3, "client_id": ID})[2] == {"client_id": ID}
    assert refused({"type": "rate", "message_id": "x", "value": 7})[1] == '"message_id" is not a message id'


def test_unknown_types_and_undecodable_frames():
    code, message, _ = refused({"type": "dance"})
    assert code == "unknown_type"
    assert message == "unknown message type 'dance'; expected message, stop, typing, rate, csat, email, card_click or end"
    for text, code in ((None, "bad_frame"), ("{", "bad_json"), ("[1]", "bad_frame"), ('{"type": 1}', "bad_frame"),
                       ("x" * 101, "frame_too_large")):  # fmt: skip
        with pytest.raises(ProtocolError) as caught:
            frames.decode(text, max_chars=100)
        assert caught.value.code == code
