"""The project as a new user meets it: settings from the environment, checks, migrations, compose file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import yaml
from django.test import Client

from tests.conftest import REPO_ROOT

PYTHON = sys.executable


def run_manage(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # Start from a clean slate: only what each test sets may configure the project.
    configured = {"DJANGO_SETTINGS_MODULE", "SECRET_KEY", "DEBUG", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS"}
    base = {k: v for k, v in os.environ.items() if k not in configured and not k.startswith("ENGINE_")}
    return subprocess.run(
        [PYTHON, "manage.py", *args],
        cwd=REPO_ROOT,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def settings_value(expr: str, env: dict[str, str]) -> str:
    code = f"from django.conf import settings; print({expr})"
    result = run_manage("shell", "-c", code, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]  # the shell may print an import banner first


PRODUCTION = {"DEBUG": "0", "SECRET_KEY": "x" * 64 + "-production-like-key", "ALLOWED_HOSTS": "shop.example.com"}


def test_check_passes():
    result = run_manage("check", env={"DEBUG": "1"})
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_deploy_check_is_clean_with_production_settings():
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr


def test_production_refuses_to_start_without_secret_key():
    result = run_manage("check", env={"DEBUG": "0"})
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_migrations_are_committed():
    result = run_manage("makemigrations", "--check", "--dry-run", env={"DEBUG": "1"})
    assert result.returncode == 0, result.stdout + result.stderr


def test_embedded_defaults_without_redis(tmp_path):
    env = {"DEBUG": "1", "SHOP_ASSISTANT_VAR_DIR": str(tmp_path)}
    assert settings_value("settings.CHANNEL_LAYERS['default']['BACKEND']", env) == (
        "channels.layers.InMemoryChannelLayer"
    )
    assert settings_value("settings.CELERY_TASK_ALWAYS_EAGER", env) == "True"
    assert settings_value("settings.DATABASES['default']['ENGINE']", env) == "django.db.backends.sqlite3"
    assert (tmp_path / "secret_key").exists()  # development key generated and kept


def test_full_stack_settings_from_environment():
    env = {
        **PRODUCTION,
        "REDIS_URL": "redis://127.0.0.1:6379/3",
        "DATABASE_URL": "postgres://shop:pw@db.internal:5432/shop",
        "ENGINE_MAX_NUM_SEQS": "7",
        "ENGINE_DEVICE": "cuda",
    }
    # channels-redis, wrapped so that a Redis outage degrades agent features instead of closing sockets.
    assert settings_value("settings.CHANNEL_LAYERS['default']['BACKEND']", env) == (
        "shop_assistant.runtime.layers.ResilientRedisChannelLayer"
    )
    assert settings_value("settings.CELERY_TASK_ALWAYS_EAGER", env) == "False"
    assert settings_value("settings.CELERY_BROKER_URL", env) == "redis://127.0.0.1:6379/3"
    assert settings_value("settings.DATABASES['default']['ENGINE']", env) == "django.db.backends.postgresql"
    assert settings_value("settings.DATABASES['default']['HOST']", env) == "db.internal"
    assert settings_value("settings.ENGINE['max_num_seqs'], settings.ENGINE['device']", env) == "7 cuda"


@pytest.mark.django_db
def test_home_page_renders():
    response = Client().get("/")
    assert response.status_code == 200
    assert b"<html" in response.content


def test_engine_settings_are_engine_config_fields():
    from dataclasses import fields

    from django.conf import settings

    from inference.core.config import EngineConfig

    names = {f.name for f in fields(EngineConfig)}
    assert set(settings.ENGINE) <= names


def test_compose_file_declares_the_stack():
    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web1", "web2", "nginx", "worker", "beat"} <= set(services)
    for name in ("postgres", "redis", "web1", "web2"):
        assert "healthcheck" in services[name], name
    for name in ("web1", "web2"):  # daphne with the chat's flags, behind nginx, each node with its own name
        assert "shop_assistant.serve" in " ".join(services[name]["command"])
        assert services[name]["environment"]["NODE_NAME"] == name
        # The address from nginx's X-Forwarded-For, believed from the project's network only (not daphne's
        # --proxy-headers, which believes anyone: shop_assistant/runtime/proxy.py).
        assert "--proxy-headers" not in services[name]["command"] and services[name]["environment"]["TRUSTED_PROXIES"]
    assert "worker" in " ".join(services["worker"]["command"])
    assert (REPO_ROOT / "Dockerfile").exists()


@pytest.mark.skipif(shutil.which("docker") is None, reason="no docker client on this machine")
def test_compose_config_validates():
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("docker client has no compose plugin")
    result = subprocess.run(
        ["docker", "compose", "-f", str(REPO_ROOT / "docker-compose.yml"), "config", "--quiet"],
        capture_output=True,
        text=True,
        env={**os.environ, "SECRET_KEY": "compose-config-check", "POSTGRES_PASSWORD": "x"},
    )
    assert result.returncode == 0, result.stderr


def test_inference_imports_no_web_layer():
    offenders = []
    for path in (REPO_ROOT / "inference").rglob("*.py"):
        for line in path.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith(("import ", "from ")) and stripped.split()[1].split(".")[0] in {
                "django",
                "shop_assistant",
                "catalog",
                "channels",
            }:
                offenders.append(f"{path.relative_to(REPO_ROOT)}: {stripped}")
    assert offenders == []


def test_ci_runs_the_heavy_tier_that_a_plain_run_leaves_out():
    import configparser
    import shlex

    ini = configparser.ConfigParser()
    ini.read(REPO_ROOT / "pytest.ini")
    addopts = shlex.split(ini["pytest"]["addopts"])
    assert addopts[addopts.index("-m") + 1] == "not heavy"
    lines = [line.strip() for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines()]
    # Command lines, without what handles their exit status (`|| pass1=$?`: CI waits for its second stream).
    commands = [shlex.split(line.split("||")[0].removesuffix("\\")) for line in lines
                if ".venv/bin/python -m pytest" in line or line.startswith("bash scripts/test.sh")]
    assert ["bash", "scripts/test.sh"] in commands
    # The heavy tier in two parts that together are all of it: the untimed tests beside the PostgreSQL pass, the
    # rest alone.
    assert ["bash", "scripts/test.sh", "-m", "heavy and not untimed"] in commands
    assert [".venv/bin/python", "-m", "pytest", "-m", "heavy and untimed", "-p", "no:cacheprovider"] in commands
    # Its PostgreSQL pass runs the database tests again.
    assert any("--database-tests" in line for line in lines)


REQUIREMENTS = REPO_ROOT / "requirements"
# Packages of the tests, the tools and the benchmark: in their locks, never in the image's.
NOT_RUNTIME = {"pytest", "hypothesis", "websockets", "playwright", "openai", "matplotlib"}


def _pins(path) -> dict[str, str]:
    """Package name (normalized) -> the version a requirements file pins with ``==``."""
    import re

    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", line)
        if match:
            pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins


def test_the_locks_are_compiled_from_their_sets_and_agree():
    from packaging.specifiers import SpecifierSet

    locks = {name: _pins(REQUIREMENTS / f"{name}.txt") for name in ("runtime", "test", "bench")}
    for name, lock in locks.items():
        for package, version in _pins(REQUIREMENTS / f"{name}.in").items():
            # PEP 440: ==2.13.0 is met by 2.13.0+cpu.
            assert package in lock and SpecifierSet(f"=={version}").contains(lock[package]), (
                f"{name}.in pins {package}=={version}; recompile {name}.txt"
            )
        # Every locked package, indirect ones included, carries its hashes.
        text = (REQUIREMENTS / f"{name}.txt").read_text()
        assert text.count("==") == len(lock) and text.count("--hash=sha256:") >= len(lock), name
    for name in ("test", "bench"):
        for other in ("runtime", "test"):
            shared = set(locks[name]) & set(locks[other])
            assert {p: locks[name][p] for p in shared} == {p: locks[other][p] for p in shared}, (name, other)


def test_the_image_installs_the_runtime_alone_with_torch_s_cpu_build():
    runtime = _pins(REQUIREMENTS / "runtime.txt")
    assert runtime["torch"] == "2.13.0+cpu"
    assert [p for p in runtime if p.startswith("nvidia-")] == []
    assert NOT_RUNTIME & set(runtime) == set()
    installs = [line for line in (REPO_ROOT / "Dockerfile").read_text().splitlines() if "pip install" in line]
    assert any("-r requirements/runtime.txt" in line for line in installs)
    assert not any("test.txt" in line or "bench.txt" in line for line in installs)


def test_production_code_imports_no_test_tool_or_bench_package():
    offenders = []
    for package in ("shop_assistant", "catalog", "inference"):
        for path in (REPO_ROOT / package).rglob("*.py"):
            for line in path.read_text().splitlines():
                stripped = line.strip()
                if stripped.startswith(("import ", "from ")) and stripped.split()[1].split(".")[0] in {
                    *NOT_RUNTIME,
                    "psutil",
                }:
                    offenders.append(f"{path.relative_to(REPO_ROOT)}: {stripped}")
    assert offenders == []


def _dockerignore_excludes(patterns: list[str], path: str) -> bool:
    """Whether Docker's rules (last matching line wins, ``!`` re-includes, ``**`` spans folders, a folder's
    match covers what is inside) leave ``path`` out of the build context."""
    import re

    def regex(pattern: str) -> re.Pattern[str]:
        out, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out, i = out + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                out, i = out + ".*", i + 2
            elif pattern[i] == "*":
                out, i = out + "[^/]*", i + 1
            elif pattern[i] == "?":
                out, i = out + "[^/]", i + 1
            elif pattern[i] == "[":
                end = pattern.index("]", i)
                out, i = out + pattern[i : end + 1], end + 1
            else:
                out, i = out + re.escape(pattern[i]), i + 1
        return re.compile(out + "(?:/.*)?")

    excluded = False
    for line in patterns:
        negate = line.startswith("!")
        if regex(line.lstrip("!").strip("/")).fullmatch(path):
            excluded = not negate
    return excluded


def test_dockerignore_keeps_secrets_local_data_and_history_out_of_the_image():
    """Before: no .dockerignore, so ``COPY . .`` put var/ (secret key, SQLite database), .env, .git and .venv into
    the image (issue 39, item 9)."""
    lines = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    left_out = ["var/secret_key", "var/db.sqlite3", "var/spool/messages.jsonl", ".env", ".env.production",
                "deploy/.env", ".git", ".git/HEAD", ".venv/bin/python", "bench-results/run.json",
                "shop_assistant/__pycache__/settings.cpython-311.pyc", "inference/core/__pycache__/x.pyc",
                "static/node_modules/lib/index.js", "node_modules/x.js", "db.sqlite3", ".pytest_cache/v/x"]
    kept = ["Dockerfile", "manage.py", "requirements/runtime.txt", "requirements/nodeps.txt", "deploy/nginx.conf",
            "shop_assistant/settings.py", "inference/worker/loader.py", "catalog/samples/shopify/apparel.csv",
            "static/shop_assistant/widget.js", "templates/base.html"]
    assert [path for path in left_out if not _dockerignore_excludes(patterns, path)] == []
    assert [path for path in kept if _dockerignore_excludes(patterns, path)] == []
    # What the Dockerfile copies by name is in the context.
    for copied in ("requirements/runtime.txt", "requirements/nodeps.txt"):
        assert (REPO_ROOT / copied).exists() and not _dockerignore_excludes(patterns, copied)
