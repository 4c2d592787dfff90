"""aat as a user gets it: a built wheel installed in a fresh venv, and an editable checkout.

Each is installed into a new venv of its own and serves its pages, templates and htmx from
there. To stay fast, the new venv borrows the dependencies from the dev venv's
site-packages with a `.pth` line; a folder added that way has its own `.pth` files ignored,
so the dev venv's editable aat (a `.pth` naming the checkout) does not come along, and aat
itself can only come from what was installed into the new venv.
"""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import httpx
import pytest
from serving import aat_env, aat_serve, free_port

pytestmark = pytest.mark.slow  # builds a wheel, starts aat serve from it

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel` builds from the checkout (once for this module)."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob("aat-*.whl")
    return wheel


def _venv(folder: Path) -> Path:
    """A new venv whose only aat is what gets installed into it; returns its site-packages."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120
    )
    (site,) = folder.glob("lib/python*/site-packages")
    (site / "_dev_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return site


def _clean_env(home: Path) -> dict[str, str]:
    env = aat_env(home)
    env.pop("PYTHONPATH", None)
    return env


def _install(venv: Path, *target: str, env: dict[str, str], cwd: Path) -> None:
    # The new venv's python runs the dev venv's pip (borrowed through the .pth), so pip
    # installs into the new venv; --ignore-installed keeps it off the dev venv's aat.
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps"]
        + ["--no-build-isolation", "--ignore-installed", *target],
        check=True,
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def _dashboard_file(venv: Path, env: dict[str, str], cwd: Path) -> Path:
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import dashboard; print(dashboard.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )
    return Path(out.stdout.strip()).resolve()


def _serve_and_fetch(venv: Path, env: dict[str, str], tmp: Path, root: str = "") -> None:
    """`aat serve [--root-path ROOT]` from the venv serves the login page and the htmx file
    and stylesheet it names (fetched as a proxy that strips ROOT would)."""
    port = free_port()
    with aat_serve(
        env={**env, "AAT_DASHBOARD_URL": f"http://127.0.0.1:{port}{root}"},
        port=port,
        log=tmp / f"serve-{venv.name}.log",
        command=(str(venv / "bin" / "aat"),),
        cwd=tmp,
        args=("--root-path", root) if root else (),
    ) as url:
        page = httpx.get(f"{url}/login", timeout=10)
        assert page.status_code == 200 and 'name="password"' in page.text
        script = re.search(r'<script src="([^"]*/static/htmx[^"]*\.js)"', page.text)
        css = re.search(r'<link rel="stylesheet" href="([^"]+)"', page.text)
        assert script and css, page.text[:800]
        for found in (script.group(1), css.group(1)):
            assert found.startswith(f"{root}/static/"), found
        served = httpx.get(f"{url}{script.group(1).removeprefix(root)}", timeout=10)
        assert served.status_code == 200 and "htmx" in served.text[:2000]
        assert served.headers["content-type"].startswith(("text/javascript", "application/"))
        assert httpx.get(f"{url}{css.group(1).removeprefix(root)}", timeout=10).status_code == 200


def test_wheel_ships_templates_static_examples_migrations_and_the_script(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "dashboard/templates/base.html",
        "dashboard/templates/_decision_forms.html",
        "dashboard/static/htmx.min.js",
        "dashboard/static/app.js",
        "dashboard/static/VENDORED.md",
        "dashboard/urls.py",
        "webplatform/examples/tools/xlsx/tool.yaml",
        "webplatform/examples/tools/outbox/main.py",
        "webplatform/examples/skills/approvals/SKILL.md",
        "webplatform/store/migrations/env.py",
    ):
        assert required in names, f"{required} missing from {wheel.name}"
    # One copy each: nothing at the top level that would collide in site-packages.
    assert not any(n.startswith(("templates/", "static/", "tests/")) for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "aat = webplatform.cli:main" in text


def test_an_installed_wheel_serves_its_pages_and_htmx(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "wheel-venv"
    site = _venv(venv)
    env = _clean_env(tmp_path / "home")
    _install(venv, str(wheel), env=env, cwd=tmp_path)
    where = _dashboard_file(venv, env, tmp_path)
    assert where.is_relative_to(site.resolve()), f"dashboard imported from {where}"
    assert (site / "dashboard" / "templates" / "base.html").is_file()
    _serve_and_fetch(venv, env, tmp_path)
    _serve_and_fetch(venv, env, tmp_path, root="/aat")


def test_an_editable_install_serves_the_checkouts_files(tmp_path: Path) -> None:
    venv = tmp_path / "editable-venv"
    site = _venv(venv)
    env = _clean_env(tmp_path / "home")
    _install(venv, "-e", str(ROOT), env=env, cwd=tmp_path)
    where = _dashboard_file(venv, env, tmp_path)
    assert where == ROOT / "dashboard" / "__init__.py", f"dashboard imported from {where}"
    # No copy of the templates or static files in site-packages to go stale and shadow them.
    copies = [p for p in venv.rglob("*") if p.name in ("base.html", "htmx.min.js", "app.css")]
    assert copies == [], copies
    assert not (site / "dashboard").exists()
    _serve_and_fetch(venv, env, tmp_path)
