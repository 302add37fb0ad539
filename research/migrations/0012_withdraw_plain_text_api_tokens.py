"""API tokens are kept as digests (django-rest-knox) from now on: the plain-text keys of DRF's token table
are deleted, so a copy of the database or a backup made after this holds none.

Their owners create a new token (on /research/token/ or with POST /api/token/); the API answers an old key
with that message (research.access.api_tokens). The emptied table itself is left in place (a release still
running during the upgrade reads it), without any key in it.
"""

from typing import Any

from django.db import migrations

PLAIN_TOKEN_TABLE = "authtoken_token"


def withdraw_plain_tokens(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    if PLAIN_TOKEN_TABLE not in connection.introspection.table_names():
        return  # a database made after DRF's token app left: there never was a plain key
    schema_editor.execute(f"DELETE FROM {schema_editor.quote_name(PLAIN_TOKEN_TABLE)}")


class Migration(migrations.Migration):
    dependencies = [
        ("research", "0011_research_group_reads_the_safety_log"),
        ("knox", "0009_extend_authtoken_field"),
    ]

    operations = [migrations.RunPython(withdraw_plain_tokens, migrations.RunPython.noop, elidable=False)]
