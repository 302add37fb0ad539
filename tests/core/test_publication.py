"""The published dataset folder and results site written by the core, and attune verify's checks on them.

No database: the documents are the sample conversations and synthetic runs, the site is rendered by a
stand-in template function. Each tampering below is one a reader could meet; verify names it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from attunebench import publication as pub
from attunebench import results_site as site
from attunebench.metrics.engine import score_runs
from attunebench.metrics.results import to_json
from attunebench.sources import read_conversations, read_runs
from attunebench.synth import synth_run

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


def _info(docs) -> pub.Publication:
    digest = pub.content_hash(docs)
    return pub.Publication(
        name="core-v1",
        content_hash=digest,
        frozen_content_hash=digest,
        description="",
        created_at="2026-01-01T00:00:00+00:00",
        code_version="test",
        consent_versions=["v1"],
        recruitment="15 imported from canonical conversation files.",
        quality_exclusions={},
        left_out={},
        participants=15,
        diagnoses_published_for=0,
        model_identity=False,
        withdrawal_statement="Withdrawn participants are left out.",
        pseudonym_statement="Participant ids are pseudonyms.",
    )


@pytest.fixture
def pair(tmp_path):
    docs = [d for _, d in read_conversations([SAMPLE])[0]]
    runs = [synth_run(d, "synth:a", "default", 3, skill=0.6) for d in docs]
    records = [to_json(r) for r in score_runs(docs, runs).report().conversations]
    dataset, results = tmp_path / "dataset", tmp_path / "results"
    pub.write_publication(dataset, pub.build_tables(docs, runs, records), _info(docs))
    manifest = json.loads((dataset / pub.PUBLICATION_FILE).read_text())
    site.write_site(results, [], site.rescore_publication(dataset), manifest, render=lambda name, context: name)
    return dataset, results


def _resum(folder: Path, name: str) -> None:
    """Update one file's line in SHA256SUMS, as someone hiding an edit would."""
    sums = folder / pub.CHECKSUMS_FILE
    lines = [
        f"{pub.file_sha256(folder / name)}  {name}" if line.endswith(f"  {name}") else line
        for line in sums.read_text().splitlines()
    ]
    sums.write_text("\n".join(lines) + "\n")


def test_a_fresh_pair_verifies(pair):
    result = site.verify(*pair)
    assert result.ok, result.differences
    assert any("15 score record(s) re-scored from 15 run output(s)" in c for c in result.checked)


def test_the_published_folder_reads_back_as_the_documents_it_was_written_from(pair):
    dataset, _ = pair
    conversations, problems = read_conversations([dataset])
    runs, run_problems = read_runs([dataset])
    assert problems == run_problems == []
    assert len(conversations) == len(runs) == 15
    assert (
        pub.content_hash([d for _, d in conversations])
        == json.loads((dataset / "publication.json").read_text())["content_hash"]
    )


def test_an_edited_table_cell_is_named_even_with_its_checksum_updated(pair):
    dataset, results = pair
    path = dataset / pub.data_path("turns")
    table = pq.read_table(path)
    messages = table.column("user_message").to_pylist()
    messages[2] = "something else"
    pq.write_table(table.set_column(3, "user_message", [messages]), path)
    _resum(dataset, pub.data_path("turns"))
    result = site.verify(dataset, results)
    assert [d for d in result.differences if "row 2 column user_message" in d]
    assert not [d for d in result.differences if "sha256" in d]


def test_a_missing_file_an_unlisted_file_and_broken_json_are_reported_not_raised(pair):
    dataset, results = pair
    (dataset / "LICENSE.md").unlink()
    (dataset / "extra.txt").write_text("x")
    (results / "site.json").write_text("{not json")
    differences = "\n".join(site.verify(dataset, results).differences)
    assert "LICENSE.md: listed in SHA256SUMS but missing" in differences
    assert "extra.txt: not listed in SHA256SUMS" in differences
    assert "site.json: not readable JSON" in differences


def test_a_folder_that_is_not_a_publication_says_so(tmp_path):
    result = site.verify(tmp_path, tmp_path)
    assert not result.ok and "not a published dataset folder" in result.differences[0]


def test_the_card_header_is_the_hubs_yaml(pair):
    dataset, _ = pair
    card = (dataset / "README.md").read_text()
    header = card.split("---\n")[1]
    assert 'license: "other"' in header and 'license_link: "LICENSE.md"' in header
    assert '  - config_name: "conversations"' in header and "    default: true" in header
    assert '        path: "data/turns.parquet"' in header
