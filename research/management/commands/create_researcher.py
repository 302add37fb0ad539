"""``attune create_researcher NAME``: a staff account in the research group, password printed once."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from research.access.roles import do_make_researcher


class Command(BaseCommand):
    help = "Create (or update) a researcher login: staff, in the 'research' group; prints the password."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--password",
            help="Use this password instead of a generated one (checked like any password: at least 12 "
            "characters, not like the username, not common, not all digits).",
        )

    def handle(self, *args: Any, username: str, password: str | None, **options: Any) -> None:
        model = get_user_model()
        user = model.objects.filter(username=username).first()
        created = user is None
        if user is None:
            user = model(username=username)
        password = password or secrets.token_urlsafe(12)  # 16 characters: passes every validator
        try:
            # Checked against the (possibly unsaved) user, so "same as the username" is caught too.
            validate_password(password, user)
        except ValidationError as exc:
            raise CommandError(f"password for {username!r} refused: " + " ".join(exc.messages)) from None
        with transaction.atomic():
            user.set_password(password)
            user.save()
            do_make_researcher(user)
        verb = "Created" if created else "Updated"
        self.stdout.write(f"{verb} researcher {username!r} with password {password}")
        self.stdout.write("Log in at /research/login/")
