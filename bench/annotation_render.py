"""Annotation page render cost: the answers page's fields through Django widgets vs annotation.markup.

The answers and review pages ask 36 behaviour questions twice with three radios each, and 20 feelings with a
check box and a 1-7 menu each. This measures, in one process and the same conditions, the CPU time of
rendering those two sections for all 36 questions the old way (template loops, an included template per
field, each radio, box and menu rendered by Django's widget templates) and the way the pages do it now
(``{{ form|question_groups }}`` and ``{{ form|mood_rows }}``: annotation.markup, each field's markup cached),
unbound (a GET) and bound with answers (a POST shown again), and prints the per-render CPU ms and the ratio.
Rendering touches no database, so the query count is 0 both ways (printed to show it).

Usage: ATTUNE_DATA_DIR=/tmp/x PYTHONPATH=. python bench/annotation_render.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "attune_site.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.template import engines  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from figures import figures_line  # noqa: E402

from annotation.forms import AnswersForm  # noqa: E402
from attunebench import catalogue as cat  # noqa: E402

OLD = """{% for label, rows in form.question_groups %}{% for question, observed, preferred in rows %}
{{ question.first_person }}
{% include "participant/includes/answer_pills.html" with field=observed %}
{% include "participant/includes/answer_pills.html" with field=preferred %}{% endfor %}{% endfor %}
{% for item, box, strength, affect in form.rows %}{{ affect|lower }}{{ box.id_for_label }}{{ box }}{{ item }}
{{ strength.id_for_label }}{{ strength.label }}{{ strength }}{% endfor %}"""
NEW = """{% load annotation_markup %}{{ form|question_groups }}{{ form|mood_rows }}"""


def cpu_ms(template_source: str, bound: bool, repeat: int) -> tuple[float, int]:
    """Mean CPU ms per render of the 36 questions (a fresh form each time, as each request has), and queries."""
    template = engines["django"].from_string(template_source)
    questions = list(cat.BINARY_QUESTIONS)
    data = {f"{kind}_{q.id}": "yes" for q in questions for kind in ("observed", "preferred")}
    data.update({"mood_Nervous": "on", "intensity_Nervous": "3"})
    template.render({"form": AnswersForm(data if bound else None, questions=questions)})  # warm the caches
    with CaptureQueriesContext(connection) as queries:
        start = time.process_time()
        for _ in range(repeat):
            form = AnswersForm(data if bound else None, questions=questions)
            if bound:
                form.is_valid()
            template.render({"form": form})
        spent = time.process_time() - start
    return spent * 1000 / repeat, len(queries) // repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--smoke", action="store_true", help="two renders each: the path, not the timing")
    args = parser.parse_args()
    repeat = 2 if args.smoke else args.repeat
    figures: dict[str, float] = {}
    for key, state, bound in (("get", "GET (unbound)", False), ("post", "POST shown again (bound)", True)):
        old_ms, old_q = cpu_ms(OLD, bound, repeat)
        new_ms, new_q = cpu_ms(NEW, bound, repeat)
        print(
            f"{state:26s} widgets {old_ms:7.1f} ms cpu ({old_q} queries)  markup {new_ms:6.1f} ms cpu "
            f"({new_q} queries)  ratio {old_ms / new_ms:5.1f}x"
        )
        figures.update({f"{key}_widgets_ms": old_ms, f"{key}_markup_ms": new_ms, f"{key}_markup_queries": new_q})
    print(figures_line("annotation_render", **figures))


if __name__ == "__main__":
    main()
