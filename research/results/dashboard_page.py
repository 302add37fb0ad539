"""The evaluation dashboard's page, rendered once per comparison and view and then served from the cache.

At eleven models × four modes the page draws a dozen charts and tables from the SPEC 6 analyses, and
rendering them cost about a second even with the analyses cached. Its two heavy parts (the leaderboard,
and the figures and tables below it) hold nothing of the user's (no form token, no messages), so each is
cached as HTML under the comparison's cache key (which changes whenever a score does) and the page's
query: a cached load reads two strings and the small summary of the comparison, never the analyses. The
precompute task (research.results.precompute) renders the default view, so the first load after a change
is cached too.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.core.cache import cache
from django.http import QueryDict
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from attunebench.metrics.comparison import MIN_CONVERSATIONS_FOR_CI
from research.results.charts import model_colours
from research.results.evaluation import (
    CACHE_SECONDS,
    RUN_CHOICE_TEXT,
    SORT_KEYS,
    EvaluationData,
    apart_rows,
    capability_columns,
    leaderboard_rows,
)
from research.results.figures import BREAKDOWN_METRIC_TITLES, TURN_METRIC_TITLES, figure

# Every pair of rows is tested on every metric: tens of thousands of table rows at eleven models × four modes,
# which took the page seconds to render even with the analyses cached. Above this many the page says how many
# there are and links the CSV, which lists them all.
PAIR_TESTS_ON_PAGE = 1000
PARTS = {"leaderboard": "research/_leaderboard.html", "analyses": "research/_evaluation_analyses.html"}
PAGE_FIGURES = (
    "leaderboard",
    "capability_profile",
    "independence",
    "by_topic",
    "by_group",
    "turn_position",
    "turn_halves",
    "comparison_matrix",
    "topic_tests",
)


def view_options(params: QueryDict) -> dict[str, Any]:
    """What the page's address chooses: weighting, sort, metrics, the runs pinned and what to carry along."""
    weighting = "equal" if params.get("weighting") == "equal" else "spec"
    sort = params.get("sort", "composite")
    metric = params.get("metric", "behaviour_accuracy")
    topic_metric = params.get("topic_metric", "composite_score")
    keep = QueryDict(mutable=True)
    for name in ("set", "dataset", "run", "pool"):
        if values := [v for v in params.getlist(name) if v]:
            keep.setlist(name, values)
    return {
        "weighting": weighting,
        "sort": sort if sort in SORT_KEYS else "composite",
        "descending": params.get("dir", "desc") != "asc",
        "metric": metric if metric in TURN_METRIC_TITLES else "behaviour_accuracy",
        "topic_metric": topic_metric if topic_metric in BREAKDOWN_METRIC_TITLES else "composite_score",
        "keep": keep.urlencode(),
        "pinned": params.getlist("run"),
        "query": params.urlencode(),
        "dataset": params.get("dataset"),
    }


def page_context(data: EvaluationData, options: dict[str, Any]) -> dict[str, Any]:
    """The context the page's own template needs (the cached parts come as HTML)."""
    return {
        "data": data,
        "colours": model_colours(data.models),
        **options,
    }


def _part_context(data: EvaluationData, options: dict[str, Any], part: str) -> dict[str, Any]:
    analysis = data.analysis
    weighting = options["weighting"]
    context: dict[str, Any] = {
        **page_context(data, options),
        "analysis": analysis,
        "rows": leaderboard_rows(data, weighting=weighting, sort=options["sort"], descending=options["descending"]),
        "capability_columns": capability_columns(),
        "apart": apart_rows(data, weighting=weighting),
        "apart_info": {a.label: a for a in analysis.comparability.apart} if analysis and analysis.comparability else {},
        "run_choice_text": RUN_CHOICE_TEXT,
        "min_n": MIN_CONVERSATIONS_FOR_CI,
        "sort_columns": [
            ("label", "Model"),
            ("skill", "Skill"),
            ("composite", "Composite" if weighting == "spec" else "Equal-weight"),
            *capability_columns(),
            ("n", "Conv."),
            ("coverage", "Coverage"),
            ("post_coverage", "Post cov."),
            ("cost", "Cost"),
        ],
    }
    if part == "analyses" and analysis:
        pair_tests = sum(m.n_pairs for m in analysis.discrimination.metrics.values())
        context.update(
            figures={
                name: figure(
                    name, data, weighting=weighting, metric=options["metric"], topic_metric=options["topic_metric"]
                )
                for name in PAGE_FIGURES
            },
            pair_tests=pair_tests,
            pair_tests_listed=pair_tests <= PAIR_TESTS_ON_PAGE,
            turn_metrics=TURN_METRIC_TITLES,
            topic_metrics=BREAKDOWN_METRIC_TITLES,
            pool_choices=[p.label for p in analysis.capability_profile],
        )
    return context


def rendered_part(data: EvaluationData, params: QueryDict, part: str, cache_seconds: int = CACHE_SECONDS) -> SafeString:
    """The HTML of one heavy part of the page (``leaderboard`` or ``analyses``), from the cache when it is there.

    Its key is the comparison's (which changes with any score) plus the page's query, sorted, so every view
    of the page has its own entry and none outlives the scores it was drawn from.
    """
    options = view_options(params)
    if not data.key:  # nothing scored: nothing worth caching
        return mark_safe(render_to_string(PARTS[part], _part_context(data, options, part)))
    query = "&".join(sorted(f"{k}={v}" for k in params for v in params.getlist(k)))
    key = f"{data.key}:html:{part}:" + hashlib.sha256(query.encode()).hexdigest()[:24]
    html = cache.get(key)
    if html is None:
        html = render_to_string(PARTS[part], _part_context(data, options, part))
        cache.set(key, html, timeout=cache_seconds)
    return mark_safe(html)
