"""The frames a shopper's widget sends (docs/chat-protocol.md), as declared schemas.

Each field declares what it takes and the protocol's answer when it is wrong: the error's code and message
(``_refuse``), unchanged from the protocol's documentation. Fields are checked in the order declared, and the
first wrong one is the one reported. What depends on the session (limits, a message while answering, rates)
is the session's to check, after the shape is known good.
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from shop_assistant.runtime.text import clean_text

from ..log import feedback

Frame = dict[str, Any]


class ProtocolError(Exception):
    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra

    def frame(self) -> Frame:
        return {"type": "error", "code": self.code, "message": self.message, **self.extra}


def not_saved(text: str, message_id: str | None = None, client_id: uuid.UUID | None = None) -> Frame:
    """The shopper's message (or its answer) could be saved neither to the database nor to the spool: without
    this they would see a normal ending and find the exchange missing after a reload."""
    frame: Frame = {
        "type": "error",
        "code": "not_saved",
        "message": "your message could not be saved; please send it again",
        "text": text,
    }
    if message_id is not None:
        frame["message_id"] = message_id
    if client_id is not None:
        frame["client_id"] = str(client_id)
    return frame


def _refuse(message: str, code: str = "bad_frame") -> PydanticCustomError:
    """A field's wrong value: the error frame's code and message (the code travels as the error's type)."""
    return PydanticCustomError(code, message)


def _client_id(value: Any) -> uuid.UUID | None:
    """The widget's id of a message (a UUID string), None when the frame has none."""
    if value is None:
        return None
    try:
        if not isinstance(value, str) or len(value) > 36:
            raise ValueError(value)
        return uuid.UUID(value)
    except ValueError:
        raise _refuse('"client_id" is a UUID string (the widget\'s id of the message)') from None


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise _refuse('a message needs a string "text"')
    return value


def _message_id(value: Any) -> uuid.UUID:
    if not isinstance(value, str):
        raise _refuse('a string "message_id" is needed')
    try:
        return uuid.UUID(value)
    except ValueError:
        raise _refuse('"message_id" is not a message id') from None


def _rating_value(value: Any) -> int:
    if isinstance(value, bool) or value not in (1, -1, 0):
        raise _refuse('"value" is 1 (helpful), -1 (not helpful) or 0 (no rating)')
    return value


def _csat_rating(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise _refuse('"rating" is a whole number from 1 to 5')
    return value


def _comment(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > feedback.MAX_COMMENT_CHARS:
        raise _refuse(f'"comment" is text of at most {feedback.MAX_COMMENT_CHARS} characters')
    return clean_text(value).strip()


def _email(value: Any) -> str:
    if not isinstance(value, str):
        raise _refuse('an email frame needs a string "email"')
    return value


def _sku(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > 255:
        raise _refuse('a card click needs the card\'s string "sku"')
    return value


# Every field is checked even when the frame lacks it (validate_default): a missing field is refused as a null
# one, as the protocol always did.
ClientId = Annotated[uuid.UUID | None, BeforeValidator(_client_id)]
MessageId = Annotated[uuid.UUID, BeforeValidator(_message_id)]


class InFrame(BaseModel):
    """A frame from the widget: a JSON object whose ``type`` names its schema; other keys are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    type: str


class MessageFrame(InFrame):
    """The shopper's message. ``client_id`` first: a wrong one is reported before anything about the text."""

    client_id: ClientId = Field(default=None, validate_default=True)
    text: Annotated[str, BeforeValidator(_text)] = Field(default=None, validate_default=True)


class StopFrame(InFrame):
    pass


class TypingFrame(InFrame):
    pass


class EndFrame(InFrame):
    pass


class RateFrame(InFrame):
    message_id: MessageId = Field(default=None, validate_default=True)
    value: Annotated[int, BeforeValidator(_rating_value)] = Field(default=None, validate_default=True)


class CsatFrame(InFrame):
    rating: Annotated[int, BeforeValidator(_csat_rating)] = Field(default=None, validate_default=True)
    comment: Annotated[str, BeforeValidator(_comment)] = Field(default="", validate_default=True)


class EmailFrame(InFrame):
    email: Annotated[str, BeforeValidator(_email)] = Field(default=None, validate_default=True)


class CardClickFrame(InFrame):
    message_id: MessageId = Field(default=None, validate_default=True)
    sku: Annotated[str, BeforeValidator(_sku)] = Field(default=None, validate_default=True)


SCHEMAS: dict[str, type[InFrame]] = {
    "message": MessageFrame,
    "stop": StopFrame,
    "typing": TypingFrame,
    "rate": RateFrame,
    "csat": CsatFrame,
    "email": EmailFrame,
    "card_click": CardClickFrame,
    "end": EndFrame,
}
_UNKNOWN = f"unknown message type {{!r}}; expected {', '.join(list(SCHEMAS)[:-1])} or {list(SCHEMAS)[-1]}"


def decode(text_data: str | None, max_chars: int) -> Frame:
    """A websocket text frame as a JSON object with a string ``type``; ProtocolError otherwise."""
    if text_data is None:
        raise ProtocolError("bad_frame", "send JSON text frames, not binary ones")
    if len(text_data) > max_chars:
        raise ProtocolError("frame_too_large", "that frame is far larger than any message can be")
    try:
        frame = json.loads(text_data)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes
        raise ProtocolError("bad_json", "the frame is not valid JSON") from None
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        raise ProtocolError("bad_frame", 'a frame is a JSON object with a string "type"')
    return frame


def parse(frame: Frame) -> InFrame:
    """The frame as its type's schema; ProtocolError (its code and message) for the first wrong field.

    A message refused for its text carries its ``client_id`` back, so the widget's outbox learns which it was.
    """
    schema = SCHEMAS.get(frame["type"])
    if schema is None:
        raise ProtocolError("unknown_type", _UNKNOWN.format(frame["type"]))
    try:
        return schema.model_validate(frame)
    except ValidationError as invalid:
        first = invalid.errors(include_url=False)[0]
        error = ProtocolError(first["type"], first["msg"])
        if schema is MessageFrame and first["loc"] != ("client_id",) and frame.get("client_id") is not None:
            error.extra["client_id"] = str(_client_id(frame["client_id"]))
        raise error from None
