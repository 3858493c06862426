"""GrammarCompiler on the bundled model's tokenizer: the compile cache, errors with the library's message, and
the padded vocabulary."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from inference.core.sampling_params import StructuredOutputsParams as S
from inference.structured import StructuredOutputError
from inference.structured.compiler import GrammarCompiler
from inference.structured.matchers import StructuredOutputs
from inference.worker.sampler import unpack_bitmask

EOS = 2  # SmolLM2's <|im_end|>


@pytest.fixture(scope="module")
def compiler(tokenizer) -> GrammarCompiler:
    return GrammarCompiler(tokenizer, len(tokenizer), [EOS], cache_size=3)


def test_each_distinct_constraint_compiles_once_and_the_cache_is_bounded(compiler: GrammarCompiler) -> None:
    before = compiler.num_compiled
    first = compiler.compile(S(json={"type": "object", "properties": {"x": {"type": "integer"}}}))
    again = compiler.compile(S(json='{"type": "object",  "properties": {"x": {"type": "integer"}}}'))
    assert again is first and compiler.num_compiled == before + 1
    for regex in ("a+", "b+", "c+"):  # three more: the cache holds 3, so the schema (least recent) is evicted
        compiler.compile(S(regex=regex))
    assert compiler.cache_len() == 3
    compiler.compile(S(regex="c+"))
    assert compiler.num_compiled == before + 4
    compiler.compile(S(json={"type": "object", "properties": {"x": {"type": "integer"}}}))
    assert compiler.num_compiled == before + 5


def test_requests_for_a_constraint_being_compiled_wait_for_that_compilation(compiler: GrammarCompiler, monkeypatch) -> None:
    """Requests compile on worker threads (``AsyncLLM.compile_constraint``): four at once for one new schema
    compile it once, and the three others get that grammar."""
    compile_ = compiler._compile

    def slow(key):
        time.sleep(0.3)  # long enough for every thread to ask while it compiles
        return compile_(key)

    monkeypatch.setattr(compiler, "_compile", slow)
    before = compiler.num_compiled
    schema = S(json={"type": "object", "properties": {"tent": {"enum": ["ridgeline", "basecamp"]}}})
    with ThreadPoolExecutor(4) as pool:
        grammars = list(pool.map(lambda _: compiler.compile(schema), range(4)))
    assert compiler.num_compiled == before + 1 and all(g is grammars[0] for g in grammars)
    assert compiler._compiling == {}


@pytest.mark.parametrize(
    "params, message",
    [
        (S(json={"type": "foo"}), 'Unsupported type "foo"'),
        (S(regex="a(("), "parenthesis is not closed"),
        (S(grammar='root ::= "a" x'), 'Rule "x" is not defined'),
        (S(structural_tag={"type": "structural_tag", "format": {"type": "nope"}}), "nope"),
    ],
)
def test_a_constraint_that_does_not_compile_raises_with_the_librarys_message(
    compiler: GrammarCompiler, params: S, message: str
) -> None:
    with pytest.raises(StructuredOutputError, match=message) as info:
        compiler.compile(params)
    assert isinstance(info.value, ValueError)
    assert not str(info.value).split(": ", 1)[1].startswith("[")  # xgrammar's log prefix is stripped


def test_padded_lm_head_rows_are_never_allowed(tokenizer) -> None:
    """An lm_head wider than the tokenizer (padded rows): the rows past the tokenizer are masked off even where
    the grammar allows any token (inside a string)."""
    padded = len(tokenizer) + 64
    so = StructuredOutputs(tokenizer, padded, [EOS])
    so.start("s", so.compile(S(regex='"[^"]*"')))
    so.accept("s", tokenizer.encode('"')[0])
    (mask,) = so.bitmasks(["s"])
    allowed = unpack_bitmask(mask.unsqueeze(0), padded)[0]
    assert allowed[: len(tokenizer)].sum() > len(tokenizer) // 2  # most tokens fit inside a string
    assert not allowed[len(tokenizer) :].any()
    so.free("s")
    assert so.num_live == 0


def test_a_structural_tag_compiles_once_and_constrains(compiler: GrammarCompiler) -> None:
    import xgrammar as xgr

    tag = {"type": "structural_tag", "format": {"type": "or", "elements": [
        {"type": "const_string", "value": "yes"},
        {"type": "tag", "begin": "<n>", "content": {"type": "json_schema", "json_schema": {"type": "integer"}},
         "end": "</n>"},
    ]}}
    before = compiler.num_compiled
    compiled = compiler.compile(S(structural_tag=tag))
    assert compiler.compile(S(structural_tag=tag)) is compiled and compiler.num_compiled == before + 1
    for text, ok in (("yes", True), ("<n>42</n>", True), ("<n>x</n>", False), ("no", False)):
        assert xgr.GrammarMatcher(compiled).accept_string(text) is ok, text


TAGS = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 20},
        "minItems": 2, "maxItems": 4}}, "required": ["tags"], "additionalProperties": False}  # fmt: skip


def test_a_json_constraint_never_allows_a_token_with_a_control_byte(tokenizer) -> None:
    """The 10,000-sample validity run's one failure: inside a length-bounded string xgrammar 0.2.9 allowed a raw tab,
    which JSON forbids (``json.loads`` refused it). A JSON constraint's rows are masked with every token holding a
    control byte; a regex constraint is left as the library compiles it (its text may need a newline)."""
    so = StructuredOutputs(tokenizer, len(tokenizer), [EOS])
    control = {t for t, text in enumerate(so.compiler.tokenizer_info.decoded_vocab) if any(b < 0x20 for b in text)}
    assert tokenizer.encode("\t")[0] in control and tokenizer.encode("a")[0] not in control
    for seq_id, json in (("json", True), ("plain", False)):
        so.start(seq_id, so.compile(S(json=TAGS)), json)
        for token in tokenizer.encode('{"tags": ["x'):
            so.accept(seq_id, token)
    so.start("regex", so.compile(S(regex="[^\"]*")))
    masks = dict(zip(("json", "plain", "regex"), so.bitmasks(["json", "plain", "regex"])))
    allowed = {k: set(unpack_bitmask(m.unsqueeze(0), len(tokenizer))[0].nonzero().flatten().tolist()) for k, m in masks.items()}
    assert not allowed["json"] & control
    assert allowed["plain"] & control, "xgrammar now refuses control bytes in bounded strings: the mask may go"
    assert allowed["regex"] & control
    assert allowed["json"] == allowed["plain"] - control  # nothing else is taken away
    for seq_id in ("json", "plain", "regex"):
        so.free(seq_id)
    assert so.num_live == 0 and not so._json
