"""Settings, read in one place from `AAT_*` environment variables and command-line flags.

Settings are built by `get_settings()` (or `Settings(...)` in tests), never at import time,
so every test can point `AAT_HOME` at its own temporary folder.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

EXAMPLES_ROOT = Path(__file__).parent / "examples"

# AAT_UNCONFINED's two values.
UNCONFINED_ALL, UNCONFINED_NAMESPACES = "1", "namespaces"
# A duration in seconds or a size cap that only makes sense above zero.
Positive = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]


class SettingsError(ValueError):
    """Settings that cannot work; the message is one line naming each `AAT_*` variable."""


class HomeUnavailable(PermissionError):
    """AAT_HOME (or the database in it) cannot be opened by this OS user: in the
    service-account deployment it belongs to the service user alone."""

    def __init__(self, home: Path) -> None:
        super().__init__(
            f"cannot open AAT_HOME {home}: permission denied (it belongs to another OS user); "
            "run this command as that user (e.g. `sudo -u aat aat ...`); agents reach aat "
            "through `aat mcp --url` with an agent token"
        )


class DatabaseUnreachable(ConnectionError):
    """The database server did not take a connection: one line naming it (password hidden)
    and why."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"the database at {where} cannot be reached ({reason})")


class Settings(BaseSettings):
    """Everything aat can be configured with; each field is `AAT_<NAME>` in the environment."""

    model_config = SettingsConfigDict(env_prefix="AAT_", extra="ignore", allow_inf_nan=False)

    home: Path = Field(default_factory=lambda: Path("~/.local/share/aat").expanduser())
    # `:`-separated folders; empty means the example registry shipped with the package.
    registry: str = ""
    # May carry a database password: a secret that never prints (`database_url` reads it).
    db_url: SecretStr = SecretStr("")
    approval_ttl_s: Positive = 900.0
    approval_wait_s: Positive = 50.0
    # A queued call's preview (SPEC §16) is stopped after this many seconds.
    preview_timeout_s: Positive = 5.0
    worker_lease_s: Positive = 10.0
    # PostgreSQL ends a session left idle inside a transaction this long (a process frozen
    # mid-transaction would hold its locks, the audit chain's among them, for every host); 0:
    # never. No aat transaction waits on anything but the database.
    db_idle_in_transaction_s: Annotated[float, Field(ge=0)] = 60.0
    # How long an upstream MCP server is kept without a call before it is stopped (SPEC §22).
    server_idle_s: Positive = 300.0
    capabilities_max_bytes: PositiveInt = 40_000
    result_max_bytes: PositiveInt = 20_000
    mcp_deny_irreversible: bool = False
    dashboard_url: str = "http://127.0.0.1:8000"
    # The path prefix a reverse proxy strips before passing requests on (`/aat`); every URL
    # the dashboard hands out carries it. Empty: served at the root.
    root_path: str = ""
    # Extra Host names the dashboard answers to, comma-separated (`aat.example.org:8443`).
    allowed_hosts: str = ""
    # The WebAuthn relying party passkeys are made for; empty: the host of an https
    # dashboard_url, else `localhost`.
    passkey_rp_id: str = ""
    # The longest an `allow` rule may last (SPEC §16), in hours.
    rule_max_hours: Positive = 24.0
    mcp_token: SecretStr = SecretStr("")
    # A bearer token that lets a Prometheus scraper read `aat serve`'s /metrics (SPEC §23).
    metrics_token: SecretStr = SecretStr("")
    # This `aat serve`'s base URL as the other replicas reach it (`http://10.0.0.5:8000`), named
    # in the MCP session ids it hands out; empty: the address each request came in on.
    replica_url: str = ""
    # `aat mcp --url`: a running `aat serve`'s /mcp to forward to, and the agent token to send.
    mcp_url: str = ""
    agent_token: SecretStr = SecretStr("")
    # The dashboard's decision public key(s) (`aat keys show`), comma-separated, for workers
    # on hosts that must not hold the private key; empty: read it from AAT_HOME.
    decision_public_key: str = ""
    # Watch the registry folders (inotify) instead of statting them on every read.
    watch_registry: bool = True
    retention_days: PositiveInt = 30
    heartbeat_s: Positive = 2.0
    # `:`-separated folders tools may read and write (SPEC §14), besides the caller's folder.
    workspaces: str = ""
    # What the operator accepts where confinement is missing (SPEC §14, §17): "1", tools run
    # unconfined where Landlock is missing; "namespaces", tools run with Landlock alone where
    # namespaces of their own are missing; "" (unset), neither: tools are refused.
    unconfined: str = ""
    # Behave as if the kernel had no Landlock, or could make no namespaces: only for testing
    # the refusals above.
    confine_pretend_unavailable: bool = False
    confine_pretend_no_namespaces: bool = False
    # Proxies (addresses, comma-separated) whose X-Forwarded-For the dashboard believes;
    # empty: none, so a client cannot forge the address audit events and login limits use.
    trusted_proxies: str = ""
    # At most this many calls from one requester wait for an approval at once.
    max_pending: PositiveInt = 20
    # Arguments larger than this (canonical JSON, bytes) are refused as `invalid`.
    max_args_bytes: PositiveInt = 256 * 1024
    # Apprise URLs (space or comma separated) told about every new pending approval; they
    # carry tokens and passwords, so they never print (`notify_urls` reads them).
    notify: SecretStr = SecretStr("")
    # The fewest distinct operators who must approve any irreversible call (SPEC §11); an
    # action's `approvals:` may ask for more, never fewer.
    approvals_required: PositiveInt = 1
    # 0: the operator who asked for a run (or owns the agent token that asked) never
    # approves it, whatever the action says.
    self_approval: bool = True
    # Agents that sign in through the browser (SPEC §18): how long an access token and a
    # refresh token live, and whether a Client ID Metadata Document may live on a loopback or
    # private address.
    oauth_token_ttl_s: PositiveInt = 3600
    oauth_refresh_ttl_s: PositiveInt = 30 * 86400
    oauth_loopback_clients: bool = False
    # The most a tool's manifest may raise its `limits:` to (SPEC §20): processes and threads
    # at once, memory and the size of one file or its scratch folder (MB), open files.
    max_processes: PositiveInt = 1024
    max_memory_mb: PositiveInt = 8192
    max_file_mb: PositiveInt = 8192
    max_open_files: PositiveInt = 65536

    @field_validator("unconfined", mode="before")
    @classmethod
    def _unconfined_value(cls, value: object) -> str:
        text = str(value).strip().lower()
        if value is True or text in ("1", "true", "yes", "on"):
            return UNCONFINED_ALL
        if value is False or text in ("", "0", "false", "no", "off"):
            return ""
        if text == UNCONFINED_NAMESPACES:
            return UNCONFINED_NAMESPACES
        raise ValueError(
            f"AAT_UNCONFINED must be 1 (tools run unconfined where Landlock is missing) or "
            f"namespaces (tools run with Landlock alone where namespaces are missing), "
            f"not {str(value)!r}"
        )

    @field_validator("root_path")
    @classmethod
    def _root_path_shape(cls, value: str) -> str:
        root = value.strip().rstrip("/")
        if root and (not root.startswith("/") or "//" in root or "?" in root or "#" in root):
            raise ValueError(f"AAT_ROOT_PATH must be a path like /aat, not {value!r}")
        return root

    @property
    def registry_roots(self) -> list[Path]:
        """The registry folders in search order."""
        if not self.registry.strip():
            return [EXAMPLES_ROOT]
        return [Path(p).expanduser() for p in self.registry.split(":") if p.strip()]

    @property
    def database_url(self) -> str:
        """`AAT_DB_URL`, or the SQLite file under `AAT_HOME`."""
        return self.db_url.get_secret_value() or f"sqlite:///{self.home / 'aat.db'}"

    @property
    def trusted_proxy_list(self) -> list[str]:
        """Addresses from `AAT_TRUSTED_PROXIES`."""
        return [p.strip() for p in self.trusted_proxies.split(",") if p.strip()]

    @property
    def notify_urls(self) -> list[str]:
        """The Apprise URLs in `AAT_NOTIFY`."""
        return [u for u in re.split(r"[\s,]+", self.notify.get_secret_value()) if u]

    def job_page_url(self, job_id: int) -> str:
        """The dashboard's page for one job (under `AAT_DASHBOARD_URL`)."""
        return f"{self.dashboard_url.rstrip('/')}/jobs/{job_id}"

    @property
    def extra_allowed_hosts(self) -> list[str]:
        """Host names from `AAT_ALLOWED_HOSTS`."""
        return [h.strip() for h in self.allowed_hosts.split(",") if h.strip()]


def get_settings(**overrides: object) -> Settings:
    """Build settings from the environment, with command-line flags as overrides.

    Raises `SettingsError` (one line naming each wrong variable) for values that cannot work.
    """
    clean = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**clean)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise SettingsError(settings_problems(exc)) from None


def settings_problems(exc: ValidationError) -> str:
    """One line naming each `AAT_*` variable `exc` refused, its value and what it must be."""
    problems = []
    for error in exc.errors(include_url=False):
        field = str(error["loc"][0]) if error["loc"] else ""
        variable = f"AAT_{field.upper()}"
        message = str(error["msg"]).removeprefix("Value error, ")
        if message.startswith(variable):
            problems.append(message)  # a validator's own message already names it
            continue
        message = message.replace("Input should be", "must be")
        problems.append(f"{variable}{_shown(field, error.get('input'))} {message}")
    return "; ".join(problems) + " (change or unset the variable)"


def _shown(field: str, value: object) -> str:
    if field in SECRET_FIELDS:
        return ""  # never echo a secret, even a malformed one
    text = str(value)
    return f"={text}" if text.isprintable() and len(text) <= 80 else f"={text[:80]!r}"


SECRET_FIELDS = frozenset(
    name for name, field in Settings.model_fields.items() if field.annotation is SecretStr
)
