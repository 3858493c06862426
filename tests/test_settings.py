"""Settings the embedded run (scripts/run.sh) relies on to be safe on a LAN: DEBUG off, a secret key kept in
var/ (made once, mode 0600), plain-http cookies with HTTPS=0 (issue 23)."""

from __future__ import annotations

import stat

from tests.test_project import settings_value


def test_secret_key_file_is_made_once_with_mode_0600_and_kept(tmp_path):
    key_file = tmp_path / "var" / "secret_key"
    env = {"DEBUG": "0", "SECRET_KEY_FILE": str(key_file), "SHOP_ASSISTANT_VAR_DIR": str(tmp_path)}
    first = settings_value("settings.SECRET_KEY", env)
    assert key_file.read_text().strip() == first and len(first) >= 50
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert settings_value("settings.SECRET_KEY", env) == first  # the next start reads the same key
    assert settings_value("settings.DEBUG", env) == "False"


def test_https_off_keeps_cookies_usable_over_plain_http(tmp_path):
    env = {"DEBUG": "0", "SECRET_KEY": "k" * 60, "HTTPS": "0", "SHOP_ASSISTANT_VAR_DIR": str(tmp_path)}
    assert settings_value("settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE", env) == "False False"
    assert settings_value("settings.SECURE_SSL_REDIRECT, settings.SECURE_HSTS_SECONDS", env) == "False 0"
    production = {**env, "HTTPS": ""}
    assert settings_value("settings.SESSION_COOKIE_SECURE, settings.SECURE_SSL_REDIRECT", production) == "True True"


def test_a_bad_trusted_proxies_entry_stops_the_start_with_one_line(tmp_path):
    from tests.test_project import run_manage

    env = {"DEBUG": "1", "SHOP_ASSISTANT_VAR_DIR": str(tmp_path), "TRUSTED_PROXIES": "10.0.0.0/8,nginx"}
    result = run_manage("check", env=env)
    assert result.returncode != 0 and "TRUSTED_PROXIES: 'nginx' is not an IP address or network" in result.stderr
    assert "Traceback" not in result.stderr
    good = {**env, "TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7"}
    assert settings_value("settings.TRUSTED_PROXIES", good) == "['10.0.0.0/8', '192.0.2.7']"
    assert settings_value("settings.TRUSTED_PROXIES", {**good, "TRUSTED_PROXIES": "none"}) == "[]"


def test_production_takes_the_scheme_from_trusted_proxies_only(tmp_path):
    # Django's SECURE_PROXY_SSL_HEADER would believe X-Forwarded-Proto from any peer; runtime.proxy sets the scope's
    # scheme from it only when the peer is one of TRUSTED_PROXIES (tests/runtime/test_proxy.py).
    env = {"DEBUG": "0", "SECRET_KEY": "k" * 60, "SHOP_ASSISTANT_VAR_DIR": str(tmp_path)}
    assert settings_value("settings.SECURE_PROXY_SSL_HEADER", env) == "None"
