"""``pip install .`` (not editable) gives a working ``attune serve`` and ``attune demo``.

Builds the wheel from this checkout, installs it alone into a fresh virtual
environment and runs the installed ``attune`` from a folder outside the
repository, so nothing can be read from the checkout: templates, static files
and the sample conversations must come from the package itself.

The new environment reuses this one's installed dependencies through a path
file (only the wheel is installed, with ``--no-deps``). A path listed in a
``.pth`` file has its own ``.pth`` files ignored, so this environment's editable
install of Attune stays switched off there, and the wheel's copy is the one imported.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: int = 300) -> str:
    result = subprocess.run(
        [str(arg) for arg in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """A fresh environment with the wheel installed: its bin folder, and a working folder outside the repo."""
    root = tmp_path_factory.mktemp("installed")
    wheels = root / "wheels"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", wheels, REPO, cwd=root)
    (wheel,) = wheels.glob("attune-*.whl")
    venv = root / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=root)
    python = venv / "bin" / "python"
    purelib = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=root).strip())
    (purelib / "shared_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--quiet", wheel, cwd=root)
    work = root / "elsewhere"
    work.mkdir()
    return venv / "bin", work


def installed_env(work: Path) -> dict[str, str]:
    """The embedded default: no database or broker configured, a data dir of its own, no checkout on the path."""
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "REDIS_URL", "PYTHONPATH"}}
    env["ATTUNE_DATA_DIR"] = str(work / "data")
    return env


def test_the_installed_package_imports_from_its_own_folder_and_carries_its_files(installed):
    bin_dir, work = installed
    code = (
        "import attune_site, django.conf as c; import django; django.setup();"
        "print(attune_site.__file__); print(c.settings.TEMPLATES[0]['DIRS'][0]);"
        "print(c.settings.STATICFILES_DIRS[0]); print(c.settings.ATTUNE_SAMPLE_DATA_DIR)"
    )
    env = {**installed_env(work), "DJANGO_SETTINGS_MODULE": "attune_site.settings"}
    module, templates, static, sample = run(bin_dir / "python", "-c", code, cwd=work, env=env).split()
    package = Path(module).parent
    assert str(REPO) not in module and package.parent.name == "site-packages"
    assert Path(templates) == package / "bundled" / "templates"
    assert (Path(templates) / "landing.html").is_file()
    assert (Path(static) / "participant" / "participant.css").is_file()
    assert len(list(Path(sample).glob("conv-*.json"))) == 15


def test_installed_attune_runs_the_demo_and_serves_pages_and_static_files(installed):
    bin_dir, work = installed
    env = installed_env(work)
    output = run(bin_dir / "attune", "demo", "--no-serve", "--modes", "default", cwd=work, env=env)
    assert "Attune demo is ready." in output
    assert str(REPO / "sample_data") not in output

    port = free_port()
    server = subprocess.Popen(
        [bin_dir / "attune", "serve", "--port", str(port)],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stderr.read() if server.stderr else "server exited"
            try:
                landing = httpx.get(base + "/", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the installed server never answered"
                time.sleep(0.1)  # polling a process we started, not waiting for an outcome
        assert landing.status_code == 200
        assert "Attune" in landing.text and "<html" in landing.text.lower()
        css = httpx.get(base + "/static/participant/participant.css", timeout=5)
        assert css.status_code == 200 and css.text == (REPO / "static" / "participant" / "participant.css").read_text()
        login = httpx.get(base + "/research/login/", timeout=5)
        assert login.status_code == 200 and 'name="password"' in login.text
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert (work / "data" / "attune.sqlite3").is_file()
