"""Static files under content-hashed names, gzip-compressed, cached by browsers for a year and more.

``collectstatic`` (the Docker image's build, compose's ``static`` service, an upgrade: docs/upgrading.md)
writes each file under a name holding a hash of its content, with a compressed copy beside it, and a
manifest; WhiteNoise then serves the hashed names with a ten-year ``max-age`` (a changed file gets a new
name, so no browser keeps a stale one) and the compressed copy to browsers that accept it.

Where collectstatic never ran (the embedded demo, a checkout, the tests) there is no manifest: pages name
the files as they are and WhiteNoise serves them from the source folders with a short cache lifetime, as
before. A file added since the last collectstatic is named as it is too, instead of failing the page.

Each page names a handful of files (``{% static %}``), and working out a file's address (the manifest
lookup, joining and quoting the URL) took about a twentieth of a participant page's CPU. The manifest does
not change while the process runs (a new ``collectstatic`` takes a restart, and Django builds a new storage
when the static settings change), so each address is worked out once per storage and name.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from whitenoise.storage import CompressedManifestStaticFilesStorage  # type: ignore[import-untyped]


class HashedCompressedStaticFiles(CompressedManifestStaticFilesStorage):
    manifest_strict = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._urls: dict[tuple[str | None, bool], str] = {}

    def url(self, name: str | None, force: bool = False) -> str:
        if force:
            return str(super().url(name, force))
        key = (name, settings.DEBUG)  # DEBUG names the unhashed file (Django's rule), read at each call
        found = self._urls.get(key)
        if found is None:
            found = self._urls[key] = str(super().url(name))
        return found

    def stored_name(self, name: str) -> str:
        if not self.hashed_files:  # no manifest: collectstatic has not run here
            return name
        try:
            return str(super().stored_name(name))
        except ValueError:  # not collected yet: served from the source folders under its own name
            return name
