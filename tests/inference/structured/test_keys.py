"""The canonical key a constraint is cached by."""

from __future__ import annotations

import pytest

from inference.core.sampling_params import StructuredOutputsParams as S
from inference.structured import StructuredOutputError
from inference.structured.keys import constraint_key


def test_one_schema_spelt_several_ways_has_one_key() -> None:
    schema = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}}
    spellings = [
        S(json=schema),
        S(json='{ "type" : "object",\n "properties": {"b": {"type": "integer"}, "a": {"type": "string"}} }'),
    ]
    assert len({constraint_key(p) for p in spellings}) == 1
    assert constraint_key(S(json={"type": "object"})) != constraint_key(S(json_object=True))


def test_the_order_of_properties_is_part_of_the_constraint() -> None:
    """The grammar writes properties in the declared order, so a reordered schema is another constraint."""
    name_first = {"type": "object", "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}}}
    arguments_first = {"type": "object", "properties": {"arguments": {"type": "object"}, "name": {"type": "string"}}}
    assert constraint_key(S(json=name_first)) != constraint_key(S(json=arguments_first))


def test_kinds_never_share_a_key() -> None:
    keys = {constraint_key(p) for p in (S(regex="{}"), S(choice=("{}",)), S(grammar="{}"), S(json="{}"),
                                        S(structural_tag="{}"))}
    assert len(keys) == 5


def test_a_structural_tag_spelt_several_ways_has_one_key() -> None:
    tag = {"type": "structural_tag", "format": {"type": "const_string", "value": "hi"}}
    text = '{"type": "structural_tag",\n  "format": {"type": "const_string", "value": "hi"}}'
    assert constraint_key(S(structural_tag=tag)) == constraint_key(S(structural_tag=text))
    with pytest.raises(StructuredOutputError):
        constraint_key(S(structural_tag="[1]"))
    with pytest.raises(ValueError, match="exactly one"):
        S(structural_tag=tag, regex="a")


def test_choice_order_is_the_callers() -> None:
    assert constraint_key(S(choice=("a", "b"))) != constraint_key(S(choice=("b", "a")))


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_a_schema_that_is_not_a_json_object_is_refused(text: str) -> None:
    with pytest.raises(StructuredOutputError):
        constraint_key(S(json=text))
