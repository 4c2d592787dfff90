"""outbox: an irreversible demo that touches nothing real.

`send-message` writes one JSON file per message into $AAT_HOME/outbox/ (after sleeping
`--delay-s` seconds); `list-messages` lists them; `delete-messages` removes them.
`preview-message` and `preview-deletion` (read-only) show what those two would do, as
the operator's approval card shows it: the file a message would be, as a diff, and the
messages a delete would remove, as a table.
Prints one JSON object; exit 0 ok, 2 for a call that needs fixing, 1 when AAT_HOME is missing.
"""

import argparse
import datetime as dt
import json
import os
import sys
import time
import uuid
from pathlib import Path


class UsageError(Exception):
    """The call needs fixing; exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def outbox():
    home = os.environ.get("AAT_HOME")
    if not home:
        raise RuntimeError("AAT_HOME is not set; run this tool through aat")
    return Path(home) / "outbox"


def delay(raw):
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"--delay-s must be a number of seconds, got {raw!r}") from None
    if not 0 <= value <= 3600:
        raise UsageError(f"--delay-s must be between 0 and 3600, got {value:g}")
    return value


def send_message(args):
    folder = outbox()
    time.sleep(args.delay_s)
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    message_id = uuid.uuid4().hex
    message = {
        "id": message_id,
        "to": args.to,
        "subject": args.subject,
        "body": args.body,
        "sent_at": now.isoformat(),
    }
    final = folder / f"{now:%Y%m%dT%H%M%S%fZ}-{message_id}.json"
    # Write then rename: a reader never sees half a message, and a crash leaves no message.
    tmp = folder / f".{final.name}.tmp"
    tmp.write_text(json.dumps(message, ensure_ascii=False, indent=2), encoding="utf-8")
    os.replace(tmp, final)
    return {"sent": True, "id": message_id, "file": str(final)}


def preview_message(args):
    message = {
        "id": "(set when sent)",
        "to": args.to,
        "subject": args.subject,
        "body": args.body,
        "sent_at": "(set when sent)",
    }
    lines = json.dumps(message, ensure_ascii=False, indent=2).splitlines()
    header = [
        "--- /dev/null",
        "+++ $AAT_HOME/outbox/(new message).json",
        f"@@ -0,0 +1,{len(lines)} @@",
    ]
    if args.delay_s:
        header.insert(0, f"(written after a delay of {args.delay_s:g} s)")
    return {"diff": "\n".join([*header, *(f"+{line}" for line in lines)]) + "\n"}


def preview_deletion(_args):
    gone = []
    for f in message_files():
        try:
            message = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            message = {}
        gone.append(
            {
                "file": f.name,
                "to": message.get("to"),
                "subject": message.get("subject"),
                "sent_at": message.get("sent_at"),
            }
        )
    return {"messages": gone}


def message_files():
    folder = outbox()
    return sorted(folder.glob("[!.]*.json")) if folder.is_dir() else []


def list_messages(_args):
    return {"messages": [json.loads(f.read_text(encoding="utf-8")) for f in message_files()]}


def delete_messages(_args):
    deleted = 0
    for f in message_files():
        try:
            f.unlink()
        except FileNotFoundError:  # removed by a concurrent delete: not ours to count
            continue
        deleted += 1
    return {"deleted": deleted}


def build_parser():
    parser = Parser(prog="outbox")
    actions = parser.add_subparsers(dest="action", required=True)
    send = actions.add_parser("send-message")
    for name in ("--to", "--subject", "--body"):
        send.add_argument(name, required=True)
    send.add_argument("--delay-s", type=delay, default=0.0)
    draft = actions.add_parser("preview-message")
    for name in ("--to", "--subject", "--body"):
        draft.add_argument(name, required=True)
    draft.add_argument("--delay-s", type=delay, default=0.0)
    actions.add_parser("list-messages")
    actions.add_parser("delete-messages")
    actions.add_parser("preview-deletion")
    return parser


def fail(message, code):
    print(json.dumps({"error": message}, ensure_ascii=False))
    print(f"outbox: error: {message}", file=sys.stderr)
    sys.exit(code)


def main():
    handlers = {
        "send-message": send_message,
        "list-messages": list_messages,
        "delete-messages": delete_messages,
        "preview-message": preview_message,
        "preview-deletion": preview_deletion,
    }
    try:
        args = build_parser().parse_args()
        result = handlers[args.action](args)
    except UsageError as exc:
        fail(str(exc), 2)
    except RuntimeError as exc:
        fail(str(exc), 1)
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main()
