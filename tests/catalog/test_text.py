"""catalog.text: the one sentence splitter and stemmer the catalog, the chat and the evaluation share."""

from catalog.text import SENTENCE_END, split_sentences, stem


def test_a_whole_text_splits_after_end_marks_and_at_line_breaks():
    text = "Free shipping over $50.  Returns within 30 days!\n\nAsk us anything? Yes\nno"
    assert split_sentences(text) == ["Free shipping over $50.", "Returns within 30 days!", "Ask us anything?", "Yes", "no"]
    assert split_sentences("  \n ") == []


def test_prose_breaks_only_before_what_starts_a_sentence():
    text = "Weighs approx. two kg. Packs small. 3 colours. \"Best tent\" says a review."
    assert split_sentences(text, starts_upper=True) == [
        "Weighs approx. two kg.", "Packs small.", "3 colours.", "\"Best tent\" says a review."
    ]
    assert split_sentences("Weighs approx. two kg.") == ["Weighs approx.", "two kg."]
    # A description's list items, its lines joined: each is a sentence; a hyphen inside a word is none.
    joined = "Two doors and two vestibules. - Packed weight 1.6 kg - Floor 215 x 130 cm - A three-season tent"
    assert split_sentences(joined, starts_upper=True) == [
        "Two doors and two vestibules.", "Packed weight 1.6 kg", "Floor 215 x 130 cm", "A three-season tent",
    ]


def test_a_streamed_sentence_ends_after_its_closing_marks_before_whitespace():
    text = "It costs 14.95 today... He said “yes.” Then\nmore"
    assert [m.end() for m in SENTENCE_END.finditer(text)] == [text.index("...") + 3, text.index("”") + 1, text.index("\n") + 1]


def test_stems_fold_plurals_and_optionally_ing_forms():
    assert [stem(w) for w in ("earrings", "boxes", "batteries", "glass", "status", "hiking")] == [
        "earring", "box", "battery", "glass", "status", "hiking"
    ]
    assert [stem(w, ing=True) for w in ("hiking", "wearing", "ring", "batteries")] == ["hik", "wear", "ring", "battery"]
