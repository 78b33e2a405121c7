#!/usr/bin/env python3
"""Django's command-line utility for the Tidemark console."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as error:
        # A setting from the environment is missing or wrong: the sentence says which.
        sys.exit(f"Tidemark cannot start: {error}")


if __name__ == "__main__":
    main()
