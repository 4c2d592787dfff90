"""The registry browser: search as you type, each tool's schema and call shapes, skills."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from markdown_it import MarkdownIt
from starlette.responses import Response

from dashboard import views
from dashboard.deps import OperatorDep, PagesDep, PlatformDep
from webplatform.registry.model import RunnableKind

router = APIRouter()
# `html` off: a skill's markdown cannot smuggle raw HTML (or script) into the page.
_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False})


@router.get("/registry")
def registry_page(
    request: Request, platform: PlatformDep, pages: PagesDep, _operator: OperatorDep, q: str = ""
) -> Response:
    """Every tool, agent and skill, narrowed by `q`; htmx gets only the results block."""
    registry = platform.registry()
    return pages.render(
        request,
        "registry.html",
        {"q": q, "hits": views.search(registry, q), "registry": registry},
        block="results",
    )


@router.get("/registry/{kind}/{name}")
def tool_page(
    request: Request,
    platform: PlatformDep,
    pages: PagesDep,
    _operator: OperatorDep,
    kind: str,
    name: str,
) -> Response:
    """One tool or agent: its actions, argument tables, output schemas and call shapes."""
    if kind not in ("tool", "agent"):
        raise HTTPException(404, f"no registry section {kind!r}: use tool or agent")
    runnable: RunnableKind = "agent" if kind == "agent" else "tool"
    spec = platform.registry().runnable(runnable, name)
    if spec is None:
        raise HTTPException(404, f"no {kind} named {name!r}; the registry page lists them all")
    return pages.render(
        request, "tool.html", {"kind": runnable, "tool": views.tool_view(runnable, spec)}
    )


@router.get("/skills")
def skills_page(
    request: Request, platform: PlatformDep, pages: PagesDep, _operator: OperatorDep
) -> Response:
    """Every skill with its description."""
    return pages.render(request, "skills.html", {"skills": platform.registry().skills})


@router.get("/skills/{name}")
def skill_page(
    request: Request, platform: PlatformDep, pages: PagesDep, _operator: OperatorDep, name: str
) -> Response:
    """One skill's markdown, rendered (raw HTML in it is shown as text, never run)."""
    skill = platform.registry().skills.get(name)
    if skill is None:
        raise HTTPException(404, f"no skill named {name!r}; the skills page lists them all")
    return pages.render(
        request, "skill.html", {"skill": skill, "body_html": _markdown.render(skill.body)}
    )
