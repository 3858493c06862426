#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_assistant.settings")
    from django.core.management import execute_from_command_line

    from shop_assistant.environment import MissingSetting

    try:
        execute_from_command_line(sys.argv)
    except MissingSetting as error:
        # What to set, in one line: a traceback through Django's settings loader would bury it.
        sys.exit(f"{os.path.basename(sys.argv[0])}: {error}")


if __name__ == "__main__":
    main()
