"""Settings for the test suite: the real settings with a development key when none is given."""

import os
from pathlib import Path

os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from .settings import *  # noqa: E402,F401,F403

# A file, not memory, so that daphne and Celery worker subprocesses in tests see the same test database.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_db.sqlite3")}  # noqa: F405
    # The test database is recreated every session; a WAL left beside it by a killed run (SQLite runs in WAL
    # mode) would be read as part of the new file.
    for _suffix in ("-wal", "-shm"):
        Path(DATABASES["default"]["TEST"]["NAME"] + _suffix).unlink(missing_ok=True)  # noqa: F405

# In-process websocket tests all come from one address; the per-address message limit is tested on its own.
CHAT_LIMITS = {**CHAT_LIMITS, "messages_per_minute_per_ip": 100000}  # noqa: F405
