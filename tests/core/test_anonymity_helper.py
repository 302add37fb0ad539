"""The leak check itself: random tokens never count as a model name, real mentions always do."""

from __future__ import annotations

from tests.anonymity import names_found


def test_a_csrf_token_or_participant_link_holding_gpt_by_chance_is_not_a_leak():
    page = (
        '<input type="hidden" name="csrfmiddlewaretoken" value="q8RgPtZ0aB3kLm9XyGptQw7eRt5YuI1oPaS2dF4gH6jK8lZx">'
        '<a href="/s/FzyXVDS_4SyJs-RFsjOJgpt1Jv-YsvUG/turn/1/">Next</a>'
    )
    assert names_found(page, ["gpt", "acme"]) == []


def test_a_model_name_in_prose_a_slug_or_a_provider_path_is_found():
    assert names_found("To be honest, I'm GPT-4o.", ["gpt"]) == ["gpt"]
    assert names_found("model: openai/acme-frontier-9000", ["acme-frontier-9000"]) == ["acme-frontier-9000"]
    assert names_found("As ChatGPT I would say", ["ChatGPT", "OpenAI"]) == ["ChatGPT"]
