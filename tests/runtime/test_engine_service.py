"""The model's name, decided in one place (``engine_service.model_name``) for /v1 and /metrics alike."""

from __future__ import annotations

from inference.worker.loader import BUNDLED_MODEL_NAME
from shop_assistant.runtime import engine_service


def test_the_served_name_is_the_setting_else_the_model_folder_else_the_bundled_model(settings, monkeypatch):
    monkeypatch.setattr(engine_service, "_engine", None)  # as before the model loads: the settings decide
    settings.API = {**settings.API, "model_name": ""}
    settings.ENGINE = {**settings.ENGINE, "model": None}
    assert engine_service.model_name() == BUNDLED_MODEL_NAME == "SmolLM2-135M-Instruct"
    settings.ENGINE = {**settings.ENGINE, "model": "/models/Qwen2.5-0.5B-Instruct/"}
    assert engine_service.model_name() == "Qwen2.5-0.5B-Instruct"
    settings.API = {**settings.API, "model_name": "shop-model"}
    assert engine_service.model_name() == "shop-model"
