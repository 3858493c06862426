"""scripts/run.sh's server is safe on a LAN (issue 23): DEBUG off, so a stranger's 404 lists nothing; static files
from WhiteNoise; a secret key kept in var/; staff can still log in over plain http."""

from __future__ import annotations

import http.cookiejar
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import pytest
from django.contrib.auth import get_user_model

from catalog.models import Store
from tests.chat.conftest import run_daphne
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow


def run_sh_environment(tmp_path) -> dict[str, str]:
    """The variables scripts/run.sh exports, read from the script itself, with its key file under tmp_path."""
    exports = "\n".join(line for line in (REPO_ROOT / "scripts" / "run.sh").read_text().splitlines()
                        if line.startswith("export "))
    # A clean environment: what the script sets, not what this process has (settings_test sets DEBUG=1).
    printed = subprocess.run(["env", "-i", "bash", "-c", exports + "\nenv -0"], capture_output=True, text=True,
                             check=True).stdout
    env = dict(item.split("=", 1) for item in printed.split("\0") if "=" in item)
    wanted = {"DEBUG", "SECRET_KEY_FILE", "HTTPS", "ALLOWED_HOSTS"}
    assert wanted <= env.keys(), env
    env = {name: env[name] for name in wanted}
    env["SECRET_KEY_FILE"] = str(tmp_path / env["SECRET_KEY_FILE"])
    return env


def test_run_sh_exports_a_safe_setup(tmp_path):
    env = run_sh_environment(tmp_path)
    assert env["DEBUG"] == "0" and env["SECRET_KEY_FILE"].endswith("var/secret_key")
    run_sh = (REPO_ROOT / "scripts" / "run.sh").read_text()
    assert "collectstatic" in run_sh  # WhiteNoise serves the collected files when DEBUG is off


def get(opener, url: str) -> tuple[int, str]:
    try:
        with opener.open(url, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_the_server_run_sh_starts_shows_no_debug_pages_serves_static_and_logs_staff_in(transactional_db, tmp_path):
    env = {**run_sh_environment(tmp_path), "STATIC_ROOT": str(tmp_path / "static"), "ENGINE_AUTOSTART": "0"}
    from tests.chat.conftest import subprocess_env

    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=REPO_ROOT,
                   env=subprocess_env(**env), check=True, timeout=300)
    Store.objects.create(slug="lan", name="LAN shop")
    get_user_model().objects.create_superuser("boss", password="a-long-test-password-1")

    with run_daphne(tmp_path, **env) as server:
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        status, page = get(opener, server.http + "/no-such-page")
        assert status == 404 and "URLconf" not in page and "admin/" not in page
        status, script = get(opener, server.http + "/static/widget/widget.js")
        assert status == 200 and "Shop Assistant chat widget" in script
        assert get(opener, server.http + "/static/admin/css/base.css")[0] == 200

        status, form = get(opener, server.http + "/accounts/login/?next=/console/")
        assert status == 200
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        data = urllib.parse.urlencode({"username": "boss", "password": "a-long-test-password-1",
                                       "csrfmiddlewaretoken": token, "next": "/console/"}).encode()
        request = urllib.request.Request(server.http + "/accounts/login/", data=data,
                                         headers={"Origin": server.http, "Referer": server.http + "/accounts/login/"})
        with opener.open(request, timeout=60) as response:  # follows the redirect into the console
            assert response.status == 200 and response.url.endswith("/console/")
    assert (tmp_path / "var" / "secret_key").stat().st_mode & 0o777 == 0o600
