"""Events of the study that the layers above collection act on.

Collection sits below scoring, datasets and research, so it cannot call them;
it announces instead, explicitly from the action that changed the data (never
from a ``post_save`` hook). Receivers register in their app's ``ready()`` and
defer their work with ``transaction.on_commit``, so nothing happens for a
withdrawal that rolls back.
"""

from __future__ import annotations

from django.dispatch import Signal

#: Sent by ``study_flow.do_withdraw`` inside its transaction, with ``conversation_pks`` (the
#: participant's conversations, now withdrawn) and ``withdrawn_at`` (when). Scoring re-scores the
#: runs that held them; datasets withdraws and regenerates the export files that held them.
participant_withdrawn = Signal()

#: Sent by ``study_flow.do_save_reply`` inside its transaction, with ``turn_pk``, when a turn's reply has
#: just been stored (once per turn: only the first writer sends it). Annotation prepares the suggested
#: rewrite of the reply off the request path, so the participant's annotation pages never wait on a model.
reply_stored = Signal()
