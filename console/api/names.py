"""The patterns of topic and group names in the API's schema (no imports: settings use it).

The engine's rule (storeadapter/engine/names.py) minus a leading dot, so that "." and ".."
are excluded without a lookahead: a name the schema allows is never refused as a name.
In bodies a topic may be a group's ``%RETRY%`` or ``%DLQ%`` topic; in paths the schema
leaves those out (a ``%`` in a path is easily mangled), though the URLs accept them.
"""

NAME_PATTERN = r"^(%RETRY%|%DLQ%)?[A-Za-z0-9_-][A-Za-z0-9._-]{0,126}$"
PATH_NAME_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,126}$"
