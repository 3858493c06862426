"""manage.py without the settings it needs says, in one line, what to set: never a traceback (issue 23)."""

from __future__ import annotations

import pytest

from tests.test_project import run_manage


@pytest.mark.parametrize("command", [["migrate"], ["load_demo_store"], ["check"]])
def test_without_debug_or_secret_key_a_command_prints_one_line_saying_what_to_set(command, tmp_path):
    result = run_manage(*command, env={"SHOP_ASSISTANT_VAR_DIR": str(tmp_path)})
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "SECRET_KEY" in lines[0] and "DEBUG=1" in lines[0] and "Traceback" not in result.stderr


def test_a_garbled_number_is_named_in_one_line(tmp_path):
    result = run_manage("check", env={"DEBUG": "1", "CHAT_MAX_TOKENS": "lots", "SHOP_ASSISTANT_VAR_DIR": str(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.strip() == "manage.py: CHAT_MAX_TOKENS must be a whole number, not 'lots'"
