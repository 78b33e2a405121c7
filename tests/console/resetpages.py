"""What the offset-reset page tests share: readers of the group's offsets, of a page's
text and of its flashed messages (the group itself is conftest.py's ``billing``)."""

import html


def committed(store) -> list:
    return [store.committed_offset("billing", "orders", q) for q in (0, 1)]


def text(response) -> str:
    return html.unescape(response.content.decode())


def flashes(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]
