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


def test_a_packaged_model_gets_its_context_unless_the_environment_sets_one(settings):
    """The 1.5B model is served with room for the chat's planner prefix (about 2,600 tokens); an explicit
    ENGINE_MAX_MODEL_LEN wins, and the bundled model keeps the engine's own default."""
    from inference.worker.model_packages import PACKAGED_MODELS

    settings.ENGINE = {**settings.ENGINE, "model": "qwen2.5-1.5b", "max_model_len": None}
    assert engine_service.engine_config_kwargs()["max_model_len"] == PACKAGED_MODELS["qwen2.5-1.5b"].max_model_len == 4096
    settings.ENGINE = {**settings.ENGINE, "max_model_len": 3000}
    assert engine_service.engine_config_kwargs()["max_model_len"] == 3000
    settings.ENGINE = {**settings.ENGINE, "model": None, "max_model_len": None}
    assert "max_model_len" not in engine_service.engine_config_kwargs()


def test_the_packaged_1_5b_is_served_on_its_int4_weights_unless_the_environment_says_otherwise(settings):
    """ENGINE_QUANTIZATION unset: the 1.5B model's own scheme (int4: its GGUF's 4-bit grids kept); set, it wins;
    the bundled model is left to the engine's default (none)."""
    settings.ENGINE = {**settings.ENGINE, "model": "qwen2.5-1.5b", "quantization": None}
    assert engine_service.engine_config_kwargs()["quantization"] == "int4"
    settings.ENGINE = {**settings.ENGINE, "quantization": "none"}
    assert engine_service.engine_config_kwargs()["quantization"] == "none"
    settings.ENGINE = {**settings.ENGINE, "model": None, "quantization": None}
    assert "quantization" not in engine_service.engine_config_kwargs()


def test_the_packaged_1_5b_takes_smaller_steps_on_a_cpu_unless_the_environment_says_otherwise(settings):
    """ENGINE_MAX_NUM_BATCHED_TOKENS unset: the 1.5B's CPU step budget (a plan waits for the step in flight); set,
    it wins; on CUDA, and for the bundled model, the engine's own default."""
    settings.ENGINE = {**settings.ENGINE, "model": "qwen2.5-1.5b", "max_num_batched_tokens": None, "device": None}
    assert engine_service.engine_config_kwargs()["max_num_batched_tokens"] == 256
    settings.ENGINE = {**settings.ENGINE, "max_num_batched_tokens": 512}
    assert engine_service.engine_config_kwargs()["max_num_batched_tokens"] == 512
    settings.ENGINE = {**settings.ENGINE, "max_num_batched_tokens": None, "device": "cuda"}
    assert "max_num_batched_tokens" not in engine_service.engine_config_kwargs()
    settings.ENGINE = {**settings.ENGINE, "model": None, "device": None}
    assert "max_num_batched_tokens" not in engine_service.engine_config_kwargs()
