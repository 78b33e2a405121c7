"""Token authentication against hashed personal tokens."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from console.accounts.models import ApiToken, hash_key

#: ``last_used_at`` is written at most this often per token.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class ApiTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>``; the key is compared by its SHA-256."""

    def authenticate_credentials(self, key: str):
        try:
            token = ApiToken.objects.select_related("user").get(key_hash=hash_key(key))
        except ApiToken.DoesNotExist:
            raise exceptions.AuthenticationFailed("That token is not valid.") from None
        now = timezone.now()
        refusal = token.refusal(now)
        if refusal is not None:
            raise exceptions.AuthenticationFailed(refusal)
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token
