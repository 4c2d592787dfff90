"""The registry browser: search as you type, each tool's schema and call shapes, skills."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from markdown_it import MarkdownIt
from starlette.responses import Response

from dashboard import views
from dashboard.deps import OperatorDep, PagesDep, PlatformDep, RunnableDep

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
    request: Request, pages: PagesDep, _operator: OperatorDep, runnable: RunnableDep
) -> Response:
    """One tool or agent: its actions, argument tables, output schemas and call shapes."""
    kind = runnable.kind
    return pages.render(
        request, "tool.html", {"kind": kind, "tool": views.tool_view(kind, runnable.spec)}
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
