"""``tidemark topic-settings``: a topic's settings on the command line, through the
console's service (audited as ``cli:<name>`` or the console user of that name).

Without a setting flag it prints the topic's settings; with some it sets them (``default``
puts one back to the store's default). The flags are built from the engine's table
(``TOPIC_SETTINGS``). Acting as a console user, setting needs produce on the topic and
showing needs view (console/accounts/permissions.py); a refusal exits 4.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from console.cli.operator_verbs import _guarded, _require, _store_or_refuse, _table, actor
from storeadapter.engine import EXIT_OK, TOPIC_SETTINGS, TopicSetting

#: The word a setting flag takes to put the setting back to the store's default.
DEFAULT_WORD = "default"


def _value(setting: TopicSetting) -> Callable[[str], int | None]:
    def parse(text: str) -> int | None:
        if text == DEFAULT_WORD:
            return None
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"a whole number of {setting.unit} or {DEFAULT_WORD!r}, not {text!r}"
            ) from None
        if not setting.low <= value <= setting.high:
            raise argparse.ArgumentTypeError(
                f"{setting.low:,} to {setting.high:,} {setting.unit}, not {value:,}"
            )
        return value

    return parse


def _topic_settings(args: argparse.Namespace) -> int:
    from console.operations import topics as operations

    store = _store_or_refuse()
    who = actor(args.as_user)
    changes = {
        s.name: getattr(args, s.name) for s in TOPIC_SETTINGS if getattr(args, s.name) is not _UNSET
    }
    if changes:
        _require(who, "topic", args.topic, "produce")
        changed = operations.set_topic_settings(who, args.topic, changes)["changed"]
    else:
        _require(who, "topic", args.topic, "view")
        changed = {}
    from console.api.read_models import SettingRowSerializer
    from console.topics.detail import topic_settings

    rows = SettingRowSerializer(topic_settings(store, args.topic).settings, many=True).data
    if args.json:
        print(json.dumps({"topic": args.topic, "settings": rows, "changed": list(changed)}))
        return EXIT_OK
    _table(
        [
            [
                r["name"],
                TopicSetting.show(r["value"]),
                r["unit"],
                "topic" if r["own"] is not None else "store",
            ]
            for r in rows
        ],
        ["SETTING", "VALUE", "UNIT", "FROM"],
    )
    return EXIT_OK


class _Unset:
    def __repr__(self) -> str:
        return "unset"


_UNSET = _Unset()


def add_commands(commands: argparse._SubParsersAction) -> dict[str, Callable]:
    settings = commands.add_parser(
        "topic-settings",
        help="show or set a topic's settings (retention, maximum message size, dedup)",
        description="Without a setting flag, print the topic's settings; with some, set "
        f"them ('{DEFAULT_WORD}': back to the store's default). Changes are in the audit log.",
    )
    settings.add_argument("--topic", required=True)
    for setting in TOPIC_SETTINGS:
        settings.add_argument(
            setting.cli_flag,
            dest=setting.name,
            type=_value(setting),
            default=_UNSET,
            metavar=setting.unit.upper(),
            help=f"{setting.help} {setting.low:,} to {setting.high:,} {setting.unit}, or "
            f"'{DEFAULT_WORD}'.",
        )
    settings.add_argument("--as", dest="as_user", help="who the audit log names")
    settings.add_argument("--json", action="store_true")
    return {"topic-settings": _guarded(_topic_settings)}
