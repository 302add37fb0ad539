"""Where Attune keeps the files it makes for later (dataset exports): one store, named in ``STORAGES``.

Without ``ATTUNE_STORAGE_URL`` the store is a folder of the data directory, as
it always was. ``ATTUNE_STORAGE_URL=s3://BUCKET[/PREFIX]`` puts it in an
S3-compatible bucket that every host reaches (django-storages over boto3), so a
file one worker wrote downloads through any web process and a withdrawal
deletes it from any host. Credentials and the endpoint come from the variables
boto3 reads itself (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION``), never from Attune's settings.

Read by settings only: nothing here touches the network or the disk (blank ``AWS_*`` variables are
unset in the environment of the process, so boto3 sees them as absent).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

#: The ``STORAGES`` alias of the export files (datasets/store.py opens it).
EXPORTS = "exports"
# S3's own rule for bucket names: 3-63 lower-case letters, digits, dots and hyphens, a letter or digit at each end.
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


#: boto3's own variables that compose passes through, blank when unused.
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION")


def forget_blank_aws_variables() -> None:
    """Unset boto3's variables that are blank: to Attune blank means "the default", but boto3 would take an
    empty endpoint or region literally (``https://s3..amazonaws.com``)."""
    for name in AWS_VARIABLES:
        if name in os.environ and not os.environ[name].strip():
            del os.environ[name]


def s3_location(url: str) -> tuple[str, str]:
    """The bucket and key prefix of ``s3://BUCKET[/PREFIX]``; ImproperlyConfigured names what is wrong."""
    parts = urlsplit(url)
    shown = f"ATTUNE_STORAGE_URL={url!r}"
    if parts.scheme != "s3":
        raise ImproperlyConfigured(f"{shown} is not valid: expected s3://BUCKET or s3://BUCKET/PREFIX")
    if parts.query or parts.fragment or parts.username or parts.password or parts.port:
        raise ImproperlyConfigured(
            f"{shown} is not valid: only s3://BUCKET[/PREFIX]; credentials and the endpoint go in "
            "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_ENDPOINT_URL"
        )
    bucket = parts.hostname or ""
    if not BUCKET_NAME.match(bucket):
        raise ImproperlyConfigured(
            f"{shown} is not valid: the bucket name {bucket!r} must be 3-63 lower-case letters, digits, dots or hyphens"
        )
    prefix = parts.path.strip("/")
    if prefix and any(part in {"", ".", ".."} for part in prefix.split("/")):
        raise ImproperlyConfigured(f"{shown} is not valid: the prefix {prefix!r} has an empty, '.' or '..' part")
    return bucket, prefix


def export_storage(storage_url: str, export_dir: Path) -> dict[str, Any]:
    """The ``STORAGES`` entry of the export files: the bucket's ``exports/`` folder, else ``export_dir``."""
    if not storage_url:
        return {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            # Owner-only whatever the process umask: an export holds participants' conversations.
            "OPTIONS": {
                "location": str(export_dir),
                "base_url": None,
                "file_permissions_mode": 0o600,
                "directory_permissions_mode": 0o700,
            },
        }
    bucket, prefix = s3_location(storage_url)
    return {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": bucket,
            "location": f"{prefix}/exports" if prefix else "exports",
            # Private objects only: downloads stream through an authorised web request, never a public URL.
            "default_acl": None,
            "querystring_auth": True,
            "file_overwrite": False,
        },
    }
