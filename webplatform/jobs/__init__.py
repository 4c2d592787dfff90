"""The job's life: a call requested, recorded, decided, edited, withdrawn, claimed, run, answered.

- `services`: the only door to a run (registry -> validation -> gate -> job -> runner or queue).
- `resolution`, `admission`: which tool and action a call names; the bounds it must fit.
- `calls`, `recording`: a call becomes a row in its first state, with its policy and audit
  (`recording.create` is the one creation path, edits included).
- `states`: the one door for a decided job's life (approve, deny, cancel, expire, move);
  every state change is a compare-and-set with an audit event, and every decision first
  asks the decision point (`webplatform.trust.decidability`).
- `decisions`, `edits`: an operator's approve, deny and edit-then-approve (dashboard only).
- `withdrawal`, `tracking`: the requester withdraws, waits for and reads its own jobs.
- `leases`, `execution`: a worker's claim on an approved job, and running it once.
- `previews`: what a queued irreversible call would do, shown before anyone decides.
- `ruling`: the rules in force asked once per call: refused, queued, or allowed at once.
- `answers`: the one answer shape every run-style call gets, on every surface.
"""
