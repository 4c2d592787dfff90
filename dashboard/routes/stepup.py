"""Step-up challenges for passkeys: `navigator.credentials.get` options whose challenge can
confirm exactly one thing (an approval of one call, of one set of calls at once, a run, or
one change of who may decide), once, within two minutes. Called by `static/passkeys.js`
before it submits a form with an empty password field."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from dashboard import passkeys, similar
from dashboard.deps import OperatorDep, PlatformDep, RelyingPartyDep
from dashboard.render import json_body, json_error
from dashboard.stepup import BATCH_PURPOSE
from webplatform.platform import Platform
from webplatform.trust.stepup import Change, batch_digest, change_digest

router = APIRouter()
PURPOSES = ("approve", "run", "change")


def _bound_for(operator: str, body: dict[str, Any]) -> tuple[str, str, int | None]:
    """(purpose, digest, job_id) a step-up challenge asked for in `body` is bound to; for a
    change the digest is computed here, from what the change is."""
    purpose, digest, job_id = body.get("purpose"), body.get("digest"), body.get("job_id")
    if purpose == "change":
        change, target = body.get("change"), body.get("target") or {}
        if change not in {c.value for c in Change} or not isinstance(target, dict):
            raise HTTPException(400, "send {purpose: change, change: <kind>, target: {...}}")
        clean = {str(k): str(v) for k, v in target.items()}
        return "change", change_digest(operator=operator, change=Change(change), target=clean), None
    if purpose == BATCH_PURPOSE:
        return BATCH_PURPOSE, batch_digest(operator=operator, chosen=_pairs(body)), None
    if purpose not in PURPOSES or not isinstance(digest, str) or len(digest) != 64:
        raise HTTPException(400, "send {purpose: approve|run, digest: <the call's sha256>, job_id}")
    if purpose == "approve" and not isinstance(job_id, int):
        raise HTTPException(400, "approving with a passkey needs the job_id")
    return purpose, digest, job_id if purpose == "approve" else None


def _approve_allow(platform: Platform, body: dict[str, Any]) -> dict[str, Any]:
    """`body` with the target of an Approve and allow similar challenge made here: from the
    job and the form's choices sent, the job, its digest and the rule text's digest (the
    same the form's POST computes, so the challenge confirms exactly that rule)."""
    sent = body.get("target")
    if not isinstance(sent, dict):
        sent = {}
    job = sent.get("job")
    if not isinstance(job, str) or not job.isdigit():
        raise similar.NotSimilar("send target: {job: <id>, digest, duration, match_...}", 400)
    made = similar.prepare(platform, int(job), str(sent.get("digest", "")), sent)
    return {**body, "target": made.target}


def _pairs(body: dict[str, Any]) -> list[tuple[int, str]]:
    """The (job id, digest) pairs a batch challenge is asked for: `jobs: [[id, digest], ...]`."""
    pairs = body.get("jobs")
    shape = "send {purpose: approve-batch, jobs: [[job id, digest], ...]} with at least one job"
    if not isinstance(pairs, list) or not pairs:
        raise HTTPException(400, shape)
    chosen: dict[int, str] = {}
    for pair in pairs:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int)):
            raise HTTPException(400, shape)
        if not isinstance(pair[1], str) or len(pair[1]) != 64:
            raise HTTPException(400, shape)
        chosen.setdefault(pair[0], pair[1])
    return list(chosen.items())


@router.post("/stepup/options")
async def step_up_options(
    request: Request, platform: PlatformDep, operator: OperatorDep, rp: RelyingPartyDep
) -> Response:
    """Options for `navigator.credentials.get`, with a challenge that can confirm only the
    call with this digest (and this job, for a queued one), or only this one change, once,
    within two minutes."""
    body = await json_body(request)
    if body.get("purpose") == "change" and body.get("change") == Change.approve_allow.value:
        try:
            body = await run_in_threadpool(_approve_allow, platform, body)
        except similar.NotSimilar as exc:
            return json_error(str(exc), exc.status)
    try:
        purpose, digest, job_id = _bound_for(operator, body)
    except HTTPException as exc:
        return json_error(str(exc.detail))
    try:
        options = await run_in_threadpool(
            passkeys.assertion_options,
            platform=platform,
            rp=rp,
            operator=operator,
            purpose=purpose,
            digest=digest,
            job_id=job_id,
        )
    except passkeys.PasskeyError as exc:
        return json_error(str(exc))
    return Response(options, media_type="application/json")
