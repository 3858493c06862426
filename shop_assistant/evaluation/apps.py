from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    """Scores answers as shoppers read them (``evaluate_answers``) and the checker's sentences (``check_sentences``)."""

    name = "shop_assistant.evaluation"
