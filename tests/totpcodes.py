"""The code an authenticator app shows, for the TOTP tests (security, console, browser)."""

from __future__ import annotations

import time
from base64 import b32decode

from django_otp.oath import TOTP

#: A code is never made this close to the end of its 30-second step: the server must
#: check it in the step it was made in, or it learns a drift of one step (django-otp's
#: OTP_TOTP_SYNC) that can put the next code out of its reach, a test failing by the clock.
MARGIN_S = 5


def app_code(key: bytes | str, steps_ahead: int = 0, step: int = 30, drift: int = 0) -> str:
    """The six-digit code for ``key`` (raw bytes, or the base32 secret shown to the user)
    now, or ``steps_ahead`` steps later (a code of the next step is accepted, and is not a
    replay of one used in this step)."""
    left = step - time.time() % step
    if left < MARGIN_S:
        time.sleep(left + 0.1)
    secret = b32decode(key) if isinstance(key, str) else key
    totp = TOTP(secret, step, 0, 6, drift)
    totp.time = time.time() + steps_ahead * step
    return f"{totp.token():06d}"
