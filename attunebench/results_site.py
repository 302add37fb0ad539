"""A static results site of frozen snapshots, and the check that a published dataset and site agree.

The site is plain files (HTML, one stylesheet, JSON and CSV), with no script, server or outside
resource, so it works opened from ``file://`` and from any static host. Every page carries the
research-only statement. ``data/`` holds each snapshot's document (manifest, leaderboard, table,
analyses) and CSV; when the site is written beside a published dataset it also holds
``data/scores.json``: the report ``attune score`` gives on the dataset's runs and conversations,
which ``verify`` recomputes and compares bit for bit. ``SHA256SUMS`` covers every other file.

HTML comes from a ``render(template, context)`` the platform passes in (its templates), so this
module stays free of any web framework; the contexts are built here.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attunebench import canonical as cf
from attunebench import catalogue as cat
from attunebench import publication as pub
from attunebench.metrics.engine import score_runs
from attunebench.metrics.report import aggregates_csv, load_inputs, score_inputs
from attunebench.metrics.results import ScoringReport, to_json
from attunebench.spreadsheet import csv_row

SITE_FORMAT = "attunebench.results-site/1"
SITE_FILE = "site.json"
STYLESHEET = "style.css"
SCORES_FILE = "data/scores.json"
VERIFY_COMMAND = "attune verify DATASET_DIR RESULTS_DIR"

Render = Callable[[str, dict[str, Any]], str]


def snapshot_digest(manifest: Any, leaderboard: Any, table: Any, analysis: Any) -> str:
    """A snapshot's content hash: sha256 of the compact, key-sorted JSON of its four parts."""
    text = json.dumps(
        [manifest, leaderboard, table, analysis], sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _json_text(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def rescore(conversations: Sequence[cf.ConversationFile], runs: Sequence[cf.RunOutput]) -> dict[str, Any]:
    """The scoring report (as ``attune score --json`` writes it) of runs against conversations."""
    return to_json(score_runs(conversations, runs).report())


def rescore_publication(dataset_dir: str | Path) -> dict[str, Any]:
    """The scoring report of a published dataset folder's runs against its conversations."""
    loaded = load_inputs([dataset_dir], [dataset_dir])
    if loaded.problems:
        raise ValueError("; ".join(str(p) for p in loaded.problems[:5]))
    return to_json(score_inputs(loaded).report())


def snapshot_csv(table: list[list[Any]]) -> str:
    """A snapshot's leaderboard table as CSV (every column), escaped for spreadsheets."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for row in table:
        writer.writerow(csv_row(row, float_format=".6g"))
    return buffer.getvalue()


def _snapshot_context(document: dict[str, Any]) -> dict[str, Any]:
    """What a snapshot page shows: capability profile, leaderboard with skill and CIs, matrix, breakdowns."""
    analysis = document.get("analysis") or {}
    bootstrap = analysis.get("bootstrap") or {}
    matrix = bootstrap.get("outrank_probability") or {}
    labels = list(matrix)
    breakdowns = analysis.get("breakdowns") or {}
    return {
        "snapshot": document,
        "manifest": document.get("manifest") or {},
        "rows": (document.get("leaderboard") or {}).get("rows", []),
        "apart": (document.get("leaderboard") or {}).get("apart", []),
        "profile": analysis.get("capability_profile", []),
        "matrix_labels": labels,
        "matrix": [(row, [matrix[row].get(col) for col in labels]) for row in labels],
        "by_category": (breakdowns.get("by_category") or {}).get("overall", []),
        "by_original_model": (breakdowns.get("by_original_model") or {}).get("overall", []),
        "json_file": f"data/snapshot-{document['id']}.json",
        "csv_file": f"data/snapshot-{document['id']}.csv",
    }


def write_site(
    out: str | Path,
    snapshots: Sequence[dict[str, Any]],
    scores: dict[str, Any] | None,
    dataset: dict[str, Any] | None,
    render: Render,
) -> dict[str, str]:
    """Write the site into the empty folder ``out``; returns the checksums of its files."""
    root = Path(out)
    (root / "data").mkdir(parents=True, exist_ok=True)
    common = {
        "research_only_statement": cat.RESEARCH_ONLY_STATEMENT,
        "verify_command": VERIFY_COMMAND,
        "dataset": dataset,
        "stylesheet": STYLESHEET,
    }
    files: dict[str, str] = {}
    listed = []
    for document in snapshots:
        context = _snapshot_context(document)
        files[context["json_file"]] = _json_text(document)
        files[context["csv_file"]] = snapshot_csv(document.get("table") or [])
        page = f"snapshot-{document['id']}.html"
        files[page] = render("snapshot.html", {**common, **context})
        listed.append({"id": document["id"], "name": document["name"], "page": page, **context})
    leaderboard = []
    if scores is not None:
        files[SCORES_FILE] = _json_text(scores)
        files["data/leaderboard.csv"] = aggregates_csv(ScoringReport.model_validate(scores))
        leaderboard = scores.get("aggregates", [])
    files["index.html"] = render("index.html", {**common, "snapshots": listed, "leaderboard": leaderboard})
    files[STYLESHEET] = render("style.css", {})
    files[SITE_FILE] = _json_text(
        {
            "format": SITE_FORMAT,
            "snapshots": [{"id": s["id"], "name": s["name"], "content_sha256": s["content_sha256"]} for s in snapshots],
            "dataset": {"dataset_version": dataset["dataset_version"], "content_hash": dataset["content_hash"]}
            if dataset
            else None,
            "scores": SCORES_FILE if scores is not None else None,
            "research_only_statement": cat.RESEARCH_ONLY_STATEMENT,
        }
    )
    sums = {}
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
        sums[name] = pub.file_sha256(root / name)
    (root / pub.CHECKSUMS_FILE).write_text(
        "".join(f"{digest}  {name}\n" for name, digest in sorted(sums.items())), encoding="utf-8"
    )
    return sums


# ---------------------------------------------------------------------------
# Verification
# ---------------------------------------------------------------------------


@dataclass
class Verification:
    """What ``attune verify`` checked, and every difference found (none: the publication holds)."""

    checked: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences


def _check_sums(folder: Path, result: Verification) -> None:
    sums_file = folder / pub.CHECKSUMS_FILE
    if not sums_file.is_file():
        result.differences.append(f"{sums_file}: missing, so no file of {folder} can be checked")
        return
    listed: dict[str, str] = {}
    for number, line in enumerate(sums_file.read_text(encoding="utf-8").splitlines(), start=1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            result.differences.append(f"{sums_file} line {number}: not '<sha256>  <file>': {line!r}")
            continue
        listed[name] = digest
    for name, digest in sorted(listed.items()):
        path = folder / name
        if ".." in Path(name).parts or Path(name).is_absolute():
            result.differences.append(f"{sums_file}: refuses the path {name!r} outside the folder")
        elif not path.is_file():
            result.differences.append(f"{path}: listed in {pub.CHECKSUMS_FILE} but missing")
        elif (actual := pub.file_sha256(path)) != digest:
            result.differences.append(f"{path}: sha256 {actual}, {pub.CHECKSUMS_FILE} says {digest}")
    unlisted = sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and p.name != pub.CHECKSUMS_FILE and str(p.relative_to(folder)) not in listed
    )
    for name in unlisted:
        result.differences.append(f"{folder / name}: not listed in {pub.CHECKSUMS_FILE}")
    result.checked.append(f"{len(listed)} file checksum(s) in {folder}")


def _first_difference(published: Any, recomputed: Any, where: str) -> list[str]:
    """Every leaf where two JSON values differ, named by its path (bit for bit: 0.1 != 0.10000000000000002)."""
    if isinstance(published, dict) and isinstance(recomputed, dict):
        out = []
        for key in sorted(set(published) | set(recomputed), key=str):
            if key not in published:
                out.append(f"{where}.{key}: missing from the published file (recomputed {recomputed[key]!r})")
            elif key not in recomputed:
                out.append(f"{where}.{key}: published {published[key]!r}, not in the recomputed report")
            else:
                out += _first_difference(published[key], recomputed[key], f"{where}.{key}")
        return out
    if isinstance(published, list) and isinstance(recomputed, list):
        if len(published) != len(recomputed):
            return [f"{where}: {len(published)} published item(s), {len(recomputed)} recomputed"]
        out = []
        for i, (a, b) in enumerate(zip(published, recomputed, strict=True)):
            out += _first_difference(a, b, f"{where}[{i}]")
        return out
    if published != recomputed or type(published) is not type(recomputed):
        return [f"{where}: published {published!r}, recomputed {recomputed!r}"]
    return []


def verify(dataset_dir: str | Path, results_dir: str | Path) -> Verification:
    """Check a published dataset and results site: checksums, content hash, tables, re-scored scores, snapshots."""
    data, site = Path(dataset_dir), Path(results_dir)
    result = Verification()
    if not pub.is_publication(data):
        result.differences.append(f"{data}: not a published dataset folder (no {pub.PUBLICATION_FILE} of this format)")
        return result
    _check_sums(data, result)
    _check_sums(site, result)
    manifest = _read_json(data / pub.PUBLICATION_FILE, result) or {}
    conversations: list[cf.ConversationFile] = []
    texts: list[tuple[str, str]] = []  # (conversationId, canonical text) of every readable record
    for source, text in pub.read_texts(data, "conversations", "record_json"):
        try:
            document = cf.load_conversation(text.encode("utf-8"), source)
        except cf.CanonicalError as exc:
            result.differences += [str(p) for p in exc.problems]
            continue
        conversations.append(document)
        texts.append((document.conversationId, text))
    runs: list[cf.RunOutput] = []
    for source, text in pub.read_texts(data, "runs", "output_json"):
        try:
            runs.append(cf.load_run(text.encode("utf-8"), source))
        except cf.CanonicalError as exc:
            result.differences += [str(p) for p in exc.problems]
    digest = hashlib.sha256()
    for _, text in sorted(texts):
        digest.update(text.encode("utf-8"))
    if digest.hexdigest() != manifest.get("content_hash"):
        result.differences.append(
            f"{data / pub.PUBLICATION_FILE}: content_hash {manifest.get('content_hash')}, but the published "
            f"conversations hash to {digest.hexdigest()}"
        )
    result.checked.append(f"content hash {manifest.get('content_hash')} over {len(conversations)} conversation(s)")
    _check_tables(data, conversations, runs, result)
    report = rescore(conversations, runs) if runs else None
    if report is not None:
        published_records = [_loads(t, source, result) for source, t in pub.read_texts(data, "scores", "record_json")]
        recomputed = sorted(report["conversations"], key=lambda r: (r["conversationId"], r["em_model"], r["mode"]))
        result.differences += _first_difference(published_records, recomputed, f"{data / pub.data_path('scores')}")
        result.checked.append(f"{len(recomputed)} score record(s) re-scored from {len(runs)} run output(s)")
    _check_site(site, manifest, report, result)
    return result


def _check_tables(
    data: Path, conversations: list[cf.ConversationFile], runs: list[cf.RunOutput], result: Verification
) -> None:
    """Every typed column holds what the canonical records say (a table edited by hand shows here)."""
    import pyarrow.parquet as pq

    rebuilt = pub.build_tables(conversations, runs if (data / pub.data_path("runs")).is_file() else None)
    for name, table in rebuilt.items():
        path = data / pub.data_path(name)
        if not path.is_file():
            result.differences.append(f"{path}: missing")
            continue
        published = pq.read_table(path)
        if published.schema != table.schema:
            result.differences.append(f"{path}: schema differs from the documented one")
        elif not published.equals(table):
            rows_a, rows_b = published.to_pylist(), table.to_pylist()
            for i, (a, b) in enumerate(zip(rows_a, rows_b, strict=False)):
                for key in a:
                    if a[key] != b.get(key):
                        result.differences.append(
                            f"{path} row {i} column {key}: published {a[key]!r}, the records say {b.get(key)!r}"
                        )
            if len(rows_a) != len(rows_b):
                result.differences.append(f"{path}: {len(rows_a)} row(s), the records give {len(rows_b)}")
    result.checked.append(f"{len(rebuilt)} table(s) rebuilt from the canonical records")


def _loads(text: str, source: str, result: Verification) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        result.differences.append(f"{source}: not JSON ({exc})")
        return None


def _read_json(path: Path, result: Verification) -> Any:
    """A published JSON file, or None with the difference recorded (a tampered file is reported, not raised)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        result.differences.append(f"{path}: not readable JSON ({exc})")
        return None
    if not isinstance(data, dict):
        result.differences.append(f"{path}: not a JSON object")
        return None
    return data


def _check_site(site: Path, manifest: dict[str, Any], report: dict[str, Any] | None, result: Verification) -> None:
    info_path = site / SITE_FILE
    if not info_path.is_file():
        result.differences.append(f"{info_path}: missing: {site} is not a results site")
        return
    info = _read_json(info_path, result)
    if info is None:
        return
    dataset = info.get("dataset") or {}
    if dataset.get("content_hash") != manifest.get("content_hash"):
        result.differences.append(
            f"{info_path}: the site names dataset content hash {dataset.get('content_hash')}, the dataset has "
            f"{manifest.get('content_hash')}"
        )
    for entry in info.get("snapshots") or []:
        path = site / "data" / f"snapshot-{entry.get('id') if isinstance(entry, dict) else entry}.json"
        if not path.is_file():
            result.differences.append(f"{path}: missing")
            continue
        document = _read_json(path, result)
        if document is None:
            continue
        parts = [document.get(k) for k in ("manifest", "leaderboard", "table", "analysis")]
        digest = snapshot_digest(*parts)
        listed = entry.get("content_sha256") if isinstance(entry, dict) else None
        if digest != document.get("content_sha256") or digest != listed:
            result.differences.append(
                f"{path}: its parts hash to {digest}, the snapshot says {document.get('content_sha256')}"
            )
        result.checked.append(f"snapshot {document.get('id')} content hash {digest}")
    scores_path = site / SCORES_FILE
    if report is not None:
        if not scores_path.is_file():
            result.differences.append(f"{scores_path}: missing, so the site's leaderboard cannot be checked")
            return
        published = _read_json(scores_path, result)
        if published is not None:
            result.differences += _first_difference(published, report, str(scores_path))
        result.checked.append(f"leaderboard of {len(report['aggregates'])} row(s) in {scores_path} re-scored")
