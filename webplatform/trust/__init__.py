"""Who may decide, and how it is proven.

- `permissions`: who may do what, `may(actor, permission, target)`: the one place roles
  are read; pages get its answers as booleans.
- `gate`: the reversibility gate; which calls need an operator at all.
- `policy`: an irreversible action's approval policy (N distinct operators, self-approval).
- `decidability`: the one decision point: may this operator decide this job now, and what
  is still needed (state, expiry, signed policy, role, self-approval, signed approvals
  given), and the worker's check of the same before it starts a job.
- `stepup`: the proof (password or passkey) an operator gives to decide.
- `door`: the one trust door: verifies a step-up and records the decision it confirms, for
  the dashboard and the command line.
- `signing`: an approval is an Ed25519 signature over the job's digest, not a row.
- `ledger`: one signed approval starts one run.
- `revocations`: signed rows aat revoked, listed outside the database so none comes back.
- `authority`: the seal on the rows that say who may decide, checked by every process.
- `changes`: changing who may decide (roles, passwords, agent tokens), from the dashboard only.
- `rules`, `rulebook`: rules that decide calls in advance (YAML or Cedar, matched by Cedar),
  and the signed rows they are kept in; the worker's last check of a rule-allowed call.
- `oauth`, `oauth_clients`, `sign_in`: agents signing in through the browser (MCP
  authorization), the clients they are, and the operator's allowing it with a step-up.
"""

# Imported with the package, so every process that uses trust has the seal installed that
# `Platform.seal()` and the store objects sign and check authority rows with.
from webplatform.trust import authority as _authority  # noqa: E402, F401
