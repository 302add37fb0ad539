"""``attune create_researcher NAME``: a staff account in the research group, password printed once."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from research.roles import do_make_researcher


class Command(BaseCommand):
    help = "Create (or update) a researcher login: staff, in the 'research' group; prints the password."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--password", help="Use this password instead of a generated one.")

    def handle(self, *args: Any, username: str, password: str | None, **options: Any) -> None:
        user, created = get_user_model().objects.get_or_create(username=username)
        password = password or secrets.token_urlsafe(12)
        user.set_password(password)
        user.save()
        do_make_researcher(user)
        verb = "Created" if created else "Updated"
        self.stdout.write(f"{verb} researcher {username!r} with password {password}")
        self.stdout.write("Log in at /research/login/")
