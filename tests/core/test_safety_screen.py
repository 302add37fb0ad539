"""The risk screen of the pure core: each rule, the annotation signals, odd input and the labelled set's targets."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from attunebench.safety import (
    LEVELS,
    SIGNALS,
    Detection,
    Screening,
    annotation_screening,
    higher,
    screen_lines,
    screen_text,
)

DATA = Path(__file__).resolve().parent.parent / "data"


def signals(text: str) -> set[str]:
    return {d.signal for d in screen_text(text).detections}


# --- the platform's own message-level cases ---


def test_the_platforms_three_messages():
    urgent = screen_text(
        "Honestly I think everyone would be better off without me. I have pills saved up and I might take them tonight."
    )
    assert urgent.level == "urgent"
    assert {"means", "timeframe"} <= {d.signal for d in urgent.detections}
    assert screen_text("I feel so hopeless lately, like nothing is ever going to get better.").level == "concern"
    assert screen_text("This exam is killing me, but I think I'll pass if I keep revising.").level == "none"


# --- urgent: each signal ---


@pytest.mark.parametrize(
    ("text", "signal"),
    [
        ("I'm going to kill myself", "intent"),
        ("honestly I just wanna die", "intent"),
        ("i want to end my life", "intent"),
        ("I am really suicidal right now", "intent"),
        ("i don't want to live anymore", "intent"),
        ("I'm going to hurt myself when I get home", "intent"),
        ("i'm planning to take my own life", "plan"),
        ("I've been looking up the quickest way to die", "plan"),
        ("how many paracetamol would it take to die", "plan"),
        ("my plan is to drive into a wall on the motorway", "plan"),
        ("I've written a goodbye letter to my parents", "plan"),
        ("I've been hoarding my painkillers for weeks", "means"),
        ("the tablets are counted out on the table", "means"),
        ("i have enough insulin to do it", "means"),
        ("there's a noose hanging in the loft", "means"),
        ("I'm thinking of killing myself this weekend", "timeframe"),
        ("I'll overdose tomorrow", "timeframe"),
        ("I took 30 tablets an hour ago", "overdose"),
        ("I think I took too many pills", "overdose"),
        ("just swallowed all of them", "overdose"),
        ("this is my final message. thank you for everything", "goodbye"),
        ("by the time you read this it will be over", "goodbye"),
        ("I won't be around much longer", "goodbye"),
        ("I'm going to stab my stepdad", "harm_to_others"),
        ("i want to shoot the people who bullied me", "harm_to_others"),
        ("I keep thinking about poisoning my boss", "harm_to_others"),
        ("I'll bring my dad's gun to school on monday", "harm_to_others"),
    ],
)
def test_each_urgent_signal(text, signal):
    screening = screen_text(text)
    assert screening.level == "urgent", screening
    assert signal in {d.signal for d in screening.detections}, screening


def test_evidence_is_the_matched_words_as_written():
    screening = screen_text("Tonight I’m Going To Kill Myself.")
    assert screening.level == "urgent"
    evidence = {d.signal: d.evidence for d in screening.detections}
    assert evidence["intent"] == "Going To Kill Myself"
    assert evidence["timeframe"] == "Tonight"


# --- escalation: thoughts, veiled acts and resolve become urgent only with more ---


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("I keep thinking about killing myself", "concern"),
        ("I keep thinking about killing myself tomorrow", "urgent"),
        ("I'm on the bridge and I keep thinking about jumping", "urgent"),
        ("I'm going to do it tonight", "none"),
        ("I'm going to do it tonight, everything is pointless", "urgent"),
        ("I'm about to do something stupid", "none"),
        ("I'm heading to the railway and I'm not coming back", "urgent"),
        ("I wish I could disappear", "concern"),
        ("I wish I could disappear. I've decided", "urgent"),
        ("I'm going to do it, I've decided", "none"),
        ("I've got all my pills here and I'm going to take them", "urgent"),
        ("I'm going to take them to the park", "none"),
        ("Goodbye. I love you all. I'm sorry for everything.", "urgent"),
        ("Goodbye, I'm sorry I was late, see you tomorrow", "none"),
    ],
)
def test_escalation(text, level):
    assert screen_text(text).level == level


# --- concern: each signal ---


@pytest.mark.parametrize(
    ("text", "signal"),
    [
        ("everything is hopeless", "hopelessness"),
        ("there's no point in trying anymore", "hopelessness"),
        ("I feel like such a burden to my family", "hopelessness"),
        ("I can't go on like this", "hopelessness"),
        ("I wish I could go to sleep and not wake up", "passive_ideation"),
        ("they'd all be better off without me", "passive_ideation"),
        ("nobody would notice if i disappeared", "passive_ideation"),
        ("I wish I had never been born", "passive_ideation"),
        ("I don't care if I die", "passive_ideation"),
        ("life isn't worth living", "hopelessness"),
        ("my stepdad is violent", "being_harmed"),
        ("I'm scared she'll hurt me again", "being_harmed"),
        ("I've been having thoughts of suicide", "suicidal_thoughts"),
        ("i think about ending my life sometimes but I won't", "suicidal_thoughts"),
        ("my partner hits me when he's angry", "being_harmed"),
        ("I was assaulted on the way home", "being_harmed"),
        ("he threatened to kill me if I tell anyone", "being_harmed"),
        ("I'm terrified of my stepfather", "being_harmed"),
        ("i cut my arms last night", "self_harm"),
        ("I've been burning myself again", "self_harm"),
        ("the urge to self harm is really strong", "self_harm"),
        ("I tried to kill myself two years ago", "past_attempt"),
        ("I survived a suicide attempt in my twenties", "past_attempt"),
    ],
)
def test_each_concern_signal(text, signal):
    screening = screen_text(text)
    assert screening.level == "concern", screening
    assert signal in {d.signal for d in screening.detections}, screening


# --- negation ---


@pytest.mark.parametrize(
    "text",
    [
        "I would never hurt myself",
        "I'm not going to kill myself",
        "don't worry, I'm not suicidal",
        "I don't want to die, I just want things to change",
        "I have no intention of ending my life",
        "I won't do anything stupid",
        "I never thought about suicide, not even at my lowest",
        "no, I don't want to hurt anyone",
        "nobody is going to hurt me now, I'm safe",
        "my doctor asked if I had thoughts of harming myself, and I don't",
        "no quiero morir",
        "je ne veux pas mourir",
        "ich will nicht sterben",
    ],
)
def test_negation_cancels_the_phrase(text):
    assert screen_text(text).level == "none", screen_text(text)


def test_negation_stays_in_its_clause():
    assert screen_text("I'm not okay and I want to die").level == "urgent"
    assert screen_text("I haven't self harmed in a month but the urge is back").level == "concern"
    assert screen_text("I can't stop thinking about killing myself").level == "concern"


# --- idiom ---


@pytest.mark.parametrize(
    "text",
    [
        "this exam is killing me",
        "I could murder a pizza",
        "dying to see you",
        "I'd kill for a coffee",
        "that joke killed me",
        "I nearly died laughing",
        "I'd rather die than sing karaoke",
        "I'm going to kill it at the interview",
        "I killed myself at spin class today",
        "my mum is going to kill me when she sees this",
        "I'll shoot myself if they play that song again lol",
        "i'm going to kill my brother, he ate my chips",
        "I cut myself shaving this morning",
        "my brother beat me at chess",
        "he punched me on the arm as a joke",
        "the neighbour's dog bit me",
        "my baby kicks me all night",
        "he really hurt me when he left",
        "there's no hope for my team this season",
        "I'm so tired of everything at work",
        "I'd rather be dead than wear that",
        "I want everything to stop for a minute so I can breathe",
        "it hit me that she's really gone",
        "I'm hopeless at maths",
        "I'm done with this essay",
        "I need to cut back on coffee",
        "I want to disappear to the beach for a week",
        "me muero de hambre",
        "je suis mort de rire",
        "ich sterbe vor Langeweile",
    ],
)
def test_idioms_are_not_risk(text):
    assert screen_text(text).level == "none", screen_text(text)


# --- media and quotes ---


@pytest.mark.parametrize(
    "text",
    [
        "the film was about suicide",
        'the chorus goes "I want to die tonight" and it\'s stuck in my head',
        "in the book the main character kills herself",
        "we covered self harm in today's lecture",
        "a podcast about suicide prevention",
        "the documentary showed a man beating his wife",
        "la película trata sobre el suicidio",
    ],
)
def test_media_and_quotes_are_not_risk(text):
    assert screen_text(text).level == "none", screen_text(text)


def test_a_first_person_statement_counts_even_beside_media():
    assert screen_text("that film made me realise I want to die").level == "urgent"


# --- third party: someone else's risk is concern, never urgent ---


@pytest.mark.parametrize(
    "text",
    [
        "my friend said she's going to kill herself tonight",
        "my brother wants to die",
        "my dad tried to kill himself",
        "my sister has been cutting herself",
        "my flatmate is suicidal",
        "my son told me he's going to end it tonight",
    ],
)
def test_third_party_risk_is_concern(text):
    screening = screen_text(text)
    assert screening.level == "concern", screening
    assert {d.signal for d in screening.detections} == {"third_party"}


def test_someone_elses_hopelessness_or_decline_is_nothing():
    assert screen_text("my nan won't be around much longer").level == "none"
    # A clause without a subject has its sentence's.
    assert screen_text("my grandad is very ill and won't be here much longer").level == "none"
    assert screen_text("my boss says the project is hopeless").level == "none"


# --- languages ---


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("quiero morir", "urgent"),
        ("me voy a suicidar esta noche", "urgent"),
        ("estarían mejor sin mí", "concern"),
        ("mi padre me golpea", "concern"),
        ("je veux me tuer", "urgent"),
        ("je n'en peux plus", "concern"),
        ("ils seraient mieux sans moi", "concern"),
        ("ich will mich umbringen", "urgent"),
        ("ich kann nicht mehr", "concern"),
        ("mein Freund schlägt mich", "concern"),
        ("quero morrer", "urgent"),
        ("não aguento mais", "concern"),
        ("voglio morire", "urgent"),
        ("non ce la faccio più", "concern"),
        ("je pense au suicide", "concern"),
        ("ich habe Suizidgedanken", "concern"),
        ("tengo pensamientos suicidas", "concern"),
        ("ik wil dood", "urgent"),
        ("chcę umrzeć", "urgent"),
        ("хочу умереть", "urgent"),
    ],
)
def test_languages(text, level):
    assert screen_text(text).level == level, screen_text(text)


# --- annotations ---


def test_annotation_distress_tags():
    screening = annotation_screening([("Distressed", 7), ("Calm", 7), ("Afraid", 5), ("Upset", None)], {})
    assert screening == Screening("concern", (Detection("concern", "high_distress_tag", "Distressed 7"),))
    assert annotation_screening([("Scared", 6), ("Upset", 6)], {}).level == "concern"
    assert len(annotation_screening([("Scared", 6), ("Upset", 6)], {}).detections) == 2
    assert annotation_screening([("Afraid", 5), ("Distressed", None), ("Excited", 7)], {}).level == "none"


def test_annotation_safety_help_answer():
    wanted = annotation_screening([], {"B18": ("no", "yes")})
    assert wanted.level == "concern"
    assert [d.signal for d in wanted.detections] == ["asked_for_safety_help"]
    assert annotation_screening([], {"B18": ("yes", "no")}).level == "none"
    assert annotation_screening([], {"B18": ("na", "na"), "B17": ("yes", "yes")}).level == "none"
    both = annotation_screening([("Upset", 7)], {"B18": ("yes", "yes")})
    assert [d.signal for d in both.detections] == ["high_distress_tag", "asked_for_safety_help"]


# --- odd input, helpers, output shape ---


@pytest.mark.parametrize("text", ["", " ", "\n\t  \n", "...", "😂😂😂"])
def test_empty_and_whitespace(text):
    assert screen_text(text) == Screening("none", ())


def test_long_text_is_screened_in_reasonable_time():
    filler = "I went to the shop and bought some bread, then walked home by the river. " * 270
    text = (filler + "I want to kill myself tonight. " + filler)[:20_000]
    assert len(text) == 20_000
    started = time.perf_counter()
    screening = screen_text(text)
    assert time.perf_counter() - started < 2
    assert screening.level == "urgent"
    assert screen_text(filler[:20_000]).level == "none"
    assert screen_text("kill myself " * 1700).level in LEVELS  # a pathological repetition still returns


def test_higher():
    assert higher("none", "concern") == "concern"
    assert higher("urgent", "concern") == "urgent"
    assert higher("none", "none") == "none"
    assert LEVELS == ("none", "concern", "urgent")


def test_detections_carry_known_signals_and_levels():
    screening = screen_text("I'm suicidal. my husband hits me. I took 40 pills. goodbye everyone")
    assert screening.level == "urgent"
    for detection in screening.detections:
        assert detection.signal in SIGNALS
        assert detection.level in ("concern", "urgent")


def test_screen_lines_shape():
    out = list(screen_lines(["I want to die\n", "lovely weather today\r\n", ""]))
    assert [row["text"] for row in out] == ["I want to die", "lovely weather today", ""]
    assert [row["level"] for row in out] == ["urgent", "none", "none"]
    assert out[0]["detections"] == [{"level": "urgent", "signal": "intent", "evidence": "want to die"}]
    assert out[1]["detections"] == []
    assert set(out[0]) == {"text", "level", "detections"}
    json.dumps(out)  # plain data, ready for a log line


# --- the labelled set ---


def test_targets_on_the_labelled_set():
    rows = [json.loads(line) for line in (DATA / "risk_screen_messages.jsonl").read_text("utf-8").splitlines() if line]
    assert len(rows) == 391
    by_level: dict[str, list[str]] = {"none": [], "concern": [], "urgent": []}
    for row in rows:
        by_level[row["level"]].append(screen_text(row["text"]).level)
    urgent_recall = by_level["urgent"].count("urgent") / len(by_level["urgent"])
    concern_recall = sum(level != "none" for level in by_level["concern"]) / len(by_level["concern"])
    false_positive_rate = sum(level != "none" for level in by_level["none"]) / len(by_level["none"])
    assert urgent_recall >= 0.95
    assert concern_recall >= 0.85
    assert false_positive_rate <= 0.05


def test_the_screen_patterns_compile_on_first_use_and_match_as_compiled_ones():
    import copy
    import re

    from attunebench.safety import _Pattern

    lazy = _Pattern(r"\bpills?\b", re.IGNORECASE)
    assert "_compiled" not in vars(lazy)
    assert lazy.search("I have PILLS").group() == "PILLS"
    assert [m.span() for m in lazy.finditer("pill, pills")] == [(0, 4), (6, 11)]
    assert vars(lazy)["_compiled"] is re.compile(r"\bpills?\b", re.IGNORECASE)
    assert copy.deepcopy(lazy).search("a pill").group() == "pill"
