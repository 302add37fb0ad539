"""The response that streams a finished export from the store to the researcher who asked for it."""

from __future__ import annotations

from django.http import FileResponse

from datasets.versions import ExportDownload


def export_file_response(download: ExportDownload) -> FileResponse:
    """Streams the stored file in blocks (no public URL of the store is ever handed out), as an attachment."""
    response = FileResponse(
        download.stream, as_attachment=True, filename=download.file_name, content_type="application/zip"
    )
    if download.size is not None:
        response["Content-Length"] = str(download.size)
    return response
