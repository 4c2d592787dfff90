"""The forms the dashboard's POST handlers take, each one value (FastAPI's form models).

A field missing from the request, or sent empty, takes its default, as a single `Form()`
parameter would.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from dashboard.stepup import Proof


class ProofForm(BaseModel):
    """The step-up sent with a decision or a change: a typed password and/or a passkey
    assertion (JSON from static/passkeys.js)."""

    password: str = ""
    passkey: str = ""

    def proof(self) -> Proof:
        """The step-up proof these fields carry."""
        return Proof(password=self.password, passkey=self.passkey)


class EditProofForm(BaseModel):
    """The edit form's step-up, named `_password` and `_passkey` there: the edited call's
    arguments share the form, and an argument may be called `password`, none `_password`."""

    password: str = Field(default="", alias="_password")
    passkey: str = Field(default="", alias="_passkey")

    def proof(self) -> Proof:
        """The step-up proof these fields carry."""
        return Proof(password=self.password, passkey=self.passkey)


class ApproveForm(ProofForm):
    """Approve: the digest of the arguments the page showed, the digest of the preview it
    showed (SPEC §20; absent where it showed none), and where to go afterwards."""

    digest: str = ""
    preview: str | None = None
    return_to: str = "job"


class DenyForm(BaseModel):
    """Deny: the reason for the agent (optional), and where to go afterwards."""

    reason: str = ""
    return_to: str = "job"


class MintForm(ProofForm):
    """Mint an agent token: its name."""

    name: str = ""


class RulesForm(ProofForm):
    """Make rules: their text, in the YAML form or in Cedar."""

    text: str = ""
    form: str = "yaml"


class AcceptForm(ProofForm):
    """Accept a server's held tool definitions: the digests the page showed, space-separated."""

    held: str = ""


class RoleForm(ProofForm):
    """Change an operator's role."""

    role: str = ""


class PasswordForm(ProofForm):
    """Change one's own password: the new one, twice."""

    new_password: str = ""
    new_password2: str = ""


class LoginForm(BaseModel):
    """Log in, then go to `next`."""

    username: str = ""
    password: str = ""
    next: str = "/"


class SetupForm(BaseModel):
    """Create the first operator with the one-time setup token."""

    token: str = ""
    username: str = ""
    password: str = ""
    password2: str = ""
