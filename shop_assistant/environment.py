"""What the settings need from the environment, and how they say that something is missing.

Imports nothing of the project: settings.py, manage.py and ``shop_assistant.serve`` use it before Django is set up.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured


class MissingSetting(ImproperlyConfigured):
    """The environment lacks (or garbles) a setting. Its message is one line that says what to set; the command
    line prints it instead of a traceback."""


def secret_key_from_file(path: Path) -> str:
    """The key kept in ``path``; made once (random, file mode 0600) when the file does not exist yet."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # O_EXCL with the mode: the file is never readable by others, not even between creating and chmod.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as file:
            file.write(secrets.token_urlsafe(50))
    key = path.read_text().strip()
    if not key:
        raise MissingSetting(f"the secret key file {path} is empty: delete it to have a new key made, or fill it")
    return key
