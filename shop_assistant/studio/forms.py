"""The studio's forms: a draft's text, the preview's sample questions, and the store settings an owner controls."""

from __future__ import annotations

import zoneinfo
from urllib.parse import urlsplit

from django import forms

from catalog.models import Store
from shop_assistant.chat.answers.opening import DEFAULT_TEMPLATES, PLACEHOLDERS, TEMPLATE_LABELS, template_errors
from shop_assistant.chat.models import AnswerSettings, WidgetSettings
from shop_assistant.prompts.models import PromptVersion

MAX_SAMPLE_QUESTIONS = 10
DEFAULT_SAMPLE_QUESTIONS = [
    "Do you have rain jackets?",
    "What is your return policy?",
    "Can I talk to a person?",
]


def sample_questions(store: Store, limit: int | None = None) -> list[str]:
    """The store's sample questions (the preview's, the score's, the widget's suggestions), or the defaults."""
    own = store.sample_questions.values_list("text", flat=True)
    return list(own[:limit] if limit else own) or list(DEFAULT_SAMPLE_QUESTIONS)


WEEKDAYS = [(0, "Mon"), (1, "Tue"), (2, "Wed"), (3, "Thu"), (4, "Fri"), (5, "Sat"), (6, "Sun")]


class DraftForm(forms.ModelForm):
    class Meta:
        model = PromptVersion
        # No policies: they live in the knowledge documents, the one copy shoppers are quoted.
        fields = ["system_prompt", "note"]
        widgets = {"system_prompt": forms.Textarea(attrs={"rows": 16, "spellcheck": "true"})}
        help_texts = {"note": "What changed and why (shown in the history)."}


class SampleQuestionsForm(forms.Form):
    questions = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5}),
        help_text=f"One question per line, at most {MAX_SAMPLE_QUESTIONS}.",
    )

    def clean_questions(self) -> list[str]:
        lines = [line.strip() for line in self.cleaned_data["questions"].splitlines() if line.strip()]
        if not lines:
            raise forms.ValidationError("Give at least one question.")
        if len(lines) > MAX_SAMPLE_QUESTIONS:
            raise forms.ValidationError(f"At most {MAX_SAMPLE_QUESTIONS} questions.")
        if any(len(line) > 500 for line in lines):
            raise forms.ValidationError("Keep each question under 500 characters.")
        return lines


def _origin(line: str) -> str:
    """``scheme://host[:port]`` exactly, as browsers send it in the Origin header."""
    parts = urlsplit(line)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise forms.ValidationError(f"{line!r} is not an origin like https://shop.example.com")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise forms.ValidationError(f"{line!r}: give only the scheme, host and port, without a path")
    return f"{parts.scheme}://{parts.netloc.lower()}"


class StoreSettingsForm(forms.ModelForm):
    """The store itself: its name, currency and the base of its product links."""

    base_url = forms.URLField(
        required=False, assume_scheme="https", label="Base URL",
        help_text="Product links are built from this and the product's handle.",
    )

    class Meta:
        model = Store
        fields = ["name", "currency", "base_url"]

    def clean_currency(self) -> str:
        currency = self.cleaned_data["currency"].strip().upper()
        if len(currency) != 3 or not currency.isalpha():
            raise forms.ValidationError("A three-letter ISO 4217 code, e.g. USD or EUR.")
        return currency


class AnswerSettingsForm(forms.ModelForm):
    """How the assistant answers (the chat's ``AnswerSettings``): replies, openings, sampling, support hours."""

    support_timezone = forms.CharField(required=False, label="Time zone", initial="UTC")
    support_weekdays = forms.TypedMultipleChoiceField(
        choices=WEEKDAYS, coerce=int, required=False, widget=forms.CheckboxSelectMultiple, label="Days"
    )
    support_open = forms.TimeField(required=False, label="Opens", widget=forms.TimeInput(attrs={"type": "time"}))
    support_close = forms.TimeField(required=False, label="Closes", widget=forms.TimeInput(attrs={"type": "time"}))

    class Meta:
        model = AnswerSettings
        fields = ["greeting", "answer_max_tokens", "temperature", "model_text", "no_match_reply", "handoff_reply"]
        widgets = {
            "model_text": forms.RadioSelect,
            "greeting": forms.Textarea(attrs={"rows": 2}),
            "no_match_reply": forms.Textarea(attrs={"rows": 2}),
            "handoff_reply": forms.Textarea(attrs={"rows": 2}),
        }
        labels = {
            "answer_max_tokens": "Answer length (tokens)",
            "model_text": "The model's own sentences",
        }
        help_texts = {
            "model_text": "Every answer opens with sentences made from your catalog and policies; this is what the "
            "model may add after them. The preview shows what was kept and what was left out.",
            "answer_max_tokens": "Longest answer in tokens; empty: the site default.",
            "temperature": "0 answers the same way every time; up to 1 varies more. Empty: the site default.",
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["model_text"].required = False
        own = self.instance.opening_templates or {}
        for kind, defaults in DEFAULT_TEMPLATES.items():
            names = ", ".join("{" + name + "}" for name in sorted(PLACEHOLDERS[kind])) or "no placeholders"
            self.fields[f"opening_{kind}"] = forms.CharField(
                required=False,
                label=TEMPLATE_LABELS[kind],
                initial="\n".join(own.get(kind) or defaults),
                widget=forms.Textarea(attrs={"rows": len(defaults) + 1}),
                help_text=f"One wording per line, picked by the question; uses {names}. Empty: the defaults.",
            )
        hours = self.instance.support_hours or {}
        if hours and not self.is_bound:
            self.initial.update(
                support_timezone=hours.get("timezone", "UTC"),
                support_weekdays=hours.get("weekdays", []),
                support_open=hours.get("open"),
                support_close=hours.get("close"),
            )

    def clean_answer_max_tokens(self) -> int | None:
        value = self.cleaned_data["answer_max_tokens"]
        if value is not None and not 16 <= value <= 2048:
            raise forms.ValidationError("Between 16 and 2048 tokens.")
        return value

    def clean_temperature(self) -> float | None:
        value = self.cleaned_data["temperature"]
        if value is not None and not 0 <= value <= 2:
            raise forms.ValidationError("Between 0 and 2.")
        return value

    def clean_support_timezone(self) -> str:
        name = self.cleaned_data["support_timezone"].strip() or "UTC"
        try:
            zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise forms.ValidationError(f"Unknown time zone {name!r}; use a name like Europe/Berlin.") from None
        return name

    def clean_model_text(self) -> str:
        # Left out of the post (an older page): the store keeps its setting.
        return self.cleaned_data.get("model_text") or self.instance.model_text or AnswerSettings.ModelText.CHECKED

    def opening_fields(self) -> list[forms.BoundField]:
        return [self[f"opening_{kind}"] for kind in DEFAULT_TEMPLATES]

    def _clean_openings(self, data: dict) -> None:
        templates = {}
        for kind, defaults in DEFAULT_TEMPLATES.items():
            lines = [line.strip() for line in (data.get(f"opening_{kind}") or "").splitlines() if line.strip()]
            errors = [error for line in lines for error in template_errors(kind, line)]
            if errors:
                self.add_error(f"opening_{kind}", errors)
            elif lines and lines != defaults:  # the defaults are not copied: improvements to them still apply
                templates[kind] = lines
        self.instance.opening_templates = templates

    def clean(self) -> dict:
        data = super().clean()
        self._clean_openings(data)
        days, opens, closes = data.get("support_weekdays"), data.get("support_open"), data.get("support_close")
        if not days and not opens and not closes:
            self.instance.support_hours = {}  # agents always reachable
        elif not (days and opens and closes):
            raise forms.ValidationError("For support hours give the days, the opening and the closing time.")
        elif opens >= closes:
            self.add_error("support_close", "Closing must be after opening.")
        else:
            self.instance.support_hours = {
                "timezone": data.get("support_timezone") or "UTC",
                "weekdays": sorted(days),
                "open": opens.strftime("%H:%M"),
                "close": closes.strftime("%H:%M"),
            }
        return data


class WidgetSettingsForm(forms.ModelForm):
    """Where the widget may be embedded (the chat's ``WidgetSettings``)."""

    class Meta:
        model = WidgetSettings
        fields = ["allowed_origins"]
        widgets = {"allowed_origins": forms.Textarea(attrs={"rows": 3, "placeholder": "https://shop.example.com"})}
        labels = {"allowed_origins": "Sites allowed to embed"}
        help_texts = {"allowed_origins": "One origin per line, e.g. https://shop.example.com."}

    def clean_allowed_origins(self) -> str:
        lines = [line.strip() for line in self.cleaned_data["allowed_origins"].splitlines() if line.strip()]
        origins = list(dict.fromkeys(_origin(line) for line in lines))
        return "\n".join(origins)
