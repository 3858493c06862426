"""``python -m benchmarks.function_calling``: the scorer's rules, the held-out prompts' file, and a CLI run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from benchmarks import function_calling as fc
from benchmarks.structured_schemas import validate
from shop_assistant.api import schemas as api_schemas
from shop_assistant.api.tools import tool_calling

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = fc.load()
SCHEMAS = fc.tool_schemas(DATA)
ITEMS = {item["id"]: item for item in DATA["prompts"]}


def verdict(item_id: str, *calls: tuple[str, object]) -> dict:
    """The scorer on calls written by hand (arguments given as objects, sent as the API's JSON text)."""
    return fc.score(ITEMS[item_id], [(name, a if isinstance(a, str) else json.dumps(a)) for name, a in calls], SCHEMAS)


# -- the scorer -------------------------------------------------------------------------------------------------

def test_the_expected_call_is_right() -> None:
    v = verdict("s02", ("search_products", {"query": "sleeping bag", "max_price": 60}))
    assert (v["called"], v["right_tool"], v["right_arguments"], v["why"]) == (True, True, True, "")


def test_another_tool_is_wrong_whatever_its_arguments() -> None:
    v = verdict("p01", ("search_products", {"query": "returns"}))
    assert (v["called"], v["right_tool"], v["right_arguments"]) == (True, False, False)
    assert "search_products" in v["why"]


def test_an_enum_must_match_exactly() -> None:
    assert verdict("p01", ("lookup_policy", {"topic": "returns"}))["right_arguments"]
    for topic in ("return", "Returns", "refunds"):
        v = verdict("p01", ("lookup_policy", {"topic": topic}))
        assert v["right_tool"] and not v["right_arguments"], topic


def test_a_key_word_matches_in_any_case_and_anywhere_in_the_field() -> None:
    assert verdict("s01", ("search_products", {"query": "2-person TENTS"}))["right_arguments"]
    assert verdict("s12", ("search_products", {"query": "Tienda de campaña", "max_price": 150}))["right_arguments"]
    v = verdict("s01", ("search_products", {"query": "sleeping bag"}))
    assert not v["right_arguments"] and "none of" in v["why"]


def test_numbers_compare_by_value_not_by_text() -> None:
    assert verdict("s02", ("search_products", {"query": "sleeping bag", "max_price": 60.0}))["right_arguments"]
    for price in ("60", 59.99, True):
        assert not verdict("s02", ("search_products", {"query": "sleeping bag", "max_price": price}))["right_arguments"]


def test_ids_must_be_exact_and_present() -> None:
    right = {"order_number": "48213", "email": "dana.k@example.com"}
    assert verdict("o01", ("get_order_status", right))["right_arguments"]
    assert not verdict("o01", ("get_order_status", {**right, "order_number": "#48213"}))["right_arguments"]
    missing = verdict("o01", ("get_order_status", {"order_number": "48213"}))
    assert not missing["right_arguments"] and "email" in missing["why"]


def test_an_unasked_argument_is_wrong_unless_null() -> None:
    asked = {"query": "tent"}
    assert verdict("s01", ("search_products", {**asked, "in_stock": None, "max_price": None}))["right_arguments"]
    v = verdict("s01", ("search_products", {**asked, "in_stock": True}))
    assert not v["right_arguments"] and "unasked in_stock" in v["why"]


def test_arguments_outside_the_tools_schema_are_wrong() -> None:
    assert not verdict("s07", ("search_products", {"query": "rain jacket", "size": "medium"}))["right_arguments"]
    assert not verdict("s01", ("search_products", "not json"))["right_arguments"]
    assert not verdict("s01", ("search_products", "[1, 2]"))["right_arguments"]


def test_no_call_is_scored_as_such_and_the_first_call_counts() -> None:
    none = verdict("p03")
    assert (none["called"], none["right_tool"], none["right_arguments"]) == (False, False, False)
    assert none["why"] == "no call"
    first = verdict("p03", ("lookup_policy", {"topic": "shipping"}), ("search_products", {"query": "x"}))
    assert first["right_arguments"]
    second = verdict("p03", ("search_products", {"query": "x"}), ("lookup_policy", {"topic": "shipping"}))
    assert not second["right_tool"]


def test_the_summary_counts_per_tool_and_language() -> None:
    rows = [
        {"tool": "a", "language": "en", "called": True, "right_tool": True, "right_arguments": True,
         "output_tokens": 10, "seconds": 1.0},
        {"tool": "a", "language": "fr", "called": True, "right_tool": True, "right_arguments": False,
         "output_tokens": 20, "seconds": 3.0},
        {"tool": "b", "language": "en", "called": False, "right_tool": False, "right_arguments": False,
         "output_tokens": 30, "seconds": 2.0},
    ]
    s = fc.summarize(rows)
    assert s["overall"] == {"prompts": 3, "right": 1, "right_tool": 2, "no_call": 1, "accuracy": pytest.approx(1 / 3)}
    assert s["per_tool"]["a"]["accuracy"] == 0.5 and s["per_tool"]["b"]["no_call"] == 1
    assert s["per_language"]["en"]["right"] == 1 and s["per_language"]["fr"]["right"] == 0
    assert s["output_tokens_per_s"] == 10.0 and s["seconds_per_prompt_median"] == 2.0


@pytest.mark.parametrize("called, right_tool, finish, text, category", [
    (True, True, "stop", "", "wrong arguments"),
    (True, False, "stop", "", "wrong tool"),
    (False, False, "stop", '<tools>\n{"name": "x"}\n</tools>', "<tools> wrapper"),
    (False, False, "stop", '\n{{"name": "x", "arguments": {}}}', "{{...}} wrapper"),
    (False, False, "stop", '{"name": "x"}', "bare JSON"),
    (False, False, "stop", "```json\n{}\n```", "fenced, no call"),
    (False, False, "stop", "<answer>hi</answer>", "other tag"),
    (False, False, "stop", "I can look that up for you.", "prose"),
    (False, False, "length", "<tool_call>\n{\"name\": ", "cut by max_tokens"),
])
def test_each_miss_has_one_category(called, right_tool, finish, text, category) -> None:
    row = {"called": called, "right_tool": right_tool, "right_arguments": False, "finish_reason": finish, "text": text}
    assert fc.miss(row) == category
    assert fc.miss({**row, "called": True, "right_tool": True, "right_arguments": True}) is None


def test_the_summary_counts_the_misses_by_category() -> None:
    rows = [{"tool": "a", "language": "en", "called": c, "right_tool": c, "right_arguments": False, "miss": m,
             "output_tokens": 1, "seconds": 1.0} for c, m in ((False, "prose"), (True, "wrong arguments"),
                                                               (False, "prose"))]
    assert fc.summarize(rows)["misses"] == {"prose": 2, "wrong arguments": 1}
    assert "misses: prose 2, wrong arguments 1" in fc.table(fc.summarize(rows))


# -- the held-out prompts ---------------------------------------------------------------------------------------

def test_fifty_prompts_over_three_tools_in_four_languages() -> None:
    prompts = DATA["prompts"]
    assert len(prompts) == 50 and len({p["id"] for p in prompts}) == 50
    assert len({p["prompt"] for p in prompts}) == 50
    per_tool = Counter(p["tool"] for p in prompts)
    assert set(per_tool) == set(SCHEMAS) and len(SCHEMAS) == 3
    assert min(per_tool.values()) >= 16
    assert set(Counter(p["language"] for p in prompts)) == {"en", "es", "fr", "de"}
    assert DATA["system"] and "\n" not in DATA["system"]


@pytest.mark.parametrize("item", DATA["prompts"], ids=lambda item: item["id"])
def test_each_expected_call_validates_against_its_tool(item: dict) -> None:
    schema = SCHEMAS[item["tool"]]
    assert validate(fc.expected_example(item), schema) == []
    assert set(item["arguments"]).isdisjoint(item["keywords"])
    assert all(words and all(isinstance(w, str) and w for w in words) for words in item["keywords"].values())
    # Every required argument is expected, so "right arguments" cannot pass on a call that misses one.
    assert set(schema["required"]) <= set(item["arguments"]) | set(item["keywords"])
    # The facts a shopper gives are in their message: an order's number and email are copied, not guessed.
    for key in ("order_number", "email"):
        if key in item["arguments"]:
            assert item["arguments"][key] in item["prompt"]


def test_the_request_is_one_the_api_takes_with_auto_tool_calling() -> None:
    body = fc.request_body(DATA, DATA["prompts"][0], 128)
    calling = tool_calling(api_schemas.validate(body, "chat"))
    assert calling is not None and calling.schema is None  # auto: text, read for calls
    assert calling.names == frozenset(SCHEMAS)
    assert calling.constraint().structural_tag is not None  # under the constraint of an auto answer


# -- the CLI ----------------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.backend_agnostic
def test_a_short_cli_run_with_the_bundled_model_reports_its_shape(tmp_path: Path) -> None:
    out = tmp_path / "fc.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "benchmarks.function_calling", "--limit", "2", "--max-tokens", "48",
           "--device", "cpu", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert [row["id"] for row in doc["prompts"]] == [p["id"] for p in DATA["prompts"][:2]]
    s = doc["summary"]
    assert s["overall"]["prompts"] == 2 and 0 <= s["overall"]["right"] <= s["overall"]["right_tool"] <= 2
    assert set(s["per_tool"]) == {DATA["prompts"][0]["tool"]} and set(s["per_language"]) == {"en"}
    assert s["output_tokens"] == sum(r["output_tokens"] for r in doc["prompts"]) > 0
    assert s["output_tokens_per_s"] > 0 and s["seconds_per_prompt_median"] > 0
    for row in doc["prompts"]:
        assert row["output_tokens"] <= 48 and row["prompt_tokens"] > 0
        assert row["right_arguments"] or row["why"]  # a wrong answer says why
    assert "overall" in proc.stdout and "tokens/s" in proc.stdout


def test_the_cli_takes_a_list_of_prompt_ids() -> None:
    args = fc.build_parser().parse_args(["--ids", "s02,o12,p05", "--model", "qwen2.5-1.5b"])
    assert args.ids == ["s02", "o12", "p05"] and args.max_tokens == 128 and args.model == "qwen2.5-1.5b"
    assert not args.unconstrained and fc.build_parser().parse_args(["--unconstrained"]).unconstrained
