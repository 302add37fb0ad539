"""How long a published dataset takes to write and to verify, and how big it is, for N conversations.

Writes the published folder of N synthetic conversations with one synthetic run each (tables, card,
Croissant, checksums), writes a results site beside it, then runs the whole of ``attune verify`` (checksums,
content hash, tables rebuilt from the records, re-scoring). Prints figures; asserts nothing but that the fresh
pair verifies (a test checks what is written, not how fast).

    PYTHONPATH=. python bench/publish_speed.py [--conversations N] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from figures import figures_line

from attunebench import publication as pub
from attunebench import results_site as site
from attunebench.metrics.engine import score_runs
from attunebench.metrics.results import to_json
from attunebench.synth import synth_conversations, synth_run


def main() -> None:
    parser = argparse.ArgumentParser(description="published dataset: write and verify time, folder size")
    parser.add_argument("--conversations", type=int, default=500)
    parser.add_argument("--smoke", action="store_true", help="10 conversations: the path, not the timing")
    args = parser.parse_args()
    count = 10 if args.smoke else args.conversations
    documents = synth_conversations(count, seed=5)
    runs = [synth_run(d, "synth:bench", "default", 3, skill=0.6) for d in documents]
    records = [to_json(r) for r in score_runs(documents, runs).report().conversations]
    digest = pub.content_hash(documents)
    info = pub.Publication(
        name="bench",
        content_hash=digest,
        frozen_content_hash=digest,
        description="",
        created_at="2026-01-01T00:00:00+00:00",
        code_version="bench",
        consent_versions=[],
        recruitment="synthetic conversations",
        quality_exclusions={},
        left_out={},
        participants=count,
        diagnoses_published_for=0,
        model_identity=False,
    )
    with tempfile.TemporaryDirectory() as scratch:
        dataset, results = Path(scratch) / "dataset", Path(scratch) / "results"
        started = time.perf_counter()
        pub.write_publication(dataset, pub.build_tables(documents, runs, records), info)
        write_s = time.perf_counter() - started
        manifest = json.loads((dataset / pub.PUBLICATION_FILE).read_text(encoding="utf-8"))
        site.write_site(results, [], site.rescore_publication(dataset), manifest, render=lambda name, context: name)
        started = time.perf_counter()
        verified = site.verify(dataset, results)
        verify_s = time.perf_counter() - started
        size_mb = sum(p.stat().st_size for p in dataset.rglob("*") if p.is_file()) / 1e6
    if not verified.ok:
        sys.exit("a fresh pair did not verify:\n" + "\n".join(verified.differences[:20]))
    turns = sum(len(d.turns) for d in documents)
    print(f"{count} conversations ({turns} turns): write {write_s:.2f} s, verify {verify_s:.2f} s, {size_mb:.1f} MB")
    print(
        figures_line(
            "publish_speed", conversations=count, turns=turns, write_s=write_s, verify_s=verify_s, folder_mb=size_mb
        )
    )


if __name__ == "__main__":
    main()
