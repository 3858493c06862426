"""Settings for the test suite: the real settings with a development key when none is given."""

import os

os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from .settings import *  # noqa: E402,F401,F403

# A file, not memory, so that daphne and Celery worker subprocesses in tests see the same test database.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_db.sqlite3")}  # noqa: F405

# In-process websocket tests all come from one address; the per-address message limit is tested on its own.
CHAT_LIMITS = {**CHAT_LIMITS, "messages_per_minute_per_ip": 100000}  # noqa: F405

# The test process is not a node (see settings.NODE_LISTENER); daphne subprocesses in tests use the real settings.
NODE_LISTENER = False

# The orders' eager tasks (webhook deliveries, outcome emails) run in line in the test process, never on a thread
# that would outlive the test's database; the test of the thread turns it back on.
ORDERS_TASKS_IN_THREAD = False
