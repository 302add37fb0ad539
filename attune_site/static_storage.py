"""Static files under content-hashed names, gzip-compressed, cached by browsers for a year and more.

``collectstatic`` (the Docker image's build, compose's ``static`` service, an upgrade: docs/upgrading.md)
writes each file under a name holding a hash of its content, with a compressed copy beside it, and a
manifest; WhiteNoise then serves the hashed names with a ten-year ``max-age`` (a changed file gets a new
name, so no browser keeps a stale one) and the compressed copy to browsers that accept it.

Where collectstatic never ran (the embedded demo, a checkout, the tests) there is no manifest: pages name
the files as they are and WhiteNoise serves them from the source folders with a short cache lifetime, as
before. A file added since the last collectstatic is named as it is too, instead of failing the page.
"""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage  # type: ignore[import-untyped]


class HashedCompressedStaticFiles(CompressedManifestStaticFilesStorage):
    manifest_strict = False

    def stored_name(self, name: str) -> str:
        if not self.hashed_files:  # no manifest: collectstatic has not run here
            return name
        try:
            return str(super().stored_name(name))
        except ValueError:  # not collected yet: served from the source folders under its own name
            return name
