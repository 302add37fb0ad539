"""A risk screen of participants' messages: the platform's own safety net, independent of the model under study.

Participants chat about what weighs on them. A participant who writes "I have pills saved up and I might
take them tonight" must be noticed by the platform itself, whatever the model replies. :func:`screen_text`
reads one message and returns a :class:`Screening`: a level and the detections behind it, each with a
stable signal id (the research log shows it) and the words that matched, as written.

Levels:

- ``urgent``: intent, plan, means or timeframe of suicide or self-harm ("I'm going to kill myself",
  "I want to die", "I have pills saved up", "... tonight"), an overdose taken, a farewell ("this is my
  last message", "by the time anyone reads this"), or intent to harm someone else ("I'm going to stab him");
- ``concern``: hopelessness, passive ideation (wishing not to wake up, being better off dead, wanting to
  disappear, without intent), thoughts of suicide without intent, being harmed by someone (violence,
  abuse, threats, coercion), self-harm or past attempts without present intent, and any of these in
  someone else (the third-party rule below);
- ``none`` otherwise.

Matching rules, chosen so that ordinary speech does not trip it:

- patterns are whole phrases (a verb with its object, a wish with what is wished), matched
  case-insensitively with typographic apostrophes read as plain ones; single words never count
  ("die", "kill", "pills", "bridge" alone are nothing);
- negation: a negator in the same clause before the phrase, or inside it ("not", "never", "no", "don't",
  "won't", "no intention of", "nobody"; "no", "ne", "nicht", "nunca", "jamais" ...) cancels it: "I would
  never hurt myself", "I'm not going to kill myself", "I'm not suicidal". A clause ends at punctuation and
  at "but", "and", "because", "though". "Can't stop", "not sure", "not joking", "nobody would care" are
  not negations, and "I haven't self harmed in a week" is a streak, not a denial;
- idiom: a phrase counts only with its serious object ("kill myself", not "killing me", "kill it", "kill
  for a coffee", "murder a pizza"); "die" counts only as a wish ("I want to die"), never "dying to", "die
  of", "die laughing", "rather die than"; past hyperbole ("I killed myself at the gym") does not count; a
  message that laughs ("lol", "haha", "jk", "jaja", "mdr", 😂) drops phrases that are also jokes (killing,
  shooting, dying, overdosing on caffeine, being scared of the boss); an accident ("cut myself chopping
  onions") is not self-harm; a threat to kill someone over a trifle ("she ate my cheese", "if she borrows
  my jeans") is exasperation; being hit in play, by accident, by a baby or an animal, or "hurt" in one's
  feelings ("he really hurt me when he left") is not being harmed;
- media and quotes: words inside quotation marks are someone else's (song lyrics, a line from a film) and
  do not count; a topic phrase ("a suicide note", "self harm", "talks about suicide") or someone else's act
  in a sentence about a film, song, book, article, lecture, podcast, show, game, dissertation or training
  does not count ("the film was about suicide", "in the novel the husband beats his wife"); a first-person
  statement outside quotes still counts, even in such a sentence;
- third party: whose act it is comes from the phrase ("himself", "she wants") or the nearest subject
  before it in the clause ("my sister said she's going to end it tonight"), or in its sentence when the
  clause has none ("my grandad is ill and won't be here much longer"). Someone else's risk is ``concern``
  (signal ``third_party``), never ``urgent``, even when it sounds imminent: the participant is worried and
  the platform should notice, but the person at risk is not the one writing, and a person reading the
  log decides what to do. Someone else's hopelessness or farewell
  ("my nan won't be around much longer") is nothing; a screening question reported ("my doctor asked if I
  had thoughts of harming myself") is nothing;
- escalation: thoughts of suicide ("I'm thinking of killing myself") become ``urgent`` with a time
  ("tomorrow", "tonight", "after my shift") or a place ("I'm on the roof"); hopelessness or passive
  ideation become ``urgent`` with resolve ("I've decided", "I mean it", "I'm going to make it happen"); a
  veiled act ("I'm going to do it tonight", "I'm not coming back", "about to do something stupid", "I'm
  going to take them") counts only beside another signal of the writer's own, such a place or a means
  (pills, a rope, a gun), and is then ``urgent``; a farewell with an apology or love to all and no "see
  you" or "tomorrow" is ``urgent``; with an urgent signal, a time word is reported as ``timeframe`` and a
  means word as ``means``;
- languages: English, Spanish, French, German, Portuguese and Italian phrases for the commonest signals
  (wishing to die, killing oneself, no longer wanting to live, better off without me, being hit,
  hopelessness), with their idioms ("muerto de risa", "ich sterbe vor Hunger", "me muero de hambre");
  Dutch, Polish and Russian phrases for wishing to die and killing oneself only;
- a phrase repeated in a long text is reported once.

What it cannot see: calm, oblique preparation ("I've given my dog to my sister", "I've sorted everything
out", "I've written my will", giving things away, a goodbye that does not say it is one); intent spread
over several messages (each message is screened alone); irony it has no marker for; misspellings and
languages it has no phrases for; a real threat phrased as exasperation over a trifle; and the
difference between "I want to die" said as a wish and as a plan (both are ``urgent``). It errs towards
noticing: a joking threat with neither a laugh nor a trifle is flagged. It is a research study's safety
net, so that a person reads what might be a crisis, not a clinical assessment of anyone's risk.

Pure Python: no Django.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Level = Literal["none", "concern", "urgent"]
LEVELS: tuple[Level, ...] = ("none", "concern", "urgent")

#: Every signal id a detection can carry (stable: the research log shows them).
SIGNALS: tuple[str, ...] = (
    "intent",
    "plan",
    "means",
    "timeframe",
    "overdose",
    "goodbye",
    "harm_to_others",
    "hopelessness",
    "passive_ideation",
    "suicidal_thoughts",
    "being_harmed",
    "self_harm",
    "past_attempt",
    "third_party",
    "high_distress_tag",
    "asked_for_safety_help",
    # added by a deployment's moderation model (collection.safety_model), never by the offline rules
    "model_self_harm_intent",
    "model_self_harm",
    "model_violence",
)


@dataclass(frozen=True)
class Detection:
    """One signal found: its level, its stable id and the words that matched, as written."""

    level: Level
    signal: str
    evidence: str


@dataclass(frozen=True)
class Screening:
    """A message's level (the highest among its detections; ``none`` when there are none) and detections."""

    level: Level
    detections: tuple[Detection, ...]


def higher(a: Level, b: Level) -> Level:
    """The more serious of two levels."""
    return a if LEVELS.index(a) >= LEVELS.index(b) else b


# --- building blocks -------------------------------------------------------------------------------------

_FLAGS = re.IGNORECASE


class _Pattern:
    """A regular expression compiled on its first use (or by :func:`compile_patterns`), then used as the
    compiled one.

    Why: the screen's patterns take a noticeable part of a second to compile, and every process that sets up
    Django imports this module (the chat's screen is part of the collection app) while most never screen a
    message (``attune eval``, workers of other queues). A web server compiles them all in its warm-up.
    """

    made: list[_Pattern] = []  # every pattern of the screen, for compile_patterns

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source, self.flags = source, flags
        _Pattern.made.append(self)

    def compiled(self) -> re.Pattern[str]:
        found = self.__dict__.get("_compiled")
        if found is None:
            found = self.__dict__["_compiled"] = re.compile(self.source, self.flags)
        return found

    def __getattr__(self, name: str) -> Any:
        # Only for what the instance lacks (search, finditer, ...): compile once, then keep each method looked up
        # on the instance, so later uses are plain attribute reads. Special names (copy's, pickle's) stay unknown.
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self.compiled(), name)
        self.__dict__[name] = value
        return value


def compile_patterns() -> None:
    """Compile every pattern of the screen now: a server's warm-up, so no participant's message waits for it."""
    for pattern in _Pattern.made:
        pattern.compiled()


_PERSON = (
    r"(?:step)?(?:dad|father|mum|mom|mother|parent|brother|sister|son|daughter|husband|wife|partner|boyfriend"
    r"|girlfriend|bf|gf|ex|boss|manager|teacher|coach|flatmate|roommate|housemate|neighbou?r|friend|colleague"
    r"|co-?worker|classmate|kid|child|children|family|uncle|aunt|auntie|cousin|grandma|grandpa|grandmother"
    r"|grandfather|grandad|granddad|nan|nana|student|pupil|bull(?:y|ies)|guy|man|men|woman|women|girl|boy|landlord"
    r"|client|patient|people|mate|pal|bestie|bff|fianc[eé]e?)s?"
)
#: A person as the object of an act: a pronoun or a determiner, an optional adjective and a person noun.
_OBJ = (
    rf"(?:him|her|them|everyone|everybody|someone|somebody|anyone|anybody|people"
    rf"|(?:my|his|her|their|the|that|this|those|these|our|all\s+the)\s+(?:[\w-]+\s+)?{_PERSON})\b(?!'s)"
)
_REFL = r"(?:myself|my\s+self|himself|herself|themselves|themself)"
_POSS = r"(?:my|his|her|their)"
_DRUG = (
    r"(?:pills?|tablets?|meds|medications?|medicines?|paracetamol|acetaminophen|tylenol|ibuprofen|aspirin"
    r"|painkillers?|antidepressants?|sleeping\s+(?:pills|tablets)|insulin|opioids?|oxy\w*|codeine|tramadol"
    r"|lithium|benzos?|diazepam|valium|xanax|co-?codamol)"
)
_BLADE = r"(?:razor\s*blades?|blades?|razors?)"
_QTY = (
    r"(?:all\s+(?:of\s+)?(?:my|the|his|her|their|those|these)?|every|everything|the\s+(?:whole|entire)"
    r"|a\s+(?:whole\s+)?(?:bottle|box|pack(?:et)?|handful|load|strip)\s+of|\d{2,}|twenty|thirty|forty|fifty"
    r"|sixty|a\s+hundred|loads\s+of|lots\s+of|a\s+lot\s+of|too\s+many|way\s+too\s+many)"
)
#: Words that may sit between a modal and the act ("I'm going to just ...").
_FILL = r"(?:(?:just|really|finally|actually|probably|definitely|seriously|honestly|literally|quietly|go|simply)\s+)*"
#: A self-directed act of suicide or self-harm, in its base form (after a modal).
_ACT = (
    rf"(?:kill\s+{_REFL}|kms\b|unalive\s+{_REFL}|off\s+{_REFL}|top\s+{_REFL}|end\s+{_REFL}"
    rf"|end\s+(?:{_POSS}|this)\s+(?:own\s+)?life|take\s+{_POSS}\s+(?:own\s+)?life|end\s+it\s+all"
    rf"|end\s+(?:it|things|everything)\b(?!\s+(?:with|between|for\s+(?:him|her|them)|off|there|here|on\b|early|by|now\s+and))"
    rf"|commit\s+suicide|(?:hang|shoot|drown|stab|gas|poison|suffocate|electrocute|hurt|harm|cut|burn)\s+{_REFL}"
    rf"|starve\s+{_REFL}\s+(?:to\s+death|until)|(?:slit|cut|slash|open)\s+{_POSS}\s+(?:wrists?|throat|arms?|veins)"
    rf"|overdose\b(?!\s+on\s+(?:caffeine|coffee|sugar|chocolate|cake|carbs|tv|netflix|love|food|sweets|candy))"
    rf"|od\b|jump\s+(?:off|from|in\s+front\s+of)\b|throw\s+{_REFL}\s+(?:off|from|in\s+front\s+of|under|into)"
    rf"|step\s+in\s+front\s+of\s+(?:a|the)|lie\s+(?:down\s+)?on\s+the\s+(?:train\s+)?(?:tracks|railway|line|road)"
    rf"|walk\s+into\s+(?:the\s+)?(?:sea|river|lake|ocean|traffic|water)"
    rf"|drive\s+(?:my\s+car\s+)?(?:into|off)\s+(?:the|a)\s+(?:river|sea|wall|tree|lake|cliff|bridge|lorry|truck)"
    rf"|crash\s+(?:my|the)\s+car\s+(?:on\s+purpose|into)|drink\s+(?:bleach|poison|antifreeze|weedkiller)"
    rf"|make\s+sure\s+i\s+(?:don'?t|never|won'?t)\s+wake\s+up|use\s+(?:it|this|that|them)\s+on\s+{_REFL}"
    rf"|(?:take|swallow|down)\s+{_QTY}\s*(?:[\w'-]+\s+){{0,3}}?{_DRUG}|take\s+an\s+overdose"
    rf"|cut\b(?=\s*(?:tonight|again|deeper|now|today|[.!?,;]|$)))"
)
#: The same acts as gerunds and nouns, after a thought ("thinking of killing myself").
_ACT_ING = (
    rf"(?:killing\s+{_REFL}|suicide|ending\s+(?:{_POSS}\s+(?:own\s+)?life|it\s+all"
    rf"|(?:it|things|everything)\b(?!\s+(?:with|between|off|on\b|early|there|here)))"
    rf"|taking\s+{_QTY}\s*(?:[\w'-]+\s+){{0,3}}?{_DRUG}"
    rf"|taking\s+{_POSS}\s+(?:own\s+)?life|(?:hanging|shooting|drowning|stabbing|hurting|harming|cutting)\s+{_REFL}"
    rf"|overdosing|dying\b(?!\s+(?:my|her|his|it|them|the|to|for|of|from|laughing|inside)\b)"
    rf"|not\s+(?:being\s+here|existing|waking\s+up)"
    rf"|jumping(?!\s+(?:ship|on|in\b(?!\s+front)|at|into\s+(?:bed|the\s+(?:pool|shower))|through|the\s+gun|back|up|over|for|to|rope"
    rf"|around|ahead|jacks))"
    rf"|throwing\s+{_REFL}|(?:walking|driving|stepping)\s+(?:into|in\s+front\s+of|off)|{_ACT})"
)
_MODAL = (
    r"(?:(?P<plan>planning\s+(?:to|on)|plan\s+to|(?:have\s+|'ve\s+)?decided\s+to|my\s+plan\s+is\s+to|the\s+plan\s+is\s+to)"
    r"|going\s+to|gonna|about\s+to|ready\s+to|wants?\s+to|wanna|need\s+to|intend\s+to|will|'ll|ill|might|should"
    r"|gotta|got\s+to|have\s+to|determined\s+to|i'd\s+like\s+to)"
)


@dataclass(frozen=True)
class _Rule:
    """One phrase pattern and how to judge its matches.

    ``role`` groups rules for escalation; ``person`` says how whose act it is gets decided: ``self`` from
    the phrase or the subject before it (someone else's -> ``third_party``, or dropped when ``third_drop``),
    ``agent`` from the subject before it (harm to others), ``victim`` (the writer is the object: a subject
    of "it" or "that" drops it), ``none`` (not decided).
    """

    signal: str
    level: Level
    pattern: _Pattern
    role: str
    person: str = "self"
    third_drop: bool = False
    joke: bool = False  # dropped in a laughing message
    topic: bool = False  # dropped in a sentence about a film, song, book ...
    inner_neg: bool = False  # the phrase has its own negation: only the clause before it is checked
    past_cancels: bool = False  # "used to", "no longer" before it: a feeling that has passed
    accident: bool = False  # dropped in a sentence about an accident (chopping, tripping ...)
    trifle: bool = False  # dropped when the sentence goes on about a trifle (harm to others)
    playful: bool = False  # dropped in a sentence about play or an accident ("punched me as a joke")


def _r(
    signal: str,
    level: Level,
    pattern: str,
    role: str,
    *,
    person: str = "self",
    third_drop: bool = False,
    joke: bool = False,
    topic: bool = False,
    inner_neg: bool = False,
    past_cancels: bool = False,
    accident: bool = False,
    trifle: bool = False,
    playful: bool = False,
) -> _Rule:
    return _Rule(
        signal,
        level,
        _Pattern(pattern, _FLAGS),
        role,
        person=person,
        third_drop=third_drop,
        joke=joke,
        topic=topic,
        inner_neg=inner_neg,
        past_cancels=past_cancels,
        accident=accident,
        trifle=trifle,
        playful=playful,
    )


_RULES: tuple[_Rule, ...] = (
    # --- suicide and self-harm with intent: urgent ---
    _r("intent", "urgent", rf"\b{_MODAL}\s+{_FILL}{_ACT}", "act", joke=True),
    _r(
        "intent",
        "urgent",
        r"\b(?:wants?|wanna|ready|need|planning|plan|decided|desperate|longing|wish|wishing)\s+(?:to\s+)?"
        rf"{_FILL}(?:die\b(?!\s+(?:of|from|laughing|than|for|when|if|in\s+(?:my|a|the)|alone|old|happy|young|trying"
        r"|before|with)\b)(?!\s+(?:my|her|his|it|them|the)\s+(?:\w+\s+)?(?:hair|clothes|shirt|jeans|dress|shoes|pink|blue"
        r"|red|black|green|purple|blonde|brown|grey|gray|white)\b)|be\s+dead\b)",
        "act",
        joke=True,
    ),
    _r(
        "intent",
        "urgent",
        r"\b(?:i'?m|im|i\s+am|i\s+feel|feel(?:ing)?|been|getting|actively)\s+(?:(?:really|so|very|quite|pretty"
        r"|extremely|actively|kind\s+of|kinda|a\s+bit|a\s+little|not|super)\s+){0,2}suicidal\b(?!\s+(?:thoughts?"
        r"|feelings?|ideation|urges?|ideas?|tendencies|in\s+the\s+past|before|when|years|as\s+a))",
        "act",
    ),
    _r(
        "intent",
        "urgent",
        r"\b(?:i'?m|im|i\s+am)\s+(?:finally\s+|really\s+)?(?:ending\s+(?:it\s+all|my\s+life|(?:it|things|everything)\b"
        r"(?!\s+(?:with|between|off|on\b|early)))|killing\s+myself|taking\s+my\s+(?:own\s+)?life)",
        "act",
        joke=True,
    ),
    _r(
        "intent",
        "urgent",
        r"\b(?:(?:i\s+)?(?:don'?t|do\s+not|no\s+longer)\s+want\s+to\s+(?:live|be\s+alive)(?:\s+any\s?more)?\b"
        r"|(?:i\s+)?(?:don'?t|do\s+not)\s+want\s+to\s+(?:go\s+on|keep)\s+living)",
        "act",
        inner_neg=True,
    ),
    # --- means, an overdose taken, farewells: urgent ---
    _r(
        "means",
        "urgent",
        r"\b(?:stockpil\w*|hoard\w*|sav(?:ed|ing)\s+up|sav(?:ed|ing)(?=\s+(?:my|the|all))|collect(?:ed|ing)|gather(?:ed|ing)|hid(?:den|ing)?"
        r"|stash(?:ed|ing)?|lined\s+up|counted\s+out)\s+(?:up\s+)?(?:(?:all\s+)?(?:my|some|enough|the|a\s+lot\s+of"
        rf"|loads\s+of|lots\s+of|a\s+(?:bottle|box|pack(?:et)?)\s+of|\d+)\s+)?(?:[\w'-]+\s+)?(?:{_DRUG}|{_BLADE})"
        rf"|\b(?:{_DRUG}|{_BLADE})\s+(?:[\w-]+\s+)?(?:saved(?:\s+up)?|stockpiled|hoarded|hidden|stashed"
        r"|ready(?!\s+(?:at|for|to\s+(?:collect|pick)))|lined\s+up|counted\s+out|set\s+aside|laid\s+out"
        r"|in\s+my\s+(?:hand|hands|pocket)|(?:are|is)\s+(?:all\s+)?(?:lined\s+up|ready|counted|laid\s+out"
        r"|in\s+front\s+of\s+me))"
        rf"|\benough\s+(?:[\w-]+\s+){{0,2}}?{_DRUG}\s+to\s+(?:do\s+it|kill|end|die|overdose|not\s+wake|finish)"
        r"|\bnooses?\b"
        r"|\brope\b(?!\s+(?:swing|ladder|bridge|course|burn|access))[^.!?\n]{0,60}?\b(?:tree|beam|hook|banister"
        r"|rafters?|loft|neck)\b"
        r"|\b(?:got|have|has)\s+the\s+means\b(?!\s+(?:to|of|for)\b)",
        "means",
        topic=True,
    ),
    _r(
        "overdose",
        "urgent",
        rf"\b(?:took|taken|swallowed|downed)\s+{_QTY}\s*(?:[\w'-]+\s+){{0,3}}?{_DRUG}"
        r"|\bswallowed\s+(?:everything|all\s+of\s+(?:them|it)|them\s+all)"
        r"|\b(?:just|have\s+just|'ve\s+just)\s+(?:overdosed|taken\s+an\s+overdose|od'?d)\b"
        rf"|\b(?:i'?m|im|i\s+am)\s+(?:taking|swallowing)\s+{_QTY}\s*(?:[\w'-]+\s+){{0,3}}?{_DRUG}",
        "act",
    ),
    _r(
        "goodbye",
        "urgent",
        r"\b(?:this\s+is\s+)?my\s+(?:very\s+)?(?:last|final)\s+(?:message|post|text|words|note)"
        r"(?=\s*(?:[.!,;:]|$|ever\b|to\s+(?:you|anyone|everyone|all)))"
        r"|\b(?:goodbye|bye|farewell)\s+(?:everyone|everybody|world|forever|cruel\s+world|for\s+(?:good|ever"
        r"|the\s+last\s+time))\b(?![\s,.!]*(?:see\s+you|talk\s+(?:to\s+you\s+)?(?:soon|later|tomorrow)|until|till"
        r"|have\s+a|enjoy|happy|merry|good\s?night|x+\b))"
        r"|\bby\s+the\s+time\s+(?:anyone|you|someone|somebody|they|people|my\s+\w+)\s+(?:reads?|sees?|finds?|gets?"
        r"|hears?)\s+(?:this|it)"
        r"|\bi'?ll\s+be\s+gone\s+(?:by|soon|before|tomorrow|tonight)|\bi'?ll\s+be\s+gone(?=\s*(?:[.!]|$))"
        r"|\bknowing\s+it\s+was\s+(?:a\s+|my\s+|the\s+)?(?:last\s+|final\s+)?goodbye|\b(?:last|final)\s+goodbyes\b"
        # A farewell with an apology or love to all, and no "see you" or "tomorrow" anywhere after it.
        r"|\b(?:goodbye|farewell)\b(?=[^\n]{0,80}?\b(?:i\s+love\s+you\s+all|love\s+you\s+all|i'?m\s+(?:so\s+)?sorry"
        r"|forgive\s+me)\b)(?![\s\S]*\b(?:see\s+you|talk\s+(?:to\s+you\s+)?(?:soon|later|tomorrow)|tomorrow|next\s+week"
        r"|later)\b)",
        "goodbye",
        person="none",
        inner_neg=True,
    ),
    _r(
        "goodbye",
        "urgent",
        r"\b(?:not\s+(?:going\s+to|gonna)|won'?t|will\s+not)\s+be\s+(?:around|here|alive)\s+(?:much\s+longer"
        r"|for\s+(?:much\s+)?longer|for\s+long|tomorrow|any\s?more)",
        "goodbye",
        third_drop=True,
        inner_neg=True,
    ),
    _r(
        "plan",
        "urgent",
        r"\bsuicide\s+(?:note|letter)s?\b|\b(?:goodbye|farewell)\s+(?:notes?|letters?)\b"
        r"|\b(?:wrote|written|writing|write|left|leaving)\s+(?:a\s+|my\s+|some\s+|the\s+)?(?:letters?|notes?)\b"
        r"[^.!?\n]{0,50}?\b(?:why\s+i\s+(?:had\s+to|have\s+to|did|couldn'?t|can'?t|am\s+going)|goodbye"
        r"|for\s+when\s+i'?m\s+gone|after\s+i'?m\s+gone)"
        r"|\b(?:painless|easiest|quickest|best|surest|fastest)\s+ways?\s+to\s+(?:die|kill\s+myself|end\s+(?:it|my\s+life))"
        r"|\bhow\s+to\s+(?:kill\s+myself|end\s+my\s+life|commit\s+suicide)"
        rf"|\bhow\s+(?:many|much)\s+(?:[\w-]+\s+)?{_DRUG}\b[^.!?\n]{{0,25}}?\b(?:to\s+(?:kill|die|end|overdose|do\s+it)|fatal"
        r"|lethal|deadly|would\s+kill)"
        r"|\b(?:the\s+)?(?:day|night|time|moment|date)\s+(?:when\s+)?i\s+(?:finally\s+)?(?:end\s+it|kill\s+myself"
        r"|end\s+my\s+life|die|take\s+my\s+(?:own\s+)?life)\b",
        "act",
        topic=True,
    ),
    # --- harm to others: urgent ---
    _r(
        "harm_to_others",
        "urgent",
        r"\b(?:going\s+to|gonna|want\s+to|wanna|will|'ll|ill|plan(?:ning)?\s+(?:to|on)|about\s+to|intend\s+to"
        r"|need\s+to|decided\s+to|how\s+i'?d|(?:think|thinking|thought)\s+(?:about|of)|fantasi[sz](?:e|ing)\s+about)"
        r"\s+(?:(?:really|just|finally|actually|seriously|go|how\s+i'?d)\s+)*(?:kill(?:ing)?|murder(?:ing)?|stab(?:bing)?"
        r"|shoot(?:ing)?|poison(?:ing)?|strangl(?:e|ing)|chok(?:e|ing)|beat(?:ing)?|hurt(?:ing)?|punch(?:ing)?"
        rf"|attack(?:ing)?|batter(?:ing)?|run(?:ning)?\s+over|knif(?:e|ing)|burn(?:ing)?|us(?:e|ing)\s+it\s+on)\s+{_OBJ}"
        r"(?!\s+(?:feelings|\w+'s\s+feelings)\b)(?!\s+at\s+(?:chess|cards|tennis|football|golf|pool|darts|poker"
        r"|scrabble|monopoly|fifa|squash|badminton|games?|(?:his|her|their)\s+own\s+game|a\s+game|the\s+game|\w+ing)\b)"
        r"|\b(?:going\s+to|gonna|want\s+to|wanna|will|'ll|ill)\s+(?:really\s+)?make\s+(?:him|her|them)\s+(?:all\s+)?"
        r"(?:suffer|pay\b(?!\s+for))",
        "others",
        person="agent",
        joke=True,
        trifle=True,
    ),
    _r(
        "harm_to_others",
        "urgent",
        r"\bshoot(?:ing)?\s+up\s+(?:my|the|a|our)\s+(?:school|college|uni|class|office|work(?:place)?|church|mosque"
        r"|synagogue|mall)"
        r"|\b(?:bring|take|carry|brought|took|bringing|taking)\s+(?:(?:a|my|the|his|her)\s+)?(?:\w+'s\s+)?(?:knife|gun|weapon"
        r"|rifle|pistol|blade|machete|bat)\s+(?:to|into)\s+(?:school|college|class|work|uni)"
        r"|\bpoison\s+(?:his|her|their|my\s+\w+'s)\s+(?:food|drink|tea|coffee|dinner)"
        rf"|\bwant\s+(?:{_OBJ})\s+dead\b",
        "others",
        person="agent",
    ),
    # --- thoughts of suicide, past attempts: concern ---
    _r(
        "suicidal_thoughts",
        "concern",
        r"\b(?:think(?:ing|s)?|thought(?:s)?|fantasi[sz]\w*|dream(?:ing)?|obsess\w*|urges?|tempted|feel(?:ing)?\s+like"
        r"|wonder(?:ing)?|consider(?:ing)?|contemplat\w*)\s+(?:about\s+|of\s+|to\s+|on\s+)?(?:what\s+it\s+would\s+be"
        rf"\s+like\s+to\s+|how\s+(?:to|i\s+would|i'?d)\s+|just\s+|about\s+)*{_ACT_ING}",
        "ideation",
    ),
    _r(
        "suicidal_thoughts",
        "concern",
        r"\bsuicidal\s+(?:thoughts?|feelings?|ideation|urges?|ideas?)|\bthoughts?\s+of\s+suicide"
        r"|\b(?:was|were|is|are|he'?s|she'?s|they'?re|has\s+been|used\s+to\s+be)\s+(?:\w+\s+)?suicidal\b"
        rf"|\btalk(?:s|ing|ed)?\s+(?:a\s+lot\s+)?about\s+(?:suicide|killing\s+{_REFL}|wanting\s+to\s+die"
        r"|ending\s+(?:it|(?:his|her|their|my)\s+life)|self[-\s]?harm)",
        "ideation",
        topic=True,
    ),
    _r(
        "suicidal_thoughts",
        "concern",
        rf"\b(?:kill(?:ing)?\s+{_REFL}|end(?:ing)?\s+{_POSS}\s+(?:own\s+)?life|tak(?:e|ing)\s+{_POSS}\s+own\s+life"
        rf"|commit(?:ting)?\s+suicide|hang(?:ing|ed|s)?\s+{_REFL}|hung\s+{_REFL}|kills\s+{_REFL}"
        rf"|(?:slit|slitting)\s+{_POSS}\s+(?:wrists?|throat))",
        "ideation",
        joke=True,
    ),
    _r(
        "past_attempt",
        "concern",
        rf"\b(?:tried|attempted|after\s+trying|since\s+trying)\s+to\s+{_FILL}{_ACT}"
        r"|\battempted\s+suicide|\bsurvived\s+(?:an?|my|the|another)\s+(?:suicide\s+)?attempt"
        r"|\b(?:my|a|an|previous|last|first|second)\s+suicide\s+attempt"
        r"|\b(?:my|the|last|previous|after\s+my|since\s+my|after\s+an)\s+overdose\b"
        r"|\b(?:overdosed|took\s+an\s+overdose)\b(?!\s+on\s+(?:caffeine|coffee|sugar|chocolate|cake|carbs|tv|netflix"
        r"|love|food|sweets|candy))",
        "past",
        joke=True,
    ),
    # --- self-harm without present intent: concern ---
    _r(
        "self_harm",
        "concern",
        rf"\b(?:hurt|hurting|harm(?:ed|ing)?|hit|hitting|punch(?:ed|ing)?|burn(?:ed|t|ing)?|cut|cutting|scratch(?:ed|ing)?"
        rf"|bite|bit|biting|starv(?:e|ed|ing)|punish(?:ed|ing)?|bruis(?:e|ed|ing))\s+{_REFL}"
        r"(?!\s+by\s+(?:over\w+|worry\w*|think\w*|compar\w*|check\w*|stay\w*|lett\w*|hold\w*|going|push\w*|work\w*"
        r"|trying|talking|texting|reading|looking))"
        rf"|\b(?:cut|cutting|burn(?:ed|t|ing)?|scratch(?:ed|ing)?|slash(?:ed|ing)?|slit)\s+{_POSS}\s+(?:arms?|legs?"
        r"|wrists?|thighs?|skin|stomach|hips?|body|hands?)"
        r"|\b(?:been|started|start|keep|kept|still)\s+cutting\b(?=\s*(?:again|myself|when|at\s+\d|in\s+year|after|because"
        r"|to\s+cope|[.!?,;]|$))"
        r"|\bcut\s+(?:once|twice|again|deeper|\d+\s+times)"
        rf"|\b(?:cuts|scars|burns|marks)\b[^.!?\n]{{0,25}}?\bi\s+(?:did|made|gave)\s+(?:to\s+)?{_REFL}"
        r"|\bmake\s+myself\s+(?:throw\s+up|sick|vomit|purge|bleed)"
        r"|\bon\s+purpose\s+so\s+(?:it|that\s+it)\s+would\s+hurt|\bso\s+(?:it|that\s+it)\s+would\s+hurt\b"
        r"|\bto\s+punish\s+myself"
        r"|\bself[-\s]?harm(?:s|ed|ing)?\b|\burges?\s+to\s+(?:cut|self[-\s]?harm|hurt\s+myself)",
        "self_harm",
        joke=True,
        topic=True,
        accident=True,
    ),
    # --- passive ideation: concern ---
    _r(
        "passive_ideation",
        "concern",
        r"\bbetter\s+off\s+(?:dead|gone|without\s+(?:me|him|her|them))\b|\bbetter\s+without\s+(?:me|him|her|them)\b"
        r"|\b(?:better|happier|easier)\s+(?:off\s+)?if\s+(?:i|he|she|they)\s+(?:just\s+)?(?:didn'?t\s+wake\s+up|never\s+woke\s+up"
        r"|wasn'?t|weren'?t|was\s+not|were\s+not"
        r"|was\s+gone|were\s+gone|didn'?t\s+exist|died|was\s+dead|were\s+dead|never\s+existed)"
        r"|\bif\s+i\s+(?:died|was\s+gone|were\s+gone|disappeared|wasn'?t\s+(?:here|around|alive)|was\s+dead"
        r"|were\s+dead|killed\s+myself|was\s+not\s+here)\b[^.!?\n]{0,40}?\b(?:nobody|no\s+one|no-one|anyone|care"
        r"|notice|miss)\b"
        r"|\b(?:nobody|no\s+one|no-one|anyone|who)\s+(?:would|will|'d)\s+(?:even\s+)?(?:care|notice|miss\s+me)\b"
        r"[^.!?\n]{0,30}?\bif\s+i\s+(?:died|was\s+gone|were\s+gone|disappeared|wasn'?t\s+here|was\s+dead)"
        r"|\bwould\s+(?:anyone|anybody|people|they|you)\s+(?:even\s+)?(?:care|notice|miss\s+me)\b[^.!?\n]{0,30}?\bif\s+i\s+"
        r"(?:died|was\s+gone|were\s+gone|disappeared|wasn'?t\s+here|was\s+dead|killed\s+myself)"
        r"|\bwish(?:es|ed)?\s+(?:i|he|she|they)\s+(?:was|were|had)\s+(?:never\s+(?:been\s+)?born|dead\b(?!\s+(?:good|easy"
        r"|nice|funny|serious|keen|set|lucky|proud|happy|chuffed|excited|hard|right|brilliant|clever|posh|fit))"
        r"|not\s+(?:alive|born|here)|never\s+existed)"
        r"|\bwish(?:es|ed)?\s+(?:i|he|she|they)\s+(?:wasn'?t|weren'?t)\s+(?:alive|born|here|around)"
        r"|\bwish(?:es|ed)?\s+(?:i|he|she|they)\s+(?:could|would)\s+(?:just\s+)?(?:die|not\s+exist|stop\s+existing"
        r"|fall\s+asleep\s+forever|sleep\s+forever|go\s+to\s+sleep\s+and\s+never\s+wake\s+up|not\s+wake\s+up"
        r"|never\s+wake\s+up)"
        r"|\b(?:hope|hoping|pray|praying|wish|wishing)\s+(?:that\s+)?(?:i|i'll|i\s+will)\s+(?:don'?t|do\s+not|never"
        r"|won'?t|will\s+not|didn'?t)\s+wake\s+up\b(?!\s+(?:late|early|in\s+time|on\s+time|too|before|until|till))"
        r"|\b(?:go\s+to\s+sleep|fall\s+asleep|sleep)\s+and\s+(?:never|not)\s+wake\s+up|\b(?:fall\s+asleep|sleep|go\s+to\s+sleep)"
        r"\s+forever|\b(?:could|would)\s+(?:just\s+)?(?:not|never)\s+wake\s+up"
        r"|\b(?:hope|hoping|pray|praying|wish|wishing)\s+(?:that\s+)?(?:i'?ll|i\s+will|i)\s+(?:get\s+(?:sick|ill"
        r"|cancer|hit)\s+and\s+)?die\b"
        r"|\b(?:hope|hoping|pray|praying|wish|wishing)\s+(?:that\s+)?(?:a|the|some)\s+(?:[\w-]+\s+){0,2}?(?:would|will"
        r"|'d)\s+(?:hit|kill|run\s+over|crash\s+into)\s+me\b"
        r"|\b(?:want|wanna|wish|like|longing|need)\s+(?:to\s+|i\s+could\s+|i\s+would\s+)?(?:just\s+)?(?:disappear"
        r"|vanish|stop\s+existing|not\s+exist|cease\s+to\s+exist)\b(?!\s+(?:into|to|for|from|off|under|with|in|on|at"
        r"|until|till|somewhere|abroad))"
        r"|\b(?:don'?t|do\s+not)\s+want\s+to\s+(?:be\s+alive|exist|(?:be\s+here|be\s+around)\s+any\s?more"
        r"|wake\s+up\b(?!\s+(?:early|late|at|so|before|for|in\s+the|to\s+(?:the|my|an?)\b)))"
        r"|\bdeserve\s+to\s+(?:die|be\s+dead)\b|\b(?:don'?t|do\s+not)\s+care\s+(?:if|whether)\s+i\s+(?:die|live|wake\s+up"
        r"|am\s+alive)"
        r"|\b(?:rather|prefer\s+to)\s+(?:not\s+(?:be\s+alive|exist|be\s+here|live)|be\s+dead)\b(?!\s+than)"
        r"|\b(?:easier|better|simpler)\s+(?:for\s+(?:everyone|everybody|them|my\s+\w+)\s+)?(?:to\s+)?not\s+(?:to\s+)?"
        r"(?:exist|be\s+(?:here|alive|around)|wake\s+up|live)\b"
        r"|\bonly\s+(?:thing|reason|one|person)\s+(?:that'?s\s+)?(?:stopping|keeping|holding|that\s+stops"
        r"|that\s+keeps)\s+me\b"
        r"|\bwants?\s+(?:it\s+all|everything|all\s+of\s+(?:this|it)|all\s+this|the\s+pain|this\s+pain|my\s+life|life)"
        r"\s+to\s+(?:just\s+)?(?:stop|end|be\s+over)\b(?!\s+for\s+(?:a|one|just\s+a)\s+(?:minute|moment|second|bit|while|day"
        r"|week|night|hour))",
        "passive",
        inner_neg=True,
        past_cancels=True,
    ),
    # --- hopelessness: concern ---
    _r(
        "hopelessness",
        "concern",
        r"\bhopeless(?:ness)?\b(?!\s+(?:at|with|romantic|case|cause|when))"
        r"|\b(?:lost|losing|no|without|given\s+up|gave\s+up)\s+(?:all\s+)?hope\b(?!\s+(?:of|that|for\s+(?!me\b)))"
        r"|\bno\s+(?:way\s+out(?!\s+of\s+(?:the|this|that|my|our|his|her)\s+(?:contract|lease|deal|job|course|meeting|building"
        r"|car\s+park|room|maze|loan|mortgage|tenancy|game|level|queue))|future(?!\s+(?:in|for\s+(?:this|the|our)))|point\s+(?:in\s+)?(?:living|going\s+on|trying"
        r"|carrying\s+on|being\s+(?:here|alive)|anything|life|it\s+all|me)|reason\s+(?:for\s+me\s+)?to\s+(?:live"
        r"|keep\s+(?:going|living)|go\s+on|carry\s+on|be\s+here|stay|get\s+up|exist))"
        r"|\b(?:can'?t|cannot|don'?t)\s+see\s+(?:a|any|the)\s+(?:way\s+(?:out|forward)|future|point(?:\s+(?:in|of)\s+"
        r"(?:living|life|going\s+on|trying|anything|being\s+here))?(?=\s*(?:[.,!?]|$|any\s?more|in\s+|of\s+))|reason\s+to"
        r"\s+(?:live|go\s+on))"
        r"|\b(?:what'?s|whats|what\s+is)\s+(?:even\s+)?the\s+point\s+(?:of|in)\s+(?:me\s+)?(?:even\s+)?(?:trying|living"
        r"|being\s+(?:here|alive)|going\s+on|carrying\s+on|anything|it\s+all|life|existing|me)"
        r"|\b(?:what'?s|whats|what\s+is)\s+(?:even\s+)?the\s+point\s*(?:any\s?more)?\s*(?=[?.!]|$)"
        r"|\bcan'?t\s+(?:do|take|handle|bear|stand|cope\s+with)\s+(?:this|it|any\s+of\s+this|life)\s+(?:any\s?more"
        r"|much\s+longer)(?=\s*(?:[.!?]|$))"
        r"|\b(?:can'?t|cannot|don'?t\s+think\s+i\s+can|not\s+sure\s+i\s+can)\s+(?:keep\s+(?:going|living)|go\s+on"
        r"|carry\s+on|live\s+like\s+this)\b(?!\s+(?:to|with|on\b|at|back|for|into|about|a\b|the\b|working|doing|going))"
        r"(?:\s+(?:like\s+this|any\s?more))?"
        r"|\b(?:i'?m|i\s+am|feel(?:ing)?|felt)\s+(?:so\s+|completely\s+|totally\s+|utterly\s+|really\s+|just\s+)?"
        r"worthless\b"
        r"|\b(?:give|given|giving|gave)\s+up\s+on\s+(?:life|living|myself|everything|me)\b"
        r"|\b(?:feel\s+like|want\s+to|ready\s+to|about\s+to)\s+giv(?:e|ing)\s+up(?=\s*(?:[.!,]|$))"
        r"|\b(?:don'?t|do\s+not|haven'?t)\s+(?:got\s+|have\s+)?anything\s+(?:left\s+)?to\s+live\s+for"
        r"|\b(?:everything|life|it\s+all|my\s+life|living|existence|all\s+of\s+(?:it|this))\s+(?:is|feels|seems|'s"
        r"|has\s+become|became)\s+(?:so\s+|completely\s+|totally\s+|just\s+|utterly\s+)?(?:pointless|meaningless"
        r"|worthless|empty)"
        r"|\bnothing\s+(?:is\s+)?(?:ever\s+)?(?:going\s+to|gonna|will|'ll)\s+(?:ever\s+)?(?:get\s+better|change"
        r"|improve)|\b(?:things|life)\s+(?:will|'ll|are|is)\s+never\s+(?:going\s+to\s+)?get\s+better"
        r"|\bnothing\s+left\s+(?:for\s+me|to\s+live\s+for)|\bnothing\s+to\s+live\s+for"
        r"|\b(?:life|it|living|my\s+life)\s+(?:is\s+not|isn'?t|'s\s+not|is\s+no\s+longer|feels\s+not)\s+worth\s+(?:living|it\s+any\s?more)"
        r"|\bnot\s+worth\s+living\b"
        r"|\b(?:a|such\s+a|just\s+a|nothing\s+but\s+a)\s+burden\b"
        r"|\bdone\s+with\s+(?:everything|life|it\s+all|living|all\s+of\s+(?:it|this)|this\s+life|this\s+world)"
        r"|\b(?:tired|sick|exhausted)\s+of\s+(?:existing|living|life|being\s+alive|being\s+here|everything|it\s+all"
        r"|fighting|being\s+me)\b(?!\s+(?:at|about|in|to\s+do|with|on)\b)"
        r"|\b(?:don'?t|do\s+not|can'?t)\s+(?:see\s+myself|think\s+i'?ll|imagine)\s+(?:making|make)\s+it\s+(?:to|through"
        r"|past)",
        "hopeless",
        third_drop=True,
        inner_neg=True,
        past_cancels=True,
    ),
    # --- being harmed by someone: concern ---
    _r(
        "being_harmed",
        "concern",
        r"\b(?:hits?|hitting|slap(?:s|ped|ping)?|punch(?:es|ed|ing)?|kick(?:s|ed|ing)?|beats?|beating|beaten"
        r"|chok(?:e|es|ed|ing)|strangl(?:e|es|ed|ing)|push(?:es|ed|ing)?|shov(?:e|es|ed|ing)|grab(?:s|bed|bing)?"
        r"|thr(?:ew|ows|ow)|rap(?:e|ed|es|ing)|molest(?:s|ed|ing)?|touch(?:es|ed|ing)|abus(?:e|es|ed|ing)"
        r"|burn(?:s|ed|t)|lock(?:s|ed)|bit|bites|spat\s+on|spits\s+on|stalks?|stalked)\s+me\b"
        r"(?!\s+(?:up|at|to\s+it|off|in\s+(?:chess|cards|a\s+game|the\s+game|the\s+race)))"
        # "Hurt me" is mostly about feelings ("he really hurt me when he left"): only without such words.
        r"|(?<!really\s)(?<!deeply\s)(?<!so\s)\b(?:hurts?|hurting)\s+me\b(?!\s+(?:so\s+much|a\s+lot|deeply|badly|emotionally"
        r"|when|by|with\s+(?:his|her|their)\s+words|the\s+way|that|more|most|too|so|really|inside|up))",
        "harmed",
        person="victim",
        playful=True,
    ),
    _r(
        "being_harmed",
        "concern",
        r"\b(?:was|were|been|got|being|get|getting|am|is)\s+(?:sexually\s+|physically\s+)?(?:raped|assaulted|abused"
        r"|molested|attacked|beaten(?:\s+up)?|bullied|groomed|stalked|trafficked|strangled|choked)\b"
        r"|\babusive\s+(?:relationship|partner|husband|wife|boyfriend|girlfriend|marriage|home|household|parents?"
        r"|family|dad|father|mum|mom|mother|ex)\b",
        "harmed",
        topic=True,
    ),
    _r(
        "being_harmed",
        "concern",
        r"\bthreat(?:en(?:s|ed|ing)?)?\s+(?:to\s+)?(?:hurt|kill|hit|beat|stab|shoot|strangle|harm)\s+me\b"
        r"|\b(?:said|says|told\s+me|swore|swears|threatened|keeps\s+saying)\s+(?:that\s+)?(?:he|she|they)(?:'d|'ll"
        r"|\s+would|\s+will|\s+is\s+going\s+to|'s\s+going\s+to|\s+was\s+going\s+to)\s+(?:kill|hurt|hit|beat|stab"
        r"|shoot|strangle|harm)\s+me\b"
        r"|\b(?:tell|tells|telling|told)\s+me\s+to\s+(?:go\s+)?(?:kill\s+myself|kms|die|hang\s+myself"
        r"|end\s+(?:it|my\s+life))"
        r"|\b(?:gets|got|getting|becomes|is|was)\s+(?:so\s+|really\s+|very\s+)?(?:violent|physical)\s+(?:with\s+me"
        r"|when|if|again)"
        rf"|\b(?:he|she|they|my\s+(?:[\w-]+\s+)?{_PERSON})\s+(?:\w+\s+)?(?:is|gets|can\s+be|became|was)\s+(?:so\s+|really\s+"
        r"|very\s+)?violent\b"
        r"|\b(?:scared|afraid|terrified|frightened|worried)\s+(?:that\s+)?(?:he|she|they)(?:'ll|\s+will|'s\s+going\s+to"
        r"|\s+is\s+going\s+to|\s+might|'d|\s+would)\s+(?:kill|hurt|hit|beat|stab|strangle|rape)\s+me\b"
        r"|\b(?:controls|takes)\s+(?:all\s+)?(?:of\s+)?(?:my|the|our)\s+(?:money|phone|finances|bank)"
        r"|\b(?:won'?t|doesn'?t|does\s+not|will\s+not|never)\s+let\s+me\s+(?:see|talk\s+to|contact)\s+(?:my\s+)?"
        r"(?:friends|family|anyone|parents)|\bwon'?t\s+let\s+me\s+leave\s+the\s+house"
        r"|\b(?:forc(?:ed|es|ing)|made|makes|pressur(?:ed|es|ing))\s+me\s+(?:to\s+have\s+sex|into\s+(?:sex|having\s+sex)"
        r"|to\s+do\s+(?:sexual|things\s+i\s+didn'?t\s+want))|\bpush(?:es|ing)?\s+me\s+around|\b(?:throws?|threw|throwing)\s+(?:things|stuff|plates|bottles|objects|\w+)\s+at\s+me\b",
        "harmed",
        person="none",
        inner_neg=True,
    ),
    _r(
        "being_harmed",
        "concern",
        r"\b(?:scared|afraid|terrified|frightened)\s+(?:of\s+(?:my\s+(?:[\w-]+\s+)?"
        rf"{_PERSON}\b(?!'s)|him\b|her\b)|to\s+go\s+home|(?:of\s+)?what\s+(?:he|she|they)\s+(?:will|might|'ll)\s+do)",
        "harmed",
        person="none",
        joke=True,
    ),
    # --- other languages ---
    _r(
        "intent",
        "urgent",
        # Spanish
        r"\b(?:quiero|quisiera|deseo|me\s+quiero)\s+morir(?:me)?\b(?!\s+de\b)|\bme\s+(?:voy\s+a|quiero|vo\s+a)\s+"
        r"(?:matar|suicidar)|\b(?:matarme|suicidarme|quitarme\s+la\s+vida)\b|\b(?:acabar|terminar)\s+con\s+(?:mi\s+vida"
        r"|todo)|\bno\s+quiero\s+(?:seguir\s+)?vivir|\bme\s+tiro\s+(?:del|de\s+un|de\s+la|por\s+la|al)\b"
        # French
        r"|\bje\s+(?:veux|voudrais|vais)\s+(?:mourir|me\s+tuer|me\s+suicider|en\s+finir|(?:me\s+jeter|sauter)\s+(?:du|d'un"
        r"|de\s+la|par\s+la|sous))|\b(?:voy\s+a|quiero)\s+(?:saltar|tirarme)\s+(?:del|de\s+un|de\s+la|por\s+la|al|bajo)|\benvie\s+de\s+(?:mourir"
        r"|me\s+tuer|me\s+suicider|en\s+finir)|\bpour\s+en\s+finir|\bme\s+foutre\s+en\s+l'air"
        r"|\b(?:je\s+)?ne\s+veux\s+plus\s+vivre|\bj'ai\s+plus\s+envie\s+de\s+vivre|\bme\s+suicider\b"
        # German
        r"|\bich\s+(?:will|möchte|moechte|werde)\s+(?:sterben|nicht\s+mehr\s+leben|mich\s+(?:\w+\s+){0,3}?(?:umbringen"
        r"|töten|toeten|erhängen|erschießen|vergiften))|\b(?:von|vor)\s+(?:der|die|den|einen?|dem)\s+(?:brücke|zug|dach"
        r"|hochhaus)\s+springen|\bspringe\s+(?:\w+\s+)?(?:von|vor)\s+(?:der|den|die|dem)|\bbringe\s+mich\s+(?:\w+\s+){0,3}?um\b|\bmir\s+das\s+leben\s+nehmen|\bselbstmord\s+(?:begehen"
        r"|machen)|\bnicht\s+mehr\s+leben\s+(?:will|möchte)"
        # Portuguese
        r"|\bquero\s+morrer|\bvou\s+me\s+matar|\bme\s+matar\b|\bnão\s+quero\s+mais\s+viver|\btirar\s+minha\s+vida"
        # Italian
        r"|\bvoglio\s+morire|\bmi\s+voglio\s+(?:uccidere|ammazzare)|\bvoglio\s+(?:uccidermi|ammazzarmi)"
        r"|\bfarla\s+finita|\bnon\s+voglio\s+più\s+vivere|\btogliermi\s+la\s+vita"
        # Dutch
        r"|\bik\s+wil\s+(?:dood|sterven|niet\s+meer\s+leven|zelfmoord\s+plegen|mezelf\s+(?:van\s+kant\s+maken|doden))"
        r"|\bik\s+ga\s+(?:mezelf\s+(?:van\s+kant\s+maken|doden|ophangen)|zelfmoord\s+plegen)"
        # Polish
        r"|\bchc[eę]\s+(?:umrze[cć]|si[eę]\s+zabi[cć])|\bzabij[eę]\s+si[eę]|\bnie\s+chc[eę]\s+(?:ju[zż]\s+)?[zż]y[cć]"
        # Russian
        r"|хочу\s+умереть|убью\s+себя|покончу\s+с\s+собой|покончить\s+с\s+собой|не\s+хочу\s+(?:больше\s+)?жить",
        "act",
        joke=True,
        inner_neg=True,
    ),
    _r(
        "suicidal_thoughts",
        "concern",
        r"\b(?:pienso|pensando|pens[eé]|pensar)\s+en\s+(?:el\s+)?suicid\w*|\b(?:pensamientos|ideas)\s+suicidas"
        r"|\bpens\w*\s+(?:au\s+suicide|à\s+me\s+(?:tuer|suicider)|à\s+mourir)|\bidées\s+(?:suicidaires|noires)"
        r"|\bsuizidgedanken|\bselbstmordgedanken|\b(?:denke|dachte)\s+(?:\w+\s+)?(?:an|über)\s+(?:den\s+)?(?:selbstmord|suizid"
        r"|den\s+tod)|\bpensieri\s+suicidi|\bpensamentos\s+suicidas|\bpenso\s+(?:em|no|al)\s+suic[ií]dio",
        "ideation",
        inner_neg=True,
    ),
    _r(
        "intent",
        "urgent",
        r"\b(?:soy|estoy)\s+suicida|\bje\s+suis\s+suicidaire|\bich\s+bin\s+(?:suizidal|suizidgefährdet)"
        r"|\bsono\s+suicida|\bsou\s+suicida|\bestou\s+suicida",
        "act",
    ),
    _r(
        "means",
        "urgent",
        r"\b(?:pastillas|p[ií]ldoras)\s+(?:guardadas|juntadas|escondidas|acumuladas)|\b(?:guard[eé]|junt[eé]"
        r"|acumul[eé])\s+(?:las\s+|unas\s+)?(?:pastillas|p[ií]ldoras)"
        r"|\b(?:tabletten|pillen)\s+(?:gesammelt|gehortet|versteckt)|\b(?:gesammelt|gehortet)\s+(?:\w+\s+)?(?:tabletten"
        r"|pillen)"
        r"|\b(?:médicaments|medicaments|cachets|comprimés|pilules)\s+(?:de\s+côté|cachés|stockés)|\b(?:stocké|accumulé"
        r"|caché|gardé)\s+(?:des|mes)\s+(?:médicaments|cachets|comprimés|pilules)",
        "means",
    ),
    _r(
        "passive_ideation",
        "concern",
        r"\bmieux\s+sans\s+moi|\bmejor\s+sin\s+m[ií]\b|\bbesser\s+(?:dran\s+)?ohne\s+mich|\bmeglio\s+senza\s+di\s+me"
        r"|\bmelhor\s+sem\s+mim|\bojal[aá]\s+no\s+(?:despertara|despierte|despertar)|\bj'aimerais\s+ne\s+(?:pas|plus)"
        r"\s+me\s+réveiller|\b(?:nie\s+wieder|nicht\s+mehr)\s+aufwachen|\b(?:quiero|quisiera)\s+desaparecer"
        r"|\b(?:je\s+veux|j'aimerais|envie\s+de)\s+dispara[iî]tre|\bich\s+(?:will|möchte)\s+(?:einfach\s+)?verschwinden",
        "passive",
        inner_neg=True,
    ),
    _r(
        "hopelessness",
        "concern",
        r"\b(?:alles|das\s+leben|mein\s+leben|es)\s+(?:ist|scheint)\s+(?:\w+\s+)?(?:so\s+)?sinnlos|\bhoffnungslos"
        r"|\bkeine\s+hoffnung|\bkann\s+(?:einfach\s+|echt\s+)?nicht\s+mehr(?=\s*(?:[,.!?]|$))"
        r"|\bnada\s+tiene\s+sentido|\bno\s+le\s+veo\s+(?:el\s+)?sentido|\bla\s+vida\s+no\s+tiene\s+sentido|\b(?:ya\s+)?no\s+puedo\s+m[aá]s(?=\s*(?:[,.!?]|$))|\bsin\s+esperanza"
        r"|\bno\s+tengo\s+(?:futuro|esperanza|ganas\s+de\s+vivir)|\bperd[ií]\s+(?:toda\s+)?(?:la\s+)?esperanza"
        r"|\bplus\s+(?:aucun\s+|d')\s*espoir|\baucun\s+espoir|\bsans\s+espoir|\bje\s+n'en\s+peux\s+plus"
        r"|\brien\s+n'a\s+(?:plus\s+)?de\s+sens|\bla\s+vie\s+n'a\s+(?:plus\s+)?(?:aucun\s+)?sens"
        r"|\bn[aã]o\s+aguento\s+mais|\bsem\s+esperan[cç]a|\bnada\s+faz\s+sentido"
        r"|\bnon\s+ce\s+la\s+faccio\s+più|\bsenza\s+speranza|\bniente\s+ha\s+senso",
        "hopeless",
        inner_neg=True,
    ),
    _r(
        "being_harmed",
        "concern",
        r"\b(?:schl[äa]gt|schlug|verpr[üu]gelt|tritt|missbraucht|missbrauchte|bedroht|w[üu]rgt)\s+mich\b"
        r"|\bme\s+(?:pega|peg[oó]|pegaba|golpea|golpe[oó]|maltrata|viol[oó]|abus[oó]|amenaza)\b"
        r"|\bme\s+(?:frappe|frappait|battait|bat|viole|violait|menace)\b|\bmi\s+(?:picchia|picchiava|minaccia)\b"
        r"|\bme\s+(?:bate|batia|espanca)\b",
        "harmed",
        person="none",
    ),
    _r(
        "self_harm",
        "concern",
        r"\bje\s+me\s+(?:scarifie|mutile|coupe|fais\s+du\s+mal)|\bme\s+(?:corto|lastimo|hago\s+daño)\b"
        r"|\bich\s+(?:ritze|verletze)\s+mich|\bmi\s+taglio\b|\bme\s+corto\b",
        "self_harm",
    ),
    # "I'm going to do it tonight", "I'm not coming back": only beside another signal (see _veiled).
    _r(
        "intent",
        "urgent",
        r"\b(?:going\s+to|gonna|'ll|will|about\s+to|ready\s+to|planning\s+to)\s+(?:finally\s+|actually\s+|really\s+)?"
        r"(?:do\s+it|go\s+through\s+with\s+it|do\s+something\s+(?:stupid|drastic|dumb|silly)|make\s+it\s+happen"
        r"|use\s+(?:it|them)|hang\s+it|take\s+(?:them|it)(?:\s+all)?\b(?!\s+(?:to|for|out|back|home|with|away|off|into"
        r"|round|around|up|down|apart|seriously|personally|easy)))\b"
        r"|\band\s+jump\b(?=\s*(?:[.!]|$|off))"
        r"|\b(?:i'?m|im|i\s+am|i'?ll|i\s+will)\s+not\s+(?:be\s+)?coming\s+back|\bwon'?t\s+be\s+coming\s+back"
        r"|\bnever\s+coming\s+back|\bi'?m\s+(?:so\s+)?done(?=\s*[.!]\s*(?:goodbye|bye))"
        r"|\b(?:going\s+to|gonna|'ll|will|about\s+to|ready\s+to|want\s+to|wanna)\s+jump\b(?!\s+(?:on|in|at|into|ship|the"
        r"|through|up|over|for|to|around|ahead|back|rope|off\s+(?:the\s+)?(?:sofa|bed|bus|train|plane)))",
        "veiled",
        third_drop=True,
    ),
)

# --- context -----------------------------------------------------------------------------------------------

_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "`": "'", "“": '"', "”": '"', "„": '"', "«": '"', "»": '"'})
_CLAUSE_BREAK = _Pattern(
    r"[.!?;,:\n]|\b(?:but|and|because|though|although|however|except|then|pero|mais|aber|y|et|und|ma)\b", _FLAGS
)
_SENTENCE_BREAK = _Pattern(r"[.!?\n]+")
_NEGATOR = _Pattern(
    r"\b(?:not|never|no|nobody|noone|nothing|neither|nor|without|cannot|nah|nunca|jam[aá]s|ne|pas|jamais|nicht|nie"
    r"|niemals|kein\w*|n[aã]o|non|mai|dont|wont|cant|didnt|doesnt|isnt|wasnt|arent|werent|couldnt|wouldnt"
    r"|shouldnt|havent|hasnt|aint)\b|\b\w+n't\b",
    _FLAGS,
)
_NOT_NEGATION = _Pattern(
    r"\b(?:can'?t|cannot|couldn'?t)\s+stop\b|\bnot\s+(?:sure|joking|kidding|even|only)\b|\bno\s+longer\b"
    r"|\b(?:don'?t|do\s+not)\s+know\s+(?:why|if|how|what|whether|where)\b|\bnothing\s+(?:else|left)\b"
    r"|\bno\s+matter\b|\bnever\s+(?:again|felt|been\s+so)\b|\b(?:doesn'?t|does\s+not)\s+matter\b"
    r"|\b(?:no\s+one|nobody|no-one)\s+(?:cares|would|understands|listens|knows|notices)\b"
    r"|\bcan'?t\s+(?:take|do|cope|handle|go\s+on|keep\s+going|bear)\b|\bdidn'?t\s+work\b"
    r"|\bwithout\s+(?:him|her|them|anyone|anybody|my\s+\w+)(?=\s+knowing\b|\s*$)",
    _FLAGS,
)
#: Negations that belong to the act itself ("make sure I don't wake up", "I'm not coming back").
_OWN_NEGATION = _Pattern(
    r"\b(?:don'?t|do\s+not|never|not|won'?t)\s+(?:wake\s+up|coming\s+back|come\s+back|be\s+coming\s+back|exist)\b",
    _FLAGS,
)
#: A negation that is a streak, not a denial: "I haven't self harmed in a week".
_STREAK = _Pattern(r"^\s+(?:in|for)\s+(?:a|an|\d+|one|two|three|four|five|six|several|a\s+few)\b", _FLAGS)
_REPORTED_QUESTION = _Pattern(r"\b(?:asked|asks|ask|asking)\s+(?:me\s+)?(?:if|whether)\b", _FLAGS)
_TOLD_TO = _Pattern(r"\b(?:tell|tells|telling|told|says|said)\s+(?:me\s+)?to\s+(?:go\s+)?$", _FLAGS)
_PAST = _Pattern(r"\b(?:used\s+to|no\s+longer|back\s+when|in\s+the\s+past)\b", _FLAGS)
_LAUGH = _Pattern(
    r"\blo+l+\b|\blmf?ao+\b|\brofl\b|\b(?:ha){2,}h?\b|\b(?:he){2,}\b|\b(?:ja){2,}\b|\bjk\b|\bjust\s+kidding\b|\bmdr\b"
    r"|\bxd+\b|[😂🤣😆😅😹💀]",
    _FLAGS,
)
_MEDIA = _Pattern(
    r"\b(?:film|films|movie|movies|song|songs|lyrics?|book|books|novel|novels|article|articles|news|podcast|show"
    r"|shows|series|episode|documentary|game|games|scene|character|characters|lecture|lectures|dissertation|essay"
    r"|thesis|seminar|training|volunteer|prevention|rates|statistics|hamlet|poem|poetry|película|libro|canción"
    r"|chanson|livre|roman|lied|buch|filme?)\b|\b13\s+reasons\s+why\b",
    _FLAGS,
)
_ACCIDENT = _Pattern(
    r"\b(?:chopping|cooking|shaving|slicing|peeling|by\s+accident|accidentally|accident|tripp(?:ed|ing)|slipp(?:ed|ing)"
    r"|fell|playing|training|gym|football|rugby|hiking|gardening|ironing|baking|paper\s+cut"
    r"|on\s+(?:a|the|my)\s+(?:glass|tin|can|oven|stove|hob|iron|kettle|pan|grill|radiator|tray|barbecue|bbq|candle"
    r"|cooker|toaster))\b",
    _FLAGS,
)
_PLAYFUL = _Pattern(
    r"\b(?:by\s+accident|accidentally|as\s+a\s+joke|jokingly|playfully|for\s+fun|play[\s-]?fight\w*|messing\s+(?:about"
    r"|around)|in\s+(?:the|a)\s+game|at\s+(?:football|rugby|training|practice|chess|cards)|tickl\w*|wrestl\w*"
    r"|rough[\s-]?hous\w*|sparring|boxing|karate|judo|martial\s+arts"
    r"|with\s+(?:a|her|his|their|the)\s+(?:toy|toys|pillow|ball|snowball|water\s+pistol|nerf\s+gun)|emotionally"
    r"|with\s+(?:his|her|their)\s+words)\b",
    _FLAGS,
)
_TRIFLE = _Pattern(
    r"\b(?:ate|eats|eating|eaten|borrow\w*|took\s+my|takes\s+my|stole\s+my|nicked\s+my|finished\s+my|drank\s+my"
    r"|used\s+my|forgot|forgets|leftovers|cheese|jeans|charger|remote|snack\w*|biscuits?|chocolate|spoil\w*"
    r"|parking|tv|wifi|homework|late\s+again|emotionally|feelings|pride|ego)\b",
    _FLAGS,
)
_THIRD_REFL = _Pattern(r"\b(?:himself|herself|themselves|themself)\b|\b(?:his|her|their)\s+(?:own\s+)?life\b", _FLAGS)
_FIRST_IN_MATCH = _Pattern(r"\b(?:i|me|my|myself|mine|i'm|im|i've|ive|i'll|i'd)\b", _FLAGS)
_THIRD_IN_MATCH = _Pattern(
    r"\b(?:he|she|they|he's|she's|they're|hes|shes|him|wants|wishes|says|talks|harms|cuts|hangs|kills|hanged)\b"
    r"|\bis\s+(?:\w+\s+)?suicidal\b",
    _FLAGS,
)
_SUBJECT = _Pattern(
    r"(?P<first>\b(?:i|i'm|im|i've|ive|i'd|i'll|me|my|myself)\b)"
    r"|(?P<third>\b(?:he|she|they|he's|she's|they're|hes|shes|theyre|he'd|she'd|he'll|she'll|him|them|his|their"
    r"|someone|somebody|people)\b|\b(?:my|our|his|her|their|a|the|one\s+of\s+my)\s+(?:[\w-]+\s+)?"
    rf"{_PERSON}\b(?!')|\b{_PERSON}\b(?!'))"
    r"|(?P<other>\b(?:you|u|we|we're|we've)\b)"
    r"|(?P<thing>\b(?:it|that|this|which|what|life|reality|dogs?|cats?|pupp(?:y|ies)|kittens?|horses?|hamsters?"
    r"|parrots?|rabbits?|birds?|wasps?|bees?|snakes?|geese|goose|bab(?:y|ies)|toddlers?|newborn|dentist|physio"
    r"|hairdresser|tattooist|tattoo\s+artist)\b)",
    _FLAGS,
)
_ADVERBS = _Pattern(
    r"\s*(?:(?:just|really|still|always|also|even|sometimes|often|honestly|actually|kind\s+of|kinda|so|truly)\s+)*",
    _FLAGS,
)
_QUOTED = _Pattern(r"\"[^\"\n]{1,400}\"")

# --- amplifiers: never a signal alone, they make one urgent ---

_TIME = _Pattern(
    r"\b(?:tonight|tomorrow|today|tmrw|this\s+(?:weekend|week|evening|afternoon|morning|friday|saturday|sunday"
    r"|monday|tuesday|wednesday|thursday)|next\s+week|soon|right\s+now|later\s+today|in\s+(?:an|a\s+few|\d+)\s+"
    r"(?:hours?|minutes?|days?)|(?:by|on|this|next)\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|after\s+(?:my|the)\s+(?:shift|work|exams?|funeral|party|wedding|trip)"
    r"|after\s+(?:my\s+\w+|every(?:one|body)|they|he|she|the\s+kids)\s+(?:go|goes|went|leave|leaves|fall|falls|are|is)\s+"
    r"(?:to\s+(?:sleep|bed|work)|out|asleep|away|gone)|when\s+every(?:one|body)(?:'s|\s+is)"
    r"\s+(?:out|asleep|gone|away)|once\s+(?:every(?:one|body)|my\s+\w+|he|she|they)\s+(?:\w+\s+){0,2}?(?:leaves?|go"
    r"|goes|is|are|gone)|as\s+soon\s+as|when\s+i\s+get\s+(?:home|back|out)|on\s+the\s+anniversary"
    r"|(?:pick|set|chose|chosen|picked)\s+(?:a|the)\s+(?:day|date)|esta\s+noche|mañana|ce\s+soir|demain"
    r"|cette\s+nuit|heute(?:\s+nacht)?|morgen|stanotte|stasera|domani|amanhã|hoje)\b",
    _FLAGS,
)
_PLACE = _Pattern(
    r"\b(?:i'?m|im|i\s+am)\s+(?:\w+\s+)?(?:on|at|up\s+on|standing\s+on|sitting\s+on|by|near|on\s+top\s+of)\s+"
    r"(?:the|a|my|this)\s+(?:[\w-]+\s+)?(?:roof|rooftop|ledge|bridge|edge|cliff|cliffs|balcony|platform|tracks"
    r"|railway|top\s+floor|window\s*sill|car\s+park)\b"
    r"|\b(?:go|going|head(?:ing)?|walk(?:ing)?|driv(?:e|ing))\s+(?:to|down\s+to|up\s+to)\s+(?:the\s+)?(?:train\s+)?(?:tracks|railway"
    r"|bridge|cliffs?|cliff\s+edge|river|sea|roof|motorway)\b",
    _FLAGS,
)
_RESOLVE = _Pattern(
    r"\bi'?ve\s+(?:decided|made\s+up\s+my\s+mind)(?!\s+(?:to|that|on|what|whether|if|against|not)\b)"
    r"|\bi\s+(?:have\s+)?decided(?=\s*(?:[.!]|$))|\bi\s+mean\s+it\b|\bnot\s+(?:joking|kidding)\b|\bi'?m\s+serious\b"
    r"|\bmake\s+it\s+happen\b|\bmade\s+(?:my\s+)?peace\b|\bmind\s+is\s+made\s+up\b|\bno\s+(?:going|turning)\s+back\b"
    r"|\bya\s+lo\s+decid[ií]\b|\bc'est\s+d[ée]cid[ée]\b|\bich\s+habe\s+(?:mich\s+)?entschieden\b",
    _FLAGS,
)
_MEANS_WORD = _Pattern(
    rf"\b(?:{_DRUG}|{_BLADE}|guns?|rifle|pistol|shotgun|rope|noose|knife|bleach|pastillas|tabletten|médicaments)\b",
    _FLAGS,
)

#: Roles whose someone-else version is a third party's risk (concern), and roles that may escalate.
_SELF_ROLES = frozenset({"act", "means", "ideation", "past", "self_harm", "passive", "hopeless", "goodbye"})
_URGENT_SELF = frozenset({"act", "means", "goodbye"})
_WINDOW = 90


@dataclass(frozen=True)
class _Hit:
    rule: _Rule
    start: int
    end: int
    level: Level
    signal: str


def screen_text(text: str) -> Screening:
    """Screen one message: its level and the detections behind it (see the module docstring)."""
    if not text or text.isspace():
        return Screening("none", ())
    norm = text.translate(_APOSTROPHES)
    laughing = _LAUGH.search(norm) is not None
    quoted = [(m.start(), m.end()) for m in _QUOTED.finditer(norm)]
    hits: list[_Hit] = []
    seen: set[tuple[int, str, str]] = set()
    for index, rule in enumerate(_RULES):
        for match in rule.pattern.finditer(norm):
            hit = _judge(rule, match, norm, laughing, quoted)
            # The same phrase again (a long text repeating itself) says nothing new.
            if hit is not None and (key := (index, hit.signal, match[0].lower())) not in seen:
                seen.add(key)
                hits.append(hit)
    return _conclude(hits, text, norm)


def _judge(rule: _Rule, match: re.Match[str], norm: str, laughing: bool, quoted: list[tuple[int, int]]) -> _Hit | None:
    start, end = match.start(), match.end()
    if any(q0 < start and end <= q1 for q0, q1 in quoted):
        return None
    if rule.joke and laughing:
        return None
    window = norm[max(0, start - _WINDOW) : start]
    breaks = list(_CLAUSE_BREAK.finditer(window))
    before = window[breaks[-1].end() :] if breaks else window
    if _REPORTED_QUESTION.search(before) or (rule.role != "harmed" and _TOLD_TO.search(before)):
        return None
    if _negated(rule, before, match[0], norm[end : end + 30]):
        return None
    if rule.past_cancels and _PAST.search(before):
        return None
    left, right = _sentence(norm, start, end)
    sentence = norm[left:right]
    if rule.accident and _ACCIDENT.search(sentence):
        return None
    if rule.playful and _PLAYFUL.search(sentence):
        return None
    if rule.trifle and _TRIFLE.search(norm[end : end + 80].split(".")[0]):
        return None
    whose = _whose(rule, match[0], before, norm[left:start])
    if whose == "drop":
        return None
    media = _MEDIA.search(sentence) is not None
    if media and (rule.topic or whose == "third"):
        return None
    if whose == "third":
        if rule.third_drop or rule.role not in _SELF_ROLES | {"others", "harmed", "veiled"}:
            return None
        return _Hit(rule, start, end, "concern", "third_party")
    signal = rule.signal
    if rule.role == "act" and match.re.groupindex.get("plan") and match["plan"]:
        signal = "plan"
    return _Hit(rule, start, end, rule.level, signal)


def _negated(rule: _Rule, before: str, matched: str, after: str) -> bool:
    scope = before if rule.inner_neg else f"{before} {_OWN_NEGATION.sub(' ', matched)}"
    scope = _NOT_NEGATION.sub(" ", scope)
    if not _NEGATOR.search(scope):
        return False
    # "I haven't self harmed in a week" counts the days since, it does not deny.
    return not (rule.role == "self_harm" and _STREAK.match(after))


def _sentence(norm: str, start: int, end: int) -> tuple[int, int]:
    """The bounds of the sentence around a match (at most 200 characters either side)."""
    left = max((m.end() for m in _SENTENCE_BREAK.finditer(norm, max(0, start - 200), start)), default=0)
    right_match = _SENTENCE_BREAK.search(norm, end, end + 200)
    right = right_match.start() if right_match else min(len(norm), end + 200)
    return max(left, start - 200), right


def _whose(rule: _Rule, matched: str, before: str, sentence_before: str) -> str:
    """``self``, ``third`` or ``drop``: whose act a match describes (see the module docstring)."""
    if rule.person == "none":
        return "self"
    last = None
    for last in _SUBJECT.finditer(before):  # noqa: B007 - the last subject before the phrase decides
        pass
    if last is None and rule.person != "victim":
        # A clause without a subject ("... and won't be here much longer") has its sentence's.
        for last in _SUBJECT.finditer(sentence_before):  # noqa: B007
            pass
        before = sentence_before
    kind = last.lastgroup if last is not None else None
    if rule.person == "self":
        if _THIRD_REFL.search(matched):
            return "third"
        if _FIRST_IN_MATCH.search(matched):
            return "self"
        # A subject right before the phrase ("part of me just wants ...") decides; otherwise a verb of the
        # third person in it ("a girl in my class self harms").
        adjacent = last is not None and _ADVERBS.fullmatch(before[last.end() :])
        if not adjacent and _THIRD_IN_MATCH.search(matched):
            return "third"
    if rule.person == "victim":
        return "drop" if kind in ("thing", "first") else "self"
    if kind in (None, "first"):
        return "self"
    if kind == "third":
        return "third"
    if kind == "thing" and rule.person == "self":
        return "self"
    return "drop"


def _conclude(found_hits: list[_Hit], text: str, norm: str) -> Screening:
    # A phrase inside another of at least its level ("end my life" in "going to end my life") is not its own signal.
    hits = [
        h
        for h in found_hits
        if not any(
            o is not h
            and o.start <= h.start
            and h.end <= o.end
            and (o.end - o.start) > (h.end - h.start)
            and LEVELS.index(o.level) >= LEVELS.index(h.level)
            for o in found_hits
        )
    ]
    own = [h for h in hits if h.signal != "third_party"]
    veiled = [h for h in own if h.rule.role == "veiled"]
    self_hits = [h for h in own if h.rule.role in _SELF_ROLES]
    place = _PLACE.search(norm)
    time = _TIME.search(norm)
    resolve = _RESOLVE.search(norm)
    ideation = any(h.rule.role == "ideation" for h in self_hits)
    urgent_self = any(h.level == "urgent" and h.rule.role in _URGENT_SELF for h in self_hits)
    # A veiled act counts beside any other signal of the writer's own, a place or a means to do it.
    kept_veiled = veiled if (self_hits or place or (veiled and _MEANS_WORD.search(norm))) else []
    found: list[tuple[int, int, Level, str]] = [
        (h.start, h.end, h.level, h.signal) for h in hits if h.rule.role != "veiled" or h in kept_veiled
    ]
    amplifiers: list[tuple[re.Match[str] | None, bool, str]] = [
        (place, ideation, "plan"),
        (resolve, any(h.rule.role in ("ideation", "passive", "hopeless") for h in self_hits), "intent"),
        (time, ideation or urgent_self or bool(kept_veiled), "timeframe"),
    ]
    if (urgent_self or kept_veiled) and not any(h.signal == "means" for h in self_hits):
        amplifiers.append((_MEANS_WORD.search(norm), True, "means"))
    for match, applies, signal in amplifiers:
        if match is not None and applies:
            found.append((match.start(), match.end(), "urgent", signal))
    kept: list[tuple[int, int, Level, str]] = []
    for hit in sorted(found, key=lambda h: (-LEVELS.index(h[2]), -(h[1] - h[0]), h[0])):
        # A phrase inside another of at least its level (or overlapping one, for the same signal) says nothing more.
        if any(
            (s <= hit[0] and hit[1] <= e and LEVELS.index(lv) >= LEVELS.index(hit[2]))
            or (sig == hit[3] and s < hit[1] and hit[0] < e)
            for s, e, lv, sig in kept
        ):
            continue
        kept.append(hit)
    kept.sort(key=lambda h: (h[0], h[1]))
    detections = tuple(dict.fromkeys(Detection(lv, sig, text[s:e]) for s, e, lv, sig in kept))
    level: Level = "none"
    for detection in detections:
        level = higher(level, detection.level)
    return Screening(level, detections)


def screen_lines(lines: Iterable[str]) -> Iterator[dict[str, object]]:
    """One dict per input line (its line ending removed): the text, its level and its detections."""
    for line in lines:
        stripped = line.rstrip("\r\n")
        screening = screen_text(stripped)
        yield {
            "text": stripped,
            "level": screening.level,
            "detections": [
                {"level": d.level, "signal": d.signal, "evidence": d.evidence} for d in screening.detections
            ],
        }


#: Mood tags (PANAS items) that, strong enough, are a concern in themselves.
DISTRESS_TAGS = frozenset({"distressed", "afraid", "scared", "upset"})
#: The lowest intensity (scale 1-7) at which a distress tag counts.
DISTRESS_INTENSITY = 6
#: The question "Did I want to be pointed to safety or emergency help?"; its preferred answer "yes" counts.
SAFETY_HELP_QUESTION = "B18"


def annotation_screening(tags: Sequence[tuple[str, int | None]], answers: Mapping[str, tuple[str, str]]) -> Screening:
    """The participant's own annotations as signals.

    A mood tag of Distressed, Afraid, Scared or Upset at intensity 6 or more is a concern
    (``high_distress_tag``, evidence "Distressed 7"); wanting to be pointed to safety or emergency help
    (the preferred half of B18 is "yes") is a concern (``asked_for_safety_help``).
    """
    detections: list[Detection] = []
    for name, intensity in tags:
        if name.strip().lower() in DISTRESS_TAGS and intensity is not None and intensity >= DISTRESS_INTENSITY:
            detections.append(Detection("concern", "high_distress_tag", f"{name} {intensity}"))
    answer = answers.get(SAFETY_HELP_QUESTION)
    if answer is not None and len(answer) > 1 and answer[1] == "yes":
        detections.append(Detection("concern", "asked_for_safety_help", f"{SAFETY_HELP_QUESTION} preferred: yes"))
    return Screening("concern" if detections else "none", tuple(detections))


#: Moderation categories (OpenAI's moderation format) and what each adds: (category, level, signal).
MODERATION_CATEGORIES: tuple[tuple[str, Level, str], ...] = (
    ("self-harm/intent", "urgent", "model_self_harm_intent"),
    ("self-harm/instructions", "urgent", "model_self_harm_intent"),
    ("self-harm", "concern", "model_self_harm"),
    ("violence", "concern", "model_violence"),
    ("harassment/threatening", "concern", "model_violence"),
)


def with_moderation(screening: Screening, flagged: Mapping[str, bool]) -> Screening:
    """``screening`` plus what a moderation model flagged (its categories by name): the model can only add.

    Every detection of the offline screen stays, and the level is the higher of the two, so a model that
    misses something (or says nothing) never lowers what the rules found.
    """
    added: list[Detection] = []
    for category, level, signal in MODERATION_CATEGORIES:
        if flagged.get(category) and all(d.signal != signal for d in (*screening.detections, *added)):
            added.append(Detection(level, signal, f"moderation model: {category}"))
    if not added:
        return screening
    level = screening.level
    for detection in added:
        level = higher(level, detection.level)
    return Screening(level, (*screening.detections, *added))
