"""The /v1 request schemas: what they accept, the constraints they ask for, and the 400s naming the field."""

from __future__ import annotations

import pytest

from inference.core.sampling_params import StructuredOutputsParams
from shop_assistant.api import schemas
from shop_assistant.api.errors import ApiError
from shop_assistant.api.models import ApiKey

USER = [{"role": "user", "content": "Hi"}]
SCHEMA = {"type": "object", "properties": {"size": {"enum": ["S", "M", "L"]}}, "required": ["size"]}
TOOL = {"type": "function", "function": {"name": "get_size", "parameters": SCHEMA}}


def chat(**fields) -> schemas.ChatRequest:
    return schemas.validate({"model": "m", "messages": USER, **fields}, "chat")


def test_a_tool_calling_conversation_is_accepted():
    request = chat(messages=[
        {"role": "developer", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
        {"role": "user", "content": "My size?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_size", "arguments": '{"size": "M"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "M fits"},
    ], tools=[TOOL], tool_choice={"type": "function", "function": {"name": "get_size"}}, parallel_tool_calls=False)
    assert request.messages[0].content == "Be brief."
    assert request.messages[2].tool_calls[0].function.arguments == '{"size": "M"}'
    assert request.tool_choice.function.name == "get_size" and request.tools[0].function.parameters == SCHEMA


@pytest.mark.parametrize("fields, expected", [
    ({}, []),
    ({"response_format": {"type": "text"}}, []),
    ({"response_format": {"type": "json_object"}}, [("response_format", StructuredOutputsParams(json_object=True))]),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "size", "schema": SCHEMA, "strict": True}}},
     [("response_format", StructuredOutputsParams(json=SCHEMA))]),
    ({"guided_json": SCHEMA}, [("guided_json", StructuredOutputsParams(json=SCHEMA))]),
    ({"guided_regex": "[0-9]+"}, [("guided_regex", StructuredOutputsParams(regex="[0-9]+"))]),
    ({"guided_choice": ["yes", "no"]}, [("guided_choice", StructuredOutputsParams(choice=("yes", "no")))]),
    ({"structured_outputs": {"grammar": 'root ::= "a"'}},
     [("structured_outputs", StructuredOutputsParams(grammar='root ::= "a"'))]),
])
def test_structured_output_fields_become_the_engines_constraint(fields, expected):
    assert chat(**fields).constraints() == expected


_BAD = [
    ({"tools": {"type": "function"}}, "tools", "invalid_parameter"),
    ({"tools": [{"type": "retrieval", "function": {"name": "x"}}]}, "tools[0].type", "invalid_parameter"),
    ({"tools": [{"type": "function", "function": {"name": "has space"}}]}, "tools[0].function.name",
     "invalid_parameter"),
    ({"tools": [{"type": "function", "function": {"name": "x", "parameters": "{}"}}]},
     "tools[0].function.parameters", "invalid_parameter"),
    ({"tool_choice": "always"}, "tool_choice", "invalid_parameter"),
    ({"tool_choice": {"type": "function", "function": {}}}, "tool_choice", "invalid_parameter"),
    ({"parallel_tool_calls": "yes"}, "parallel_tool_calls", "invalid_parameter"),
    ({"response_format": {"type": "xml"}}, "response_format.type", "invalid_parameter"),
    ({"response_format": {"type": "json_schema"}}, "response_format", "invalid_parameter"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": []}}},
     "response_format.json_schema.schema", "invalid_parameter"),
    ({"guided_choice": "yes"}, "guided_choice", "invalid_parameter"),
    ({"messages": [{"role": "tool", "content": "18 C"}]}, "messages[0]", "invalid_messages"),
    ({"messages": [{"role": "user", "content": None}]}, "messages[0]", "invalid_content"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "messages[0].content",
     "invalid_content"),
    ({"messages": [{"role": "user", "content": "x", "tool_calls": []}]}, "messages[0]", "invalid_messages"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "x", "arguments": {}}}]}]},
     "messages[0].tool_calls[0].function.arguments", "invalid_messages"),
    ({"messages": "Hi"}, "messages", "invalid_messages"),
]


@pytest.mark.parametrize("fields, param, code", _BAD, ids=[p for _, p, _ in _BAD])
def test_a_bad_field_is_a_400_naming_its_path(fields, param, code):
    with pytest.raises(ApiError) as refused:
        chat(**fields)
    error = refused.value.body()["error"]
    assert refused.value.status == 400 and error["type"] == "invalid_request_error"
    assert error["param"] == param and error["code"] == code and error["message"].startswith(param + ": ")


_REFUSED_IN_SERVICE = [
    ({"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "get_colour"}}}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": [TOOL, TOOL]}, "tools"),
    ({"tools": [TOOL], "tool_choice": "required", "response_format": {"type": "json_object"}}, "response_format"),
    ({"response_format": {"type": "json_object"}, "guided_regex": "a+"}, "guided_regex"),
    ({"structured_outputs": {"regex": "a+", "choice": ["a"]}}, "structured_outputs"),
    ({"structured_outputs": {}}, "structured_outputs"),
]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("fields, param", _REFUSED_IN_SERVICE, ids=[p for _, p in _REFUSED_IN_SERVICE])
async def test_tool_and_constraint_conflicts_are_a_400_over_http(chat_engine, fields, param):
    from asgiref.sync import sync_to_async
    from django.test import AsyncClient

    from catalog.models import Store
    from shop_assistant.runtime.engine_service import model_name

    store = await sync_to_async(Store.objects.create)(slug="t", name="T")
    _, key = await sync_to_async(ApiKey.create_key)(store, "schemas")
    for stream in (False, True):
        body = {"model": model_name(), "messages": USER, "max_tokens": 2, "stream": stream, **fields}
        response = await AsyncClient().post("/v1/chat/completions", body, content_type="application/json",
                                            headers={"Authorization": f"Bearer {key}"})
        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error" and error["param"] == param, error



@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_tool_conversations_with_nul_and_lone_surrogates_are_answered(chat_engine):
    """Tool results and schemas are the client's text too: cleaned as message content is, never a 500."""
    from asgiref.sync import sync_to_async
    from django.test import AsyncClient

    from catalog.models import Store
    from shop_assistant.runtime.engine_service import model_name

    store = await sync_to_async(Store.objects.create)(slug="u", name="U")
    _, key = await sync_to_async(ApiKey.create_key)(store, "unicode")
    odd = "M\x00 \ud800fits"
    tool = {"type": "function", "function": {"name": "get_size", "description": odd, "parameters": SCHEMA}}
    messages = [*USER, {"role": "assistant", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_size", "arguments": f'{{"size": "{odd}"}}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": odd}]
    body = {"model": model_name(), "messages": messages, "tools": [tool], "max_tokens": 2, "temperature": 0}
    response = await AsyncClient().post("/v1/chat/completions", body, content_type="application/json",
                                        headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.content
    assert response.json()["usage"]["prompt_tokens"] > 0
