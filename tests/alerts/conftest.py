"""The alert tests use the role users and clients of tests/conftest.py; metrics, rules and
silences are made with tests/alerts/alerttools.py."""
