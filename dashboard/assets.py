"""Where the dashboard's templates and static files are, from a checkout or an installed wheel.

The repository keeps one copy of each at its top level (`templates/`, `static/`). The wheel
carries them inside the `dashboard` package (`force-include` in pyproject.toml), because a
top-level `templates` folder in site-packages would collide with every other project's.
An editable install imports `dashboard` from the checkout, so the folders beside the package
are found first there; an installed wheel finds them inside it.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def asset_dir(name: str) -> Path:
    """The folder `name` ("templates" or "static"): inside the package, else beside it."""
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise RuntimeError(
        f"aat's dashboard {name}/ folder is missing (looked in {_PACKAGE} and its parent): "
        "reinstall aat"
    )


TEMPLATES_DIR = asset_dir("templates")
STATIC_DIR = asset_dir("static")
