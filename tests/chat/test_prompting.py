"""Prompt assembly with the bundled model's real tokenizer and chat template."""

from __future__ import annotations

import pytest

from shop_assistant.studio.prewarm import system_prefix_ids
from shop_assistant.chat.answers.prompting import (
    PromptTooLongError,
    Turn,
    assemble,
    chat_messages,
    render,
    user_turn_content,
)

SYSTEM = "You are the shopping assistant of Test Shop.\n\nStore policies:\nReturns within 30 days."


@pytest.fixture(scope="module")
def tokenizer(chat_engine):
    return chat_engine.tokenizer


def test_system_prompt_comes_first_and_facts_go_in_the_latest_user_turn(tokenizer):
    content = user_turn_content("Do you have rain jackets?", "- Storm Shell Jacket, 129.00 USD, in stock")
    text = tokenizer.decode(render(tokenizer, chat_messages(SYSTEM, [], content)))
    assert text.index(SYSTEM) < text.index("Storm Shell Jacket") < text.index("Do you have rain jackets?")
    # The facts are in the user turn: the system message is exactly the published prompt.
    assert f"system\n{SYSTEM}<|im_end|>" in text
    assert text.rstrip().endswith("assistant")  # the generation prompt opens the answer


def test_no_catalog_results_are_said_explicitly():
    assert "nothing in the catalog matched" in user_turn_content("unicorn saddles?", "")


def test_earlier_turns_are_a_byte_identical_prefix_of_the_next_prompt(tokenizer, chat_engine):
    """What makes a follow-up question hit the prefix cache: the previous prompt + answer is its prefix."""
    first_user = user_turn_content("Any boots?", "- Trail Boot, 89.00 USD")
    first = render(tokenizer, chat_messages(SYSTEM, [], first_user))
    turns = [Turn("user", first_user), Turn("assistant", "Yes, the Trail Boot at 89.00 USD.")]
    second = render(tokenizer, chat_messages(SYSTEM, turns, user_turn_content("In size 42?", "")))
    assert second[: len(first)] == first
    # ... and every session of the store shares the system message's tokens.
    n = len(system_prefix_ids(chat_engine, SYSTEM))
    assert first[:n] == second[:n] and n > 10


def test_history_is_trimmed_oldest_first_to_fit(tokenizer):
    turns = []
    for i in range(12):
        turns.append(Turn("user", f"Question number {i}: " + "tell me about jackets " * 10))
        turns.append(Turn("assistant", f"Answer number {i}: " + "we have jackets " * 10))
    latest = user_turn_content("And gloves?", "")
    prompt = assemble(tokenizer, SYSTEM, turns, latest, max_model_len=512, max_tokens=64)
    assert len(prompt.token_ids) + prompt.max_tokens <= 512
    assert prompt.max_tokens == 64
    assert 0 < prompt.turns_used < len(turns) and prompt.turns_dropped == len(turns) - prompt.turns_used
    text = tokenizer.decode(prompt.token_ids)
    assert text.index(SYSTEM) < text.index("Answer number 11") < text.index("And gloves?")
    assert "Question number 0:" not in text  # oldest went first
    kept = turns[-prompt.turns_used :]
    assert kept[0].role == "user"  # whole exchanges are dropped, never a question without its answer


def test_everything_fits_untrimmed(tokenizer):
    turns = [Turn("user", "Hi"), Turn("assistant", "Hello!")]
    prompt = assemble(tokenizer, SYSTEM, turns, "Boots?", max_model_len=1024, max_tokens=100)
    assert prompt.turns_used == 2 and prompt.turns_dropped == 0


def test_a_message_that_cannot_fit_is_refused_with_the_limit(tokenizer):
    with pytest.raises(PromptTooLongError) as caught:
        assemble(tokenizer, SYSTEM, [], "word " * 600, max_model_len=256, max_tokens=32)
    assert caught.value.limit == 256 and caught.value.prompt_tokens > 256
    assert "256" in str(caught.value)


def test_answer_budget_shrinks_to_the_room_left(tokenizer):
    latest = "word " * 150
    n = len(render(tokenizer, chat_messages(SYSTEM, [], latest)))
    prompt = assemble(tokenizer, SYSTEM, [], latest, max_model_len=n + 40, max_tokens=256)
    assert prompt.max_tokens == 40
