"""docs/metrics.md ("Metrics, worked through") computes what the code computes: every ``>>>`` example on the page
runs against AttuneBench's scoring functions and must print the numbers the page shows, and every metric family
of the contract's scoring section has a worked example."""

from __future__ import annotations

import doctest
import re

import pytest

from tests.doc_blocks import ROOT, blocks

PAGE = ROOT / "docs" / "metrics.md"
# The metric families of docs/benchmark.md sections 5 and 6.1, each a section of the page with its own example.
FAMILIES = (
    "Emotion tags: F1, F1×I, hit rate, intensity MAE",
    "Emotion VA: closeness in valence and arousal",
    "Behaviour accuracy",
    "Pairwise accuracy and Kendall τ",
    "Response similarity and preference alignment",
    "The judge of the draft",
    "PANAS after the conversation",
    "The questions about the conversation",
    "Four-Branch",
    "The composite and the capability scores",
    "Aggregates over conversations",
    "Skill over the prior baseline",
)
EXAMPLES = blocks(PAGE, "pycon")


def sections() -> dict[str, str]:
    """Each ``##`` heading of the page and the text under it."""
    parts = re.split(r"^## (.+)$", PAGE.read_text(encoding="utf-8"), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_metric_family_has_a_section_with_a_worked_example():
    found = sections()
    assert list(found) == list(FAMILIES)
    assert [family for family, text in found.items() if "```pycon\n>>> " not in text] == []


def test_the_examples_call_the_benchmarks_own_code():
    for example in EXAMPLES:
        imports = re.findall(r"^>>> from (\S+) import", example.body, flags=re.M)
        assert imports and all(module.startswith("attunebench.metrics.") for module in imports), example.where()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda example: f"line-{example.line}")
def test_the_worked_example_gives_the_numbers_the_page_shows(example):
    test = doctest.DocTestParser().get_doctest(example.body, {}, example.where(), str(PAGE), example.line)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    failures = []
    runner.run(test, out=failures.append)
    assert runner.failures == 0 and test.examples, "".join(failures)
