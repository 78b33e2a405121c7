"""The checks behind ``verify``, one module per kind of file; each reads its files
read-only and returns what it found (``problems.Findings``). ``verify.verify_store``
runs them all."""
