"""How long starting a run from the web holds the request, and how many calls the run keeps in flight.

Setup: a real ``attune serve`` on a fresh data directory in the embedded default
(SQLite, no REDIS_URL: Celery tasks run in the web process), the 15 conversations
of sample_data/ imported, a model registered at the fake OpenAI-compatible server
(``--latency-ms`` per answer, default 200) with ``max_concurrency`` 8. Then one
``POST /api/runs/`` (what the launcher's "Start runs" does) and, from the
provider's side, the run's calls until the run is done.

- post_s         how long the POST took to return
- run_s          POST sent -> the run done and scored (polled every 0.1 s through the API)
- calls          requests the provider answered
- peak_in_flight most requests the provider was answering at once (the cap is 8)

``--repo PATH`` serves another code tree (e.g. an older commit unpacked with
``git archive``) to measure before and after with the same harness.
``--smoke``: three conversations and 20 ms latency; exits non-zero on any error.

Usage: python bench/launcher_start.py [--latency-ms 200] [--repo PATH] [--smoke]
The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from figures import figures_line  # noqa: E402

from devtools.fake_llm_server import FakeConfig, FakeLLMServer  # noqa: E402
from devtools.served_site import ServedSite  # noqa: E402

CAP = 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--repo", type=Path, default=ROOT, help="the code tree to serve (default: this one)")
    parser.add_argument("--smoke", action="store_true", help="3 conversations, 20 ms: seconds, end to end")
    options = parser.parse_args()
    latency = 20.0 if options.smoke else options.latency_ms
    with tempfile.TemporaryDirectory(prefix="attune-launcher-bench-") as scratch:
        with (
            FakeLLMServer(FakeConfig(latency_ms=latency)) as provider,
            ServedSite(Path(scratch) / "data", repo=options.repo) as site,
        ):
            token = site.researcher_token("bench")
            if options.smoke:
                site.import_synth(3)
            else:
                site.shell(
                    "from datasets.exchange import import_paths\n"
                    f"imported = import_paths([{str(ROOT / 'sample_data')!r}])\n"
                    "assert imported.ok, imported.problems\n"
                    "result = imported.imported"
                )
            site.register_model("openai/fake-em", provider.url, max_concurrency=CAP)
            api = httpx.Client(base_url=site.url, headers={"Authorization": f"Token {token}"}, timeout=600)
            sent = time.perf_counter()
            response = api.post("/api/runs/", json={"models": ["openai/fake-em"], "modes": ["default"]})
            post_s = time.perf_counter() - sent
            if response.status_code != 201:
                raise SystemExit(f"POST /api/runs/ answered {response.status_code}: {response.text[:500]}")
            run_id = response.json()["runs"][0]["id"]
            while (run := api.get(f"/api/runs/{run_id}/").json())["status"] not in ("done", "failed", "cancelled"):
                time.sleep(0.1)  # polling the server for the run's end
            run_s = time.perf_counter() - sent
            stats = provider.stats()
        if run["status"] != "done" or run["conversations_failed"] or stats["errors"]:
            raise SystemExit(f"the run did not finish cleanly: {run['status']}, {run['error']!r}, {stats['errors']}")
    figures = {
        "post_s": round(post_s, 2),
        "run_s": round(run_s, 2),
        "calls": stats["requests"],
        "peak_in_flight": stats["peak_in_flight"],
        "cap": CAP,
        "latency_ms": latency,
        "repo": str(options.repo),
    }
    print(f"POST /api/runs/ returned after {post_s:.2f} s; the run took {run_s:.2f} s for {stats['requests']} calls")
    print(f"most calls in flight at the provider: {stats['peak_in_flight']} (cap {CAP})")
    print(json.dumps(figures))
    print(
        figures_line(
            "launcher_start",
            post_s=post_s,
            run_s=run_s,
            calls=stats["requests"],
            peak_in_flight=stats["peak_in_flight"],
            cap=CAP,
            latency_ms=latency,
        )
    )


if __name__ == "__main__":
    main()
