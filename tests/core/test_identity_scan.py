"""The identity screen of the pure core: names, variants, ordinary words, streaming hold-back."""

from __future__ import annotations

import pytest

from attunebench import catalogue as cat
from attunebench.identity import IdentityScanner, StreamScreen, configured_names, leak_labels

SCANNER = IdentityScanner()


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        ("I'm GPT-4o, made by OpenAI.", ["GPT", "OpenAI"]),
        ("Honestly, as gpt 4 I can't feel things.", ["GPT"]),
        ("I am gpt4o-mini.", ["GPT"]),
        ("I'm ChatGPT!", ["ChatGPT"]),
        ("I was trained by Open AI and open-ai's team.", ["OpenAI", "OpenAI"]),
        ("I'm Claude, an AI assistant made by Anthropic.", ["Claude", "Anthropic"]),
        ("Claude 3.5 Sonnet here.", ["Claude"]),
        ("I'm Gemini.", ["Gemini"]),
        ("Gemini 1.5 Pro can help.", ["Gemini"]),
        ("I was made by Google DeepMind.", ["Google DeepMind"]),
        ("I'm an AI made by Google.", ["Google"]),
        ("I'm Llama 3, from Meta AI.", ["Llama", "Meta AI"]),
        ("Llama-3.1 70B says hi", ["Llama"]),
        ("Mistral AI built me.", ["Mistral AI"]),
        ("I am Mistral, a language model.", ["Mistral"]),
        ("I'm Qwen from Alibaba Cloud.", ["Qwen"]),
        ("DeepSeek-R1 thinks so.", ["DeepSeek"]),
        ("deep seek v3", ["DeepSeek"]),
        ("Mixtral 8x7B", ["Mixtral"]),
        ("I'm Grok, built by xAI.", ["Grok", "xAI"]),
        ("I am Copilot, an AI companion.", ["Copilot"]),
    ],
)
def test_model_provider_and_product_names_are_found_in_their_variants(text, labels):
    assert [m.label for m in SCANNER.find(text)] == labels


@pytest.mark.parametrize(
    "text",
    [
        "Let's open up about what happened; it's okay to be open.",
        "As a Gemini, you may feel pulled in two directions.",
        "My friend Claude said something that hurt.",
        "We saw a llama at the farm and laughed.",
        "The mistral wind kept us indoors all week.",
        "You could google the opening hours later.",
        "She works at Meta and loves it.",
        "The bard of the village sang.",
        "Physics was my favourite subject, and phi is a golden number.",
        "I'm here to listen. I am sorry this is so hard.",
        "You are the copilot of your own life.",
        "It is a deep seeking question, and you seek depth.",
        "Your Gemini friend Amy sounds lovely.",
    ],
)
def test_ordinary_words_and_names_are_not_leaks(text):
    assert SCANNER.find(text) == []


def test_masking_replaces_every_name_with_the_catalogue_mask():
    masked = SCANNER.mask("I'm GPT-4o, made by OpenAI. Ask me anything.")
    assert masked == f"I'm {cat.IDENTITY_MASK}, made by {cat.IDENTITY_MASK}. Ask me anything."
    assert SCANNER.find(masked) == []


def test_a_configured_model_name_and_provider_are_screened_with_flexible_separators():
    scanner = IdentityScanner(configured_names("acme-frontier-9000", "acme", "openai/acme-frontier-9000", "ai"))
    assert configured_names("acme-frontier-9000", "acme", "openai/acme-frontier-9000", "ai") == [
        "acme-frontier-9000",
        "acme",
    ]
    assert leak_labels(scanner.find("I'm Acme Frontier 9000 by ACME.")) == ["acme-frontier-9000", "acme"]
    assert scanner.find("An acmeist painting") == []


def test_overlapping_finds_keep_the_longer_name():
    (match,) = SCANNER.find("ChatGPT")
    assert (match.label, match.text) == ("ChatGPT", "ChatGPT")


def _stream(screen: StreamScreen, chunks: list[str]) -> tuple[str, bool]:
    shown = ""
    for chunk in chunks:
        out = screen.feed(chunk)
        if out is None:
            return shown, True
        shown += out
    rest = screen.finish()
    if rest is None:
        return shown, True
    return shown + rest, False


def test_a_clean_stream_is_released_whole_and_in_order():
    text = "I hear you. That sounds really hard, and it makes sense you feel worn out by it all. " * 3
    words = [w if i == 0 else " " + w for i, w in enumerate(text.split(" "))]
    shown, leaked = _stream(StreamScreen(SCANNER), words)
    assert not leaked and shown == text


def test_a_name_split_across_chunks_is_caught_before_any_of_it_is_released():
    text = (
        "Thank you for telling me this, it matters a great deal and I want to help where I can. "
        "To be open with you, I'm Cla"
    )
    screen = StreamScreen(SCANNER)
    released = ""
    for chunk in [text[i : i + 7] for i in range(0, len(text), 7)]:
        out = screen.feed(chunk)
        assert out is not None
        released += out
    assert screen.feed("ude, made by Anthropic.") is None
    assert "Cla" not in released and "Anthropic" not in released
    assert leak_labels(screen.leaks) == ["Claude", "Anthropic"]
    assert released and text.startswith(released)  # what was shown is a clean prefix


def test_an_ambiguous_word_is_held_until_its_context_decides():
    screen = StreamScreen(SCANNER)
    assert screen.feed("Gemini") == ""  # could still become "Gemini 1.5" or "Gemini, an AI model"
    assert screen.feed(" season is here and you sound restless about everything changing at once.") is not None
    assert screen.finish() is not None and screen.leaks == []
