"""Who may decide, as this process checks it: the seal on authority rows, the audit of rows
that do not verify, and the one-time adoption of rows from before rows were signed.

`seal_for(platform)` is aat's decision key as it signs and checks operator, passkey, agent
token and session rows (`webplatform.store.seals`). Only processes that hold the key (the
dashboard, `/mcp` in `aat serve`, the command line of the OS user that owns `AAT_HOME`) ask
for it; the first time one does after the upgrade that introduced signatures, the rows
already there are signed, once (see `adopt_unsigned`).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from webplatform import keyfiles
from webplatform.platform import Platform, install_roles, install_sealer

# Re-exported: the database markers and audit event of the adoption, whose SQL is the store's.
from webplatform.store.adoption import ADOPTED_EVENT as ADOPTED_EVENT
from webplatform.store.adoption import ADOPTED_KEY as ADOPTED_KEY
from webplatform.store.adoption import APPROVALS_ADOPTED_KEY as APPROVALS_ADOPTED_KEY
from webplatform.store.seals import Revocations, RowSeal
from webplatform.trust import signing
from webplatform.trust.permissions import ROLE_BOOK
from webplatform.trust.revocation_chain import ChainedRevocations
from webplatform.trust.revocations import revocations_for

# In AAT_HOME: written once the rows found at the upgrade were signed. Never removed by aat,
# and outside the database, so deleting a database row cannot make aat adopt rows again.
ADOPTED_FILE = "authority-adopted"
# The same, for the co-approvals and job policies signed since migration 0016.
APPROVALS_ADOPTED_FILE = "approvals-adopted"
# Also in AAT_HOME, also never removed: once an operator existed, first-run setup stays
# closed, and once an agent token was minted, /mcp wants one, even if a database writer
# deletes every operator (and the database's own markers) or every token row.
OPERATORS_FILE = "operators-existed"
TOKENS_FILE = "agent-tokens-minted"

_lock = threading.Lock()
_seals: dict[tuple[str, str], RowSeal] = {}


def seal_for(platform: Platform) -> RowSeal:
    """This process's seal for `platform`'s home (the decision key, made if there is none yet,
    plus the keys `AAT_DECISION_PUBLIC_KEY` trusts); adopts unsigned rows on first use."""
    settings = platform.settings
    cache_key = (str(settings.home), settings.decision_public_key)
    with _lock:
        seal = _seals.get(cache_key)
        if seal is None:
            trusted = [
                signing.parse_public_key(line)
                for line in settings.decision_public_key.split(",")
                if line.strip()
            ]
            revoked: Revocations = revocations_for(settings.home)
            if platform.engine.dialect.name != "sqlite":
                # Several hosts on one database: what one revoked counts on all (SPEC §24).
                revoked = ChainedRevocations(platform, revoked)
            seal = signing.signer_for(settings.home).row_seal(trusted, revoked)
            adopt_unsigned(platform, seal)
            adopt_unsigned_approvals(platform, seal)
            _seals[cache_key] = seal
        return seal


def remember(platform: Platform, marker: str) -> None:
    """Leave `marker` (OPERATORS_FILE or TOKENS_FILE) in AAT_HOME, for good."""
    path = platform.settings.home / marker
    if not path.exists():
        stamp = datetime.now(UTC).isoformat() + "\n"
        keyfiles.write(path, stamp.encode("ascii"), mode=0o600, replace=False)


def remembers(platform: Platform, marker: str) -> bool:
    """True once `marker` was left in AAT_HOME."""
    return (platform.settings.home / marker).exists()


def report_forged(platform: Platform) -> None:
    """Write the forged rows this process noticed to the audit trail (once per row)."""
    seal = seal_for(platform)
    if not seal.has_pending():
        return
    forged = seal.take_pending()
    try:
        platform.audit.record_forged(forged)
    except Exception:
        seal.give_back(forged)
        raise


def adopt_unsigned(platform: Platform, seal: RowSeal) -> None:
    """Sign the operator, passkey and agent token rows that have no signature, and end the
    unsigned sessions, exactly once for this `AAT_HOME` and database; audited.

    Runs when a process first holds the key after the upgrade that added signatures. The
    marker file in `AAT_HOME` makes it never run again there; the marker in the database
    keeps a second host (another `AAT_HOME` on the same PostgreSQL) from adopting rows that
    were inserted after the first host adopted.
    """
    marker = platform.settings.home / ADOPTED_FILE
    if marker.exists():
        return
    now = datetime.now(UTC).isoformat()
    had_operators, had_tokens = platform.adoption.rows(seal, now)
    if had_operators:
        remember(platform, OPERATORS_FILE)
    if had_tokens:
        remember(platform, TOKENS_FILE)
    keyfiles.write(marker, (now + "\n").encode("ascii"), mode=0o600, replace=False)


def adopt_unsigned_approvals(platform: Platform, seal: RowSeal) -> None:
    """Sign the approval rows and the policies of jobs still waiting or approved that have no
    signature (made before migration 0016), exactly once for this `AAT_HOME` and database,
    audited; as `adopt_unsigned`, a marker file and a database marker keep it from ever
    running again, so a row inserted or a signature cleared by SQL afterwards stays unsigned."""
    marker = platform.settings.home / APPROVALS_ADOPTED_FILE
    if marker.exists():
        return
    now = datetime.now(UTC).isoformat()
    platform.adoption.approvals(seal, now)
    keyfiles.write(marker, (now + "\n").encode("ascii"), mode=0o600, replace=False)


install_sealer(seal_for)
install_roles(ROLE_BOOK)
