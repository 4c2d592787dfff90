"""`aat keys show` and `aat audit verify|export`: the decision key and the audit chain."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

from webplatform.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, settings_from


def cmd_keys(ns: argparse.Namespace, _extra: list[str]) -> int:
    """`aat keys show`: the decision public key, for AAT_DECISION_PUBLIC_KEY on worker hosts."""
    from webplatform.trust import signing

    settings = settings_from(ns)
    private = settings.home / signing.PRIVATE_KEY_FILE
    public = settings.home / signing.PUBLIC_KEY_FILE
    if private.exists():
        print(signing.signer_for(settings.home).public_line)
    elif public.exists():
        key = signing.parse_public_key(public.read_text(encoding="ascii"))
        print(signing.public_line(key))
    else:
        print(
            f"aat keys show: no decision key in {settings.home} yet; {signing.HOW_TO_GET_KEY}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def cmd_audit(ns: argparse.Namespace, _extra: list[str]) -> int:
    """`aat audit verify`: check the hash chain, and that every job's state is the one its
    own audit events left it in (one line per job that disagrees); `aat audit export`: JSON
    Lines with hashes."""
    from webplatform.platform import Platform

    since = None
    if ns.since:
        try:
            since = datetime.fromisoformat(ns.since)
        except ValueError:
            print(
                f"aat audit export: --since {ns.since!r} is not an ISO date or time "
                "(e.g. 2025-01-31 or 2025-01-31T12:00:00+00:00)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        since = since if since.tzinfo else since.replace(tzinfo=UTC)
    platform = Platform(settings_from(ns))
    try:
        if ns.op == "export":
            # Read whole, then printed: the transaction may be retried, the output must not.
            rows = platform.audit.export(since)
            for row in rows:
                print(json.dumps(row, ensure_ascii=False))
            return EXIT_OK
        report, out_of_step = platform.audit.verify()
    finally:
        platform.engine.dispose()
    if not report.intact:
        print(
            f"audit chain broken: {report.problem} ({report.checked} events before it verified)",
            file=sys.stderr,
        )
    else:
        print(f"audit chain intact: {report.checked} events checked")
    for line in out_of_step:
        print(line, file=sys.stderr)
    return EXIT_OK if report.intact and not out_of_step else EXIT_FAILED
