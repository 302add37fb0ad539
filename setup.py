"""Ship the top-level ``templates/``, ``static/`` and ``sample_data/`` inside the installed package.

The repository keeps these folders at the top level, where people look for
them; an installed package has no top level, so the build copies them into
``attune_site/bundled/`` of the wheel. ``attune_site.datadir.resource_dir``
finds them in either place. Everything else about the package is declared in
pyproject.toml; an editable install reads the folders where they are.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SHIPPED = ("templates", "static", "sample_data")


class BuildWithResources(build_py):
    """The standard build, plus the shipped folders copied under ``attune_site/bundled``."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        for name in SHIPPED:
            source = ROOT / name
            if not source.is_dir():
                raise FileNotFoundError(f"{source}: folder to ship in the package is missing (see MANIFEST.in)")
            target = Path(self.build_lib) / "attune_site" / "bundled" / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithResources})
