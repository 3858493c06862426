"""The tools drive a real daphne (and Celery worker): the chat's and the console's fixtures, shared, not copied."""

from tests.chat.conftest import run_daphne, run_worker, subprocess_env  # noqa: F401
from tests.console.conftest import *  # noqa: F401,F403
