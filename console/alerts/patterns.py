"""The patterns of rules and silences: RE2 regular expressions, matched in linear time.

A group or topic name is chosen by whoever runs a consumer, so a pattern is matched against
text an outsider picked: Python's ``re`` backtracks, and ``(a+)+$`` against 28 letters
took 13.8 s per call. RE2 (``google-re2``) never backtracks: a match costs time linear in
the name, whatever the pattern. Patterns are bounded in length (``MAX_PATTERN_LENGTH``) and
in the memory of their compiled program (``MAX_PROGRAM_BYTES``); RE2 has no back-references
or look-arounds, and such a pattern is refused with a sentence that gives RE2's reason.

A pattern the forms would refuse can still be in the database (written by hand, or by an
older release): matching with it raises ``BrokenPattern`` rather than matching nothing, so
the rule's evaluation fails and says why (console/alerts/evaluate.py).
"""

from __future__ import annotations

import functools

import re2

#: The longest pattern accepted for a rule's or a silence's scope.
MAX_PATTERN_LENGTH = 200
#: The most memory one compiled pattern may take (RE2's ``max_mem``).
MAX_PROGRAM_BYTES = 1 << 20


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = MAX_PROGRAM_BYTES
    options.log_errors = False
    return options


class BrokenPattern(ValueError):
    """A pattern RE2 refuses (or too long), with a sentence that says why in RE2's words."""


#: RE2's reasons that mean a Perl feature it leaves out on purpose.
_PERL_ONLY = ("invalid escape sequence: \\", "invalid perl operator")


@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> re2._Regexp:
    """The compiled pattern, or BrokenPattern with a sentence a person can act on."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise BrokenPattern(f"At most {MAX_PATTERN_LENGTH} characters, please.")
    try:
        return re2.compile(pattern, _options())
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        hint = ""
        if any(str(reason).startswith(prefix) for prefix in _PERL_ONLY):
            hint = " (RE2 has no back-references or look-arounds)"
        raise BrokenPattern(f"Not a valid RE2 regular expression: {reason}{hint}.") from None


def pattern_matches(pattern: str, text: str) -> bool:
    """Whether the whole of ``text`` matches ``pattern`` (an empty pattern matches
    anything). Raises BrokenPattern for a pattern RE2 refuses."""
    if not pattern:
        return True
    return compile_pattern(pattern).fullmatch(text) is not None
