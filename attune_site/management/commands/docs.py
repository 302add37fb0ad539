"""attune docs: the documentation site, built from ``docs/`` with MkDocs and served on this machine.

The site is static and works offline (no CDN, search included); ``--build-only`` writes it and exits, for
opening ``site/index.html`` from disk or publishing it elsewhere.
"""

from __future__ import annotations

import contextlib
import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from attune_site.datadir import BASE_DIR, installed


def build_site(out: Path, *, strict: bool = True) -> Path:
    """Build the docs into ``out``; a broken link or a missing page is an error when ``strict``."""
    config_file = BASE_DIR / "mkdocs.yml"
    if installed() or not config_file.exists():
        raise CommandError("the documentation is built from a checkout of Attune (docs/ and mkdocs.yml)")
    try:
        from mkdocs.commands.build import build
        from mkdocs.config import load_config
        from mkdocs.exceptions import MkDocsException
    except ImportError as exc:
        raise CommandError('MkDocs is not installed: pip install -e ".[docs]"') from exc
    try:
        build(load_config(str(config_file), site_dir=str(out), strict=strict))
    except MkDocsException as exc:
        raise CommandError(f"the documentation did not build: {exc}") from exc
    return out


class Command(BaseCommand):
    help = "Build the documentation site from docs/ (MkDocs, offline) and serve it on this machine."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--out", default=str(BASE_DIR / "site"), help="where to write the site (default site/)")
        parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8001, help="port to serve on (default 8001)")
        parser.add_argument("--build-only", action="store_true", help="write the site and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        out = build_site(Path(options["out"]).resolve())
        self.stdout.write(f"Built the documentation into {out} (open {out / 'index.html'} offline).")
        if options["build_only"]:
            return
        handler = functools.partial(SimpleHTTPRequestHandler, directory=str(out))
        with ThreadingHTTPServer((options["host"], options["port"]), handler) as server:
            self.stdout.write(f"Serving it at http://{options['host']}:{options['port']}/ (Ctrl-C to stop).")
            with contextlib.suppress(KeyboardInterrupt):
                server.serve_forever()
