"""First-request latency of a participant's first live reply after start-up: nothing is imported lazily on it.

Each measurement runs in a fresh Python process (so nothing is imported yet),
as a restarted server would be: a temporary SQLite site, the demo defaults, a
live original model pointing at a local fake OpenAI-compatible server
(streaming, no network), and one participant whose first message is saved.
The process then asks for the model's reply through Django's full request
stack and times it:

- ``lazy``  the request pays for whatever is still unimported (litellm, views, templates);
- ``warm``  ``attune_site.warmup.warm_up()`` runs first, as ``attune serve`` and the WSGI module do,
            and its own time is reported separately (paid once at start-up).

A second reply in the same process is timed too, for reference.

Usage: python bench/first_request.py [--repeat 3]
The last line is machine-readable (medians in seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import figures_line

ROOT = Path(__file__).resolve().parent.parent


def child(mode: str) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "attune_site.settings"
    os.environ["ATTUNE_ALLOW_LIVE_MODELS"] = "1"
    os.environ["OPENAI_API_KEY"] = "sk-bench-not-a-real-key"
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    import django

    from attune_site.datadir import prepare_data_dir

    prepare_data_dir()
    django.setup()
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    from attunebench import catalogue as cat
    from collection import study_flow as flow
    from collection.models import OriginalModel, Topic
    from collection.setup import ensure_defaults
    from tests.web.conftest import FakeOpenAIServer

    server = FakeOpenAIServer()
    study = ensure_defaults().study
    OriginalModel.objects.update(active=False)
    OriginalModel.objects.create(
        name="bench-model", provider="bench", litellm_model="openai/bench-model", api_base=server.api_base
    )
    participant = flow.do_enrol(study)
    flow.do_record_consent(participant, False)
    flow.do_save_profile(participant, "25-34", [], [], None)
    flow.do_save_pre_panas(participant, dict.fromkeys(cat.PANAS_ITEMS, 3))
    conversation = flow.do_start_conversation(
        participant, Topic.objects.get(subtopic="Exam pressure"), cat.TOPIC_ATTITUDE_OPTIONS[0]
    )
    warm = 0.0
    if mode == "warm":
        from attune_site.warmup import warm_up

        start = time.perf_counter()
        warm_up()
        warm = time.perf_counter() - start
    client = Client(HTTP_ACCEPT="application/x-ndjson")

    def one_reply(number: int) -> float:
        flow.do_add_message(conversation, number, f"Message number {number}: I feel tense about my exams.")
        start = time.perf_counter()
        response = client.post(f"/s/{participant.token}/chat/reply/{number}/", HTTP_ACCEPT="application/x-ndjson")
        events = [json.loads(line) for line in b"".join(response.streaming_content).splitlines() if line]
        elapsed = time.perf_counter() - start
        if events[-1]["type"] != "done":
            raise SystemExit(f"reply {number} failed: {events[-1]}")
        return elapsed

    first = one_reply(1)
    from annotation.models import BinaryJudgement  # noqa: F401  (the second turn needs the first annotated)
    from collection.models import Turn

    # The second message needs the first turn annotated; a finished annotation is a complete turn with its mood.
    Turn.objects.filter(conversation=conversation).update(
        completeness=cat.TURN_COMPLETE, mood_answered=True, annotation_completed_at=conversation.started_at
    )
    second = one_reply(2)
    server.close()
    print(json.dumps({"mode": mode, "warm_up_s": warm, "first_s": first, "second_s": second}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", choices=("lazy", "warm"))
    parser.add_argument("--smoke", action="store_true", help="one start-up of each kind: the path, not the timing")
    args = parser.parse_args()
    if args.smoke:
        args.repeat = 1
    if args.child:
        child(args.child)
        return
    results: dict[str, list[dict[str, float]]] = {"lazy": [], "warm": []}
    for _ in range(args.repeat):
        for mode in ("lazy", "warm"):
            with tempfile.TemporaryDirectory() as data_dir:
                env = {**os.environ, "ATTUNE_DATA_DIR": data_dir, "PYTHONPATH": str(ROOT)}
                out = subprocess.run(
                    [sys.executable, __file__, "--child", mode], env=env, capture_output=True, text=True, check=False
                )
                if out.returncode != 0:
                    raise SystemExit(out.stderr[-3000:])
                row = json.loads(out.stdout.strip().splitlines()[-1])
                results[mode].append(row)
                print(
                    f"{mode:5s} warm-up {row['warm_up_s']:.2f}s  first reply {row['first_s']:.2f}s  "
                    f"second reply {row['second_s']:.2f}s"
                )
    summary = {
        mode: {k: round(statistics.median(r[k] for r in rows), 3) for k in ("warm_up_s", "first_s", "second_s")}
        for mode, rows in results.items()
    }
    print(json.dumps(summary))
    print(
        figures_line(
            "first_request",
            **{f"{mode}_{key}": value for mode, row in summary.items() for key, value in row.items()},
        )
    )


if __name__ == "__main__":
    main()
