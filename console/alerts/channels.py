"""The alert channels, one class per kind in one table (``CHANNELS``, as Healthchecks'
``TRANSPORTS``): each knows a rule's targets on it, what a notification says there, how it
is sent, and whether a failed attempt is worth another.

- ``Email``: a rule's mail is one channel whoever is on its list; it is sent with Django's
  mail backend. Every failure is worth retrying (a mail server that refuses now may take
  the mail later).
- ``Webhook``: each URL is a channel of its own; the body is Alertmanager's webhook
  (version 4), POSTed as JSON. As Alertmanager's notifier does, of the receiver's answers
  only a 5xx (the receiver's trouble, which passes) is worth retrying: a 4xx (or a 3xx
  not followed) refuses the request itself. No answer at all (refused, timed out) is
  retried.

The queue (outbox.py), the evaluation's choice of targets (evaluate.py), what each channel
was told (compose.py) and the delivery (notify.py) ask the channel of a notification's
kind (``channel_of``); none of them names a kind.
"""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from django.conf import settings
from django.core.mail import EmailMessage

from console.alerts import render
from console.alerts.models import AlertRule, Notification

if TYPE_CHECKING:
    from console.alerts.evaluate import Notice


class DeliveryFailed(Exception):
    """An attempt failed: the notification stays pending for a retry, or, ``final``, it
    had its last attempt and is ``failed``."""

    def __init__(self, message: str, final: bool = False) -> None:
        super().__init__(message)
        self.final = final


def post_json(url: str, body: dict) -> None:
    """POST ``body`` as JSON; HttpAnswerFailed when the receiver answers an HTTP error."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "Tidemark-alerts"},
    )
    timeout = float(getattr(settings, "TIDEMARK_WEBHOOK_TIMEOUT_S", 10))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            response.read(4096)
    except urllib.error.HTTPError as error:
        raise HttpAnswerFailed(
            f"the webhook answered HTTP {error.code} {error.reason}", error.code
        ) from None


class HttpAnswerFailed(DeliveryFailed):
    """The receiver answered with an HTTP status other than 2xx (``status``)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Channel(ABC):
    """A kind of channel. ``kind`` is the Notification's ``channel``."""

    kind: ClassVar[str]
    #: Whether each target is a channel of its own (a webhook URL), rather than the kind
    #: being one channel of a rule whoever its targets are (the rule's mail).
    per_target: ClassVar[bool]

    @abstractmethod
    def targets(self, rules: Iterable[AlertRule]) -> list[str]:
        """The targets of ``rules`` on this channel (one rule's, or the rules' a rule
        without channels of its own borrows), each once, in order."""
        ...

    def key(self, target: str) -> str:
        """One key per channel of a rule (what ``ChannelLog`` records what it was told by)."""
        if not self.per_target:
            return self.kind
        return hashlib.sha256(f"{self.kind}\x00{target}".encode()).hexdigest()

    @abstractmethod
    def render(self, notice: Notice, target: str) -> tuple[str, dict]:
        """The headline and the payload that say ``notice`` to ``target``."""
        ...

    @abstractmethod
    def send(self, row: Notification) -> None:
        """Send the row's payload to its target; raises when it was not taken."""
        ...

    def worth_retrying(self, error: BaseException) -> bool:
        """Whether an attempt that failed with ``error`` may succeed when made again."""
        return True


class Email(Channel):
    kind = Notification.EMAIL
    per_target = False

    def targets(self, rules: Iterable[AlertRule]) -> list[str]:
        addresses: list[str] = []
        for rule in rules:
            addresses += [a for a in rule.recipient_list() if a not in addresses]
        return ["\n".join(addresses)] if addresses else []

    def render(self, notice: Notice, target: str) -> tuple[str, dict]:
        subject, body = render.email(notice)
        return subject, {"subject": subject, "body": body, "to": target.splitlines()}

    def send(self, row: Notification) -> None:
        payload = row.payload
        message = EmailMessage(payload["subject"], payload["body"], to=list(payload["to"]))
        message.send(fail_silently=False)  # the backend's timeout is EMAIL_TIMEOUT


class Webhook(Channel):
    kind = Notification.WEBHOOK
    per_target = True

    def targets(self, rules: Iterable[AlertRule]) -> list[str]:
        urls: list[str] = []
        for rule in rules:
            if rule.webhook_url and rule.webhook_url not in urls:
                urls.append(rule.webhook_url)
        return urls

    def render(self, notice: Notice, target: str) -> tuple[str, dict]:
        return render.subject(notice), render.webhook(notice)

    def send(self, row: Notification) -> None:
        post_json(row.target, row.payload)

    def worth_retrying(self, error: BaseException) -> bool:
        """Alertmanager's rule: of the receiver's answers only a 5xx is retried; no answer
        at all (refused, timed out) is."""
        return not isinstance(error, HttpAnswerFailed) or error.status // 100 == 5


#: Every kind of channel, by its ``kind``, in the order a rule's notifications are queued.
CHANNELS: dict[str, Channel] = {channel.kind: channel for channel in (Email(), Webhook())}


def channel_of(row: Notification) -> Channel:
    """The channel a notification goes to."""
    return CHANNELS[row.channel]
