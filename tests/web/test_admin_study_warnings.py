"""The Django admin warns of study settings that would not do what they say, as the study setup page does.

The admin's own change form is loaded, filled in as a browser would (every field as shown, one changed) and
posted back, so the test goes through the admin's real form, inlines and message framework.
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.urls import reverse

from collection.models import Study

pytestmark = pytest.mark.django_db


class _FormValues(HTMLParser):
    """The values a browser would post from the page's form: inputs, ticked boxes, chosen options, text areas."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[tuple[str, str]] = []
        self._select: str | None = None
        self._textarea: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        name = a.get("name")
        if tag == "input" and name and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") not in ("checkbox", "radio"):
                self.values.append((name, a.get("value", "")))
            elif "checked" in a:
                self.values.append((name, a.get("value", "on")))
        elif tag == "select":
            self._select = name
        elif tag == "option" and self._select and "selected" in a:
            self.values.append((self._select, a.get("value", "")))
        elif tag == "textarea" and name:
            self._textarea, self._text = name, []

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea" and self._textarea:
            self.values.append((self._textarea, "".join(self._text).strip("\n")))
            self._textarea = None


def save_in_admin(client, study: Study, **changes: str):
    url = reverse("admin:collection_study_change", args=[study.pk])
    page = client.get(url)
    assert page.status_code == 200
    parser = _FormValues()
    parser.feed(page.content.decode())
    data: dict[str, list[str]] = {}
    for name, value in parser.values:
        data.setdefault(name, []).append(value)
    data.update({name: [value] for name, value in changes.items()})
    data["_continue"] = ["Save and continue editing"]
    return client.post(url, data, follow=True)


def test_attention_checks_some_participants_never_meet_are_saved_with_a_warning(admin_client, study):
    study.min_turns, study.max_turns = 3, 10
    study.save()
    response = save_in_admin(admin_client, study, attention_checks="6")
    assert response.status_code == 200
    study.refresh_from_db()
    assert study.attention_checks == 6  # saved as asked: the researcher decides
    shown = [str(m) for m in response.context["messages"]]
    warnings = [m for m in shown if "attention checks" in m]
    assert warnings == [
        "The study asks for 6 attention checks, placed one in the closing survey and one among the behaviour "
        "questions of each of the first 5 turns, but a participant who finishes after the fewest turns (3) "
        "meets only 4. Raise the fewest turns to 5, or lower the attention checks to 4."
    ]
    assert b"messagelist" in response.content and b"warning" in response.content


def test_settings_every_participant_meets_are_saved_without_a_warning(admin_client, study):
    study.min_turns, study.max_turns = 3, 10
    study.save()
    response = save_in_admin(admin_client, study, attention_checks="2")
    study.refresh_from_db()
    assert study.attention_checks == 2
    assert not [m for m in response.context["messages"] if "attention checks" in str(m)]
