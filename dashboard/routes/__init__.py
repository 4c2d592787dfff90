"""The dashboard's pages, one module per area; each route only parses, calls, renders."""

from fastapi import APIRouter

from dashboard.routes import (
    account,
    agents,
    approvals,
    batch,
    connect,
    edit,
    exports,
    health,
    jobs,
    login,
    overview,
    registry,
    rules,
    run,
    servers,
    similar,
    stepup,
)

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    login.router,
    overview.router,
    registry.router,
    run.router,
    exports.router,
    edit.router,
    jobs.router,
    approvals.router,
    batch.router,
    agents.router,
    rules.router,
    similar.router,
    connect.router,
    account.router,
    stepup.router,
    servers.router,
)
