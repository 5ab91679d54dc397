"""Question answering over the facts root: which assertions answer a question, by the names
and predicate words it spells (deterministic, no model).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from brainmap.analysis import fold, is_stopword, split_tokens
from brainmap.collectors import (
    CONTAINER_NAME,
    EXPOSES,
    HOSTNAME,
    IDENTITY_FILE,
    IMAGE,
    LISTED_VIEW,
    LISTENS_ON,
    OVERRIDE_LAYER,
    PART_OF,
    PORT,
    PUBLISHES,
    RANDOM_HOST_PORT,
    SERVES,
    USER,
    service_project,
    split_service,
)
from brainmap.facts.models import CONFIRMED, CONTRADICTED, HYPOTHESIS, PARTIAL
from brainmap.facts.text import label
from brainmap.keys import NodeKey, kind_of
from brainmap.store import FactRow

# Function words no shipped stopword list holds: the verb of "which host runs the backups"
# names a predicate, not a thing; Italian's, French's and Portuguese's "which".
_QUESTION_WORDS = frozenset("run runs quale quali quel qual quais".split())
# Question words that point at predicates, folded (lower case, no accents) as questions are:
# English, then Spanish, Italian, French, Portuguese and Chinese (two-character words: the
# analyzer cuts Chinese text into bigrams).
PREDICATE_WORDS: dict[str, set[str]] = {
    PUBLISHES: {
        "port", "publish", "publishes", "published", "expose", "exposed", "listen", "open",
        "reach", "url", "address", "bind", "bound",
        "puerto", "publica", "publicar", "publicado", "expone", "exponer", "escucha",
        "direccion",
        "porta", "porte", "pubblica", "pubblicare", "pubblicato", "espone", "esporre",
        "ascolta", "indirizzo",
        "publie", "publier", "ecoute", "adresse",
        "publicada", "expoe", "expor", "escuta", "endereco",
        "端口", "发布", "暴露", "监听", "地址",
    },
    LISTENS_ON: {
        "port", "listen", "listening", "bind", "bound", "open",
        "puerto", "escucha", "porta", "porte", "ascolta", "ecoute", "escuta", "端口", "监听",
    },
    SERVES: {
        "port", "url", "open", "serve", "address",
        "puerto", "direccion", "porta", "porte", "indirizzo", "adresse", "endereco",
        "端口", "地址",
    },
    EXPOSES: {
        "port", "expose", "exposes", "exposed",
        "puerto", "expone", "porta", "porte", "espone", "expoe", "端口", "暴露",
    },
    IMAGE: {
        "image", "docker", "imagen", "imagenes", "immagine", "immagini", "imagem", "imagens",
        "镜像",
    },
    "depends_on": {
        "depend", "dependency", "dependencies", "need", "require",
        "depende", "dependencia", "dipende", "dipendenza", "dipendenze", "dependance", "依赖",
    },
    HOSTNAME: {
        "hostname", "host", "address", "ip", "server", "name", "servidor", "hote", "serveur",
        "主机",
    },
    USER: {
        "user", "login", "username", "account", "usuario", "utente", "utilisateur", "compte",
        "用户",
    },
    PORT: {"port", "ssh", "puerto", "porta", "端口"},
    IDENTITY_FILE: {"key", "identity", "identityfile", "clave", "chiave", "cle", "chave", "密钥"},
    "network": {"network", "rete", "reseau", "rede", "网络"},
    "volume": {
        "volume", "mount", "data", "stored", "storage", "volumen", "donnee", "stockage", "dado",
        "存储",
    },
    "env_var": {
        "env", "environment", "variable", "setting",
        "entorno", "variabile", "ambiente", "environnement", "环境", "变量",
    },
    PART_OF: {"project", "part", "belong", "proyecto", "progetto", "projet", "projeto", "项目"},
    CONTAINER_NAME: {
        "container", "contenedor", "contenitore", "conteneur", "conteiner", "contentor", "容器",
    },
}  # fmt: skip
_RANK = {CONFIRMED: 0, PARTIAL: 1, HYPOTHESIS: 2, CONTRADICTED: 3}
# Words that say the word beside them is a name: only there may a function word or a question
# word ("es", "ai", "port", "image") name a thing. Chinese puts the name before ("ai 服务"),
# the Romance languages after ("il servizio ai", "le service web"), English either way ("the
# es service", "the project shop"); the side after the name is read first.
KIND_WORDS_AFTER_NAME = frozenset("service container project 服务 容器 项目".split())
KIND_WORDS_BEFORE_NAME = frozenset(
    "service container project servicio servizio contenedor contenitore proyecto progetto "
    "conteneur projet servico conteiner contentor projeto projecto".split()
)
_KIND_WORDS = KIND_WORDS_AFTER_NAME | KIND_WORDS_BEFORE_NAME
# the kind words that say the name beside them is a project's (the others: a service's)
_PROJECT_WORDS = frozenset("project 项目 proyecto progetto projet projeto projecto".split())
# kind words' plurals that :func:`_singular` does not fold
_KIND_PLURALS = {
    "servizi": "servizio", "contenitori": "contenitore", "progetti": "progetto",
    "contenedore": "contenedor", "conteinere": "conteiner", "contentore": "contentor",
}  # fmt: skip
# When a question's words point at several port predicates alike ("the port of X"), a
# subject's answer is its best of them: what it publishes on the host before what it only
# exposes to its network, unless the question asks what it exposes.
_PORT_PRECEDENCE = {PUBLISHES: 0, LISTENS_ON: 1, SERVES: 1, PORT: 1, EXPOSES: 2}

Name = tuple[str, ...]  # a name as the tokens a question spells it with


def _folded(text: str) -> list[str]:
    """The analyzer's tokens (any script; Chinese as bigrams), folded as the index folds."""
    return [fold(token) for token in split_tokens(text)]


def _function_word(token: str) -> bool:
    return is_stopword(token) or token in _QUESTION_WORDS


def words(text: str) -> set[str]:
    """Content words, with a plural's ``s`` folded (backups = backup, ports = port)."""
    return {_singular(t) for t in _folded(text) if not _function_word(t)}


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


# every word that points at a predicate, as a question's tokens are compared (folded, singular)
_PREDICATE_VOCABULARY = frozenset(_singular(w) for ws in PREDICATE_WORDS.values() for w in ws)
# the words that ask for the port inside the container (what a proxy in front of it needs),
# not the host's
_INSIDE_WORDS = frozenset(
    "container internal inside target contenedor interno dentro contenitore interna conteneur "
    "interne conteiner contentor 容器 内部".split()
)
# the words that ask what a service exposes, not which port in general
_EXPOSE_WORDS = frozenset(_singular(w) for w in PREDICATE_WORDS[EXPOSES]) - {
    _singular(w) for w in PREDICATE_WORDS[PORT]
}


def _name(text: str) -> Name:
    return tuple(_singular(t) for t in _folded(text))


@functools.lru_cache(maxsize=8192)  # asked once per fact and question: names repeat
def _names(key: str) -> tuple[tuple[Name, ...], Name, Name]:
    """The names a subject goes by, the folders above them, and its folder's whole path. A
    service: its project (the folder's whole path, each shorter tail, its last part) and its
    own name; a project: the same of its path; anything else: its label (and no path)."""
    node = NodeKey.parse(key)
    if node.kind == "service" and "/" in node.name:
        project, service = split_service(key)
        paths = _project_names(project)
        return (*paths, _name(service)), _name(project.rpartition("/")[0]), paths[0]
    if node.kind == "project":
        paths = _project_names(node.name)
        return paths, _name(node.name.rpartition("/")[0]), paths[0]
    return (_name(label(key)),), (), ()


def _image_name(image: str) -> str:
    """The name an image goes by, as a service may be called: ``image:redis:7`` -> redis,
    ``image:ghcr.io/org/paperless-ngx:2.1@sha256:...`` -> paperless-ngx."""
    ref = image.removeprefix("image:").partition("@")[0]
    path, _, tag = ref.rpartition(":")
    if path and "/" not in tag:  # a tag (registry:5000/app has a port, not a tag)
        ref = path
    return ref.rpartition("/")[2]


def _kinds_of(key: str, count: int) -> tuple[str, ...]:
    """What each of the ``count`` names of :func:`_names` is: a service's project names and
    its own, a project's names; "" for anything else."""
    if key.startswith("service:"):
        return ("project",) * (count - 1) + ("service",)
    if key.startswith("project:"):
        return ("project",) * count
    return ("",) * count


def _project_names(path: str) -> tuple[Name, ...]:
    """``infra/apps/store``: its whole path and each shorter tail of it, which a question may
    spell ("apps/store"), down to its folder ("store"). Read longest first, a path uses up
    its "apps", which then names no service called app."""
    parts = path.split("/")
    return tuple(dict.fromkeys(_name("/".join(parts[i:])) for i in range(len(parts))))


@dataclass
class _Question:
    tokens: list[str]
    spans: dict[Name, list[int]]  # the names it spells out, each where it starts
    free: set[str]  # content words outside those names
    kinds: dict[int, str]  # where a name starts beside a kind word: service or project
    # the names a service or container word says are a service's ("the web service")
    services: set[Name]

    def covered(self, names: tuple[Name, ...], kinds: tuple[str, ...] = ()) -> set[int]:
        """The question's tokens that spell the names: each name takes its own occurrence
        while there is one, so "minecraft service of minecraft" names a project and its
        service, and "minecraft" alone still names both. ``kinds``: what each name is
        (service, project): a name the question says is of another kind ("the api service"
        of a project also called api) does not count."""
        used: set[int] = set()
        out: set[int] = set()
        for i, name in enumerate(names):
            mine = kinds[i] if i < len(kinds) else ""
            fits = [s for s in self.spans.get(name, ())
                    if not mine or self.kinds.get(s, mine) == mine]  # fmt: skip
            if not fits:
                continue
            start = next((s for s in fits if s not in used), fits[-1])
            used.add(start)
            out.update(range(start, start + len(name)))
        return out


def _read(
    question: str,
    names: set[Name],
    aliases: frozenset[Name],
    literal: frozenset[Name],
    goes_by: dict[str, set[Name]],
) -> _Question:
    """Find the names a question spells out, longest first, each token in one name only:
    "flask-redis" uses up both of its words, so a question about flask-redis does not also
    name its redis service; "the redis service of flask-redis" does. ``aliases`` (the names
    of the images services run) are found after, in the tokens the names left: an image
    called shop-web does not take "shop web" from project shop's web service.

    A name made only of function words or question words ("es", "ai", "port", "image") is
    read as one only beside a word that says so, on the side its language puts it ("the es
    service", "servizio ai"): elsewhere those words ask the question ("server port in P";
    such a word still tells two subjects apart, see :func:`reply`). A name of several words
    the question writes as the library does (``literal``: "user-service") reads whole.

    A kind word beside a name says which kind of name it is when something of that kind goes
    by it (``goes_by``: kind -> names): "the shop service" of a library whose shop is only a
    project is about project shop; "the web services", about the services called web; "the
    db service of shop" is about a service all the same (shop is the project). A plural
    project word makes each project the question spells one ("the projects shop and
    gitea", though a service is called gitea too).
    """
    raw = _folded(question)
    tokens = [_KIND_PLURALS.get(t, t) for t in map(_singular, raw)]
    content = [not _function_word(t) for t in raw]
    # the False: past either end
    kind_after = [t in KIND_WORDS_AFTER_NAME for t in tokens] + [False]
    kind_before = [t in KIND_WORDS_BEFORE_NAME for t in tokens] + [False]
    plain = [
        c and t not in _PREDICATE_VOCABULARY and not (after or before)
        for c, t, after, before in zip(content, tokens, kind_after, kind_before, strict=False)
    ]
    taken: set[int] = set()
    spans: dict[Name, list[int]] = defaultdict(list)
    kinds: dict[int, str] = {}
    unlike: dict[int, Name] = {}  # names a service word is beside that no service goes by
    several_projects = False  # a plural project word: "the projects shop and gitea"

    def claim(candidates: set[Name] | frozenset[Name]) -> None:
        nonlocal several_projects
        longest = max(map(len, candidates), default=0)
        found: list[tuple[int, int, Name]] = []
        for i in range(len(tokens)):
            for j in range(i + 1, min(len(tokens), i + longest) + 1):
                name = tuple(tokens[i:j])
                # a name ending in a kind word reads whole even when each of its words asks
                # the question (image-service), unless the words before it name a thing of
                # their own ("the user service of bank": bank's user, not user-service)
                whole = j - i > 1 and kind_after[j - 1] and tuple(tokens[i : j - 1]) not in names
                whole = whole or name in literal
                spelt = whole or any(plain[i:j]) or kind_before[i - 1] or kind_after[j]
                if name in candidates and spelt:
                    found.append((-len(name), i, name))
        for neg_len, start, name in sorted(found):
            where = range(start, start - neg_len)
            if taken.isdisjoint(where):
                taken.update(where)
                spans[name].append(start)
                # the kind word beside a name says what it names, not what is asked: "the web
                # service of the shop project" asks nothing about projects
                end = start - neg_len
                side = next((k for k in (end, start - 1) if 0 <= k < len(tokens)
                             and k not in taken
                             and (kind_after[k] if k == end else kind_before[k])), None)  # fmt: skip
                if side is not None:
                    taken.add(side)
                    kind = "project" if tokens[side] in _PROJECT_WORDS else "service"
                    if name in goes_by[kind]:
                        kinds[start] = kind
                    elif kind == "service":
                        unlike[start] = name
                    several_projects |= kind == "project" and raw[side] != tokens[side]

    # an image's or a container's name written as the library writes it ("shop-db") before
    # the names of projects it begins with
    claim((aliases & literal) - names)
    claim(names)
    claim(aliases - names)
    projects = {n for n in spans if n in goes_by["project"]}
    for start, name in unlike.items():
        if projects - {name}:  # "the db service of shop" is shop's, not project db's
            kinds[start] = "service"
    if several_projects:  # each project the question spells is one of them
        for name in projects:
            for start in spans[name]:
                kinds.setdefault(start, "project")
    free = {t for i, t in enumerate(tokens) if content[i] and i not in taken}
    services = {name for name, starts in spans.items()
                if any(kinds.get(start) == "service" for start in starts)}  # fmt: skip
    return _Question(tokens, dict(spans), free, kinds, services)


def _asks(free: set[str]) -> dict[str, int]:
    """The predicates the question's words point at, each with how many words point at it:
    "port" points at four, "port ... publish" most at publishes."""
    out = {}
    for predicate, ws in PREDICATE_WORDS.items():
        hit = len({_singular(w) for w in ws} & free)
        if hit:
            out[predicate] = hit
    return out


def _strength(fact: FactRow, asks: dict[str, int], free: set[str]) -> int | None:
    """How strongly the question asks about a fact's predicate; None when off topic. A
    predicate of one's own (from a frontmatter list) is on topic when the question names it
    or the kind of its object ("which host ...")."""
    if not asks:
        return 0
    predicate = PUBLISHES if publishes(fact) else fact.predicate
    if predicate in asks:
        return asks[predicate]
    if fact.predicate in PREDICATE_WORDS:
        return None
    kind = kind_of(fact.object)
    return len((words(fact.predicate.replace("_", " ")) | {_singular(kind)}) & free) or None


def publishes(fact: FactRow) -> bool:
    """Whether a fact says what a service publishes: a host port, or a container port
    published on a host port docker picks at start (``ports: ["80"]``)."""
    return fact.predicate == PUBLISHES or (
        fact.predicate == EXPOSES and fact.props.get("published") == RANDOM_HOST_PORT
    )


@dataclass
class Reply:
    """What the facts root says to a question."""

    # the answering assertions, best first, then sides they conflict with
    facts: list[FactRow] = field(default_factory=list)
    # what the answer states: the asked subjects' values, none contradicted
    lead: list[FactRow] = field(default_factory=list)
    # contradicted assertions about the same slots: the disagreement
    against: list[FactRow] = field(default_factory=list)
    # asked services their compose file declares without a port
    silent: list[str] = field(default_factory=list)
    # asked services whose extends could not all be read: (service, what it extends)
    unknown: list[tuple[str, str]] = field(default_factory=list)
    asked: set[str] = field(default_factory=set)  # the subjects the question names best
    # what compose files the question's view does not read say instead
    aside: list[FactRow] = field(default_factory=list)
    # (project, the service name asked, the services it has): a service it does not have
    missing: list[tuple[str, str, list[str]]] = field(default_factory=list)
    inside: bool = False  # asked for ports inside the container, not on the host
    # silent services that are reached otherwise (network_mode): how
    reached: dict[str, str] = field(default_factory=dict)


def _slots(fact: FactRow) -> set[str]:
    return set(fact.props.get("conflict", []))


def reply(question: str, facts: list[FactRow]) -> Reply:
    """The assertions that answer a question: those about the subjects the question names
    most completely (and of the predicates it asks about, when it asks about some),
    confirmed first, with the assertions they conflict with.

    Deterministic name matching over subjects, predicates and objects: the facts root is
    small and exact names matter more than meaning here.
    """
    # a service also goes by its image's name ("the redis of P": the broker running redis)
    # and its container's
    aliases: dict[str, set[Name]] = defaultdict(set)
    written: dict[Name, str] = {}  # each service's names as the library writes them
    for f in facts:
        if not f.subject.startswith("service:"):
            continue
        written[_names(f.subject)[0][-1]] = split_service(f.subject)[1]
        if f.predicate == IMAGE:
            text = _image_name(f.object)
        elif f.predicate == CONTAINER_NAME:
            text = label(f.object)
        else:
            continue
        alias = _name(text)
        if alias and alias != _names(f.subject)[0][-1]:
            aliases[f.subject].add(alias)
            written.setdefault(alias, text)
    # a project its compose file names (name:, COMPOSE_PROJECT_NAME) goes by its folder too
    folders = _project_folders(facts)
    known = {n for f in facts for n in _names(f.subject)[0] if n}.union(*folders.values())
    asked_as = question.casefold()  # a name written as the library writes it reads whole
    literal = frozenset(
        n for n, text in written.items() if len(n) > 1 and text.casefold() in asked_as
    )
    subjects = {f.subject for f in facts}
    # kind -> the names things of that kind go by
    goes_by: dict[str, set[Name]] = {
        "service": set().union(*aliases.values()), "project": set().union(*folders.values())
    }  # fmt: skip
    for subject in subjects:
        names = _names(subject)[0]
        for name, kind in zip(names, _kinds_of(subject, len(names)), strict=True):
            if kind:
                goes_by[kind].add(name)
    q = _read(question, known, frozenset().union(*aliases.values()), literal, goes_by)
    asks = _asks(q.free)
    # what is left once the predicate words are out names things partly ("nextcloud"); a
    # kind word names no thing ("which service publishes 8100": not project services/payments)
    loose = q.free - {_singular(w) for p in asks for w in PREDICATE_WORDS[p]} - _KIND_WORDS
    # "the container port of web" asks for a port, not for the container's name
    inside = bool(q.free & _INSIDE_WORDS) and bool(asks.keys() & _PORT_PRECEDENCE.keys())
    if inside:
        asks.pop(CONTAINER_NAME, None)

    # question words that do not ask what the question asks most name things partly: of the
    # api services of projects server and client, "the api service of server" asks about
    # the first; "which port does api publish" still asks about every api
    most = max(asks.values(), default=0)
    topical = {_singular(w) for p, n in asks.items() if n == most for w in PREDICATE_WORDS[p]}
    naming = q.free - loose - topical - _KIND_WORDS

    # a question that says what kind of thing it names ("the X service", "the P project")
    # asks about one project's service: a word that is a project's name elsewhere in it
    # ("the home assistant web ui": project web) does not
    by_project = "project" in q.kinds.values()
    marked = bool(q.services) or by_project
    Score = tuple[int, int, int, int, int, int]
    # the words that spell some service's own name do not name a project on their own:
    # "worker" names every service called worker alike, deep/worker's and the others
    service_words = set().union(*(
        q.covered(_names(s)[0][-1:], ("service",)) for s in subjects if s.startswith("service:")
    ))  # fmt: skip

    def score(key: str) -> Score:
        """Whether the question spells the name of its project on its own (of "the
        otel-collector service of blog", blog's services, not otel's otel-collector), the
        tokens its names spell (its image's name too), of them those its own names spell,
        other words of its names or folders the question has, question words among them
        that do not ask what the question asks most, and whether the question spells its
        project's whole path (of projects django and samples/django, "the web service of
        django" is the first's)."""
        names, above, whole = _names(key)
        kinds = _kinds_of(key, len(names))
        if key.startswith(("service:", "project:")):  # its project's folder names it too
            folder_names = folders.get(service_project(key).removeprefix("project:"), set())
            extra = tuple(n for n in folder_names if n not in names)
            cut = len(names) - (key.startswith("service:"))
            names = names[:cut] + extra + names[cut:]
            kinds = kinds[:cut] + ("project",) * len(extra) + kinds[cut:]
        own = {w for n in (*names, above) for w in n}
        projects = tuple(n for n, kind in zip(names, kinds, strict=True) if kind == "project")
        in_project = marked and bool(
            q.covered(projects, ("project",) * len(projects)) - service_words
        )
        by_image = tuple(aliases.get(key, ()))
        spelt = q.covered(names, kinds)
        also = q.covered(names + by_image, kinds + ("service",) * len(by_image))
        whole_path = bool(whole) and bool(q.covered((whole,), ("project",)))
        return (int(in_project), len(also), len(spelt), len(loose & own), len(naming & own),
                int(whole_path))  # fmt: skip

    def named_at_all(score: Score) -> bool:
        return bool(score[1] or score[3])

    subject_score = {subject: score(subject) for subject in subjects}
    scored: list[tuple[Score, int, FactRow]] = []
    for fact in facts:
        strength = _strength(fact, asks, q.free)
        if strength is None:
            continue
        mine, theirs = subject_score[fact.subject], score(fact.object)
        # a project it belongs to counts only when the question asks that most: "the
        # project's web service" asks web's port; "which project does port 8082 belong to"
        if strength < most and kind_of(fact.object) == "project":
            theirs = (0, 0, 0, 0, 0, 0)
        a, b, c, d, e = (m + t for m, t in zip(mine[:5], theirs[:5], strict=True))
        fact_score = (a, b, c, d, e, mine[5])
        if named_at_all(fact_score):
            scored.append((fact_score, strength, fact))
    # a subject the question names best counts even when nothing answers about it: asked
    # about a service that publishes nothing, its siblings are not the answer
    named = [s for s in subject_score.values() if named_at_all(s)]
    best = max([s for s, _, _ in scored] + named, default=None)
    if best is None:
        return Reply()
    hits = [(strength, f) for score, strength, f in scored if score == best]
    hits.sort(key=lambda h: (-h[0], _RANK.get(h[1].confidence, 9), h[1].library,
                             h[1].subject, h[1].object))  # fmt: skip
    asked = {s for s, score in subject_score.items() if score == best}
    asked |= {f.subject for _, f in hits}
    # with the project said ("the otel-collector of the blog project"), any service name
    # the question spells is asked of it
    services = q.services | ({n for n, starts in q.spans.items()
                              if all(q.kinds.get(at) != "project" for at in starts)}
                             if by_project else set())  # fmt: skip
    missing = _missing(services, asked, aliases, subject_score.keys(), written)
    if missing:  # its siblings' facts are not the answer
        return Reply(asked=asked, missing=missing)
    in_view, replaced = _compose_view(q.free, facts)
    standing: list[tuple[int, FactRow]] = []  # not contradicted, in the question's view
    elsewhere: list[tuple[int, FactRow]] = []  # not contradicted, in compose files aside
    for strength, f in hits:
        if f.confidence != CONTRADICTED and not replaced(f):
            (standing if in_view(f) else elsewhere).append((strength, f))
    top = max((s for s, _ in standing), default=None)
    # what a service only exposes counts too when asked for its port inside the container
    exposing = bool(q.free & _EXPOSE_WORDS) or inside
    lead = _best_port_predicates([f for s, f in standing if s == top], exposing)
    most_elsewhere = max((s for s, _ in elsewhere), default=None)
    aside = _best_port_predicates([f for s, f in elsewhere if s == most_elsewhere], exposing)
    # asked services whose extends docker compose would merge more into than was read
    unread, network = _why_unsaid(facts, asked)
    unknown = sorted(unread.items())
    silent: list[str] = []
    if asks.get(PUBLISHES) == max(asks.values(), default=0) and not any(
        publishes(f) or (exposing and f.predicate == EXPOSES) for _, f in standing
    ):  # asked what a service publishes, and nothing says it publishes anything
        declared = {f.subject for f in facts if "compose" in f.props.get("how", ()) and in_view(f)}
        silent = sorted(s for s in asked if s.startswith("service:") and s in declared
                        and s not in unread)  # fmt: skip
        if silent or unknown:
            lead = []
    answering = [f for _, f in hits]
    if not exposing:  # what a service publishes is its answer: not also what it exposes
        publishing = {f.subject for _, f in standing if publishes(f)}
        answering = [
            f for f in answering
            if f.predicate != EXPOSES or publishes(f) or f.subject not in publishing
        ]  # fmt: skip
    slots = set().union(*(_slots(f) for f in answering)) if answering else set()
    seen = {id(f) for f in answering}

    def shared(f: FactRow, with_slots: set[str]) -> set[str]:
        """The slots ``f`` shares; a sibling service shares no project-wide one (what the
        project's docs say against its ports is about neither)."""
        common = _slots(f) & with_slots
        if f.subject.startswith("service:") and f.subject not in asked:
            common = {s for s in common if not _project_wide(s)}
        return common

    # the other sides of their conflicts; a sibling that won beside the asked subject is not
    # one, but one that won where the asked subject lost is
    lost = set().union(*(_slots(f) for f in answering if f.confidence == CONTRADICTED))
    peers = [
        f for f in facts
        if id(f) not in seen and shared(f, slots) and _strength(f, asks, q.free) is not None
        and (f.confidence == CONTRADICTED or not f.props.get("resolved_by") or shared(f, lost))
    ]  # fmt: skip
    peers.sort(key=lambda f: (_RANK.get(f.confidence, 9), f.library, f.subject, f.object))
    lead_slots = set().union(*(_slots(f) for f in lead)) if lead else slots
    against = [
        f for f in answering + peers if f.confidence == CONTRADICTED and shared(f, lead_slots)
    ]
    return Reply(
        facts=answering + peers, lead=lead, against=against, silent=silent, unknown=unknown,
        asked=asked, aside=aside, inside=inside,
        reached={s: network[s] for s in silent if s in network},
    )  # fmt: skip


def _project_folders(facts: list[FactRow]) -> dict[str, set[Name]]:
    """Project -> the names of the folders its compose files are in (the whole path and each
    tail), where they differ from its own: a project that ``name:`` names is asked about by
    its folder's name too ("the frontend service of rusty" for react-rust-postgres in
    rusty/)."""
    out: dict[str, set[Name]] = defaultdict(set)
    for f in facts:
        if f.predicate != PART_OF or not f.subject.startswith("service:"):
            continue
        project = split_service(f.subject)[0]
        for cited in f.props.get("evidence", ()):
            if cited.get("method") != "compose" or cited.get("included") or cited.get("extended"):
                continue
            folder = str(cited.get("path", "")).rpartition("/")[0]
            if folder:
                out[project].update(set(_project_names(folder)) - set(_project_names(project)))
    return out


def _why_unsaid(facts: list[FactRow], asked: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Of the asked services, why what their compose files say is not all: an extends that
    could not be read whole (``unread``), another's network or the host's (``network``)."""
    found: dict[str, dict[str, str]] = {"unread": {}, "network": {}}
    for f in facts:
        if f.predicate == PART_OF and f.subject in asked:
            for cited in f.props.get("evidence", ()):
                for key, why in found.items():
                    if cited.get(key):
                        why[f.subject] = str(cited[key])
    return found["unread"], found["network"]


def _missing(
    services: set[Name],
    asked: set[str],
    aliases: dict[str, set[Name]],
    subjects: Iterable[str],
    written: dict[Name, str],
) -> list[tuple[str, str, list[str]]]:
    """When the question calls a name of some service of the library a service's ("the db
    service of shop") and the subjects it names best are services of projects none of whose
    services goes by that name (its own, its image's, its container's, or one with the name
    in it: collector for otel-collector, redis for redis-stack-server), each such project,
    the name as the library writes it, and the services it has: what to answer instead of
    their ports. A word no service goes by ("the running services", "qué servicio usa") is
    not taken for one."""
    subjects = [s for s in subjects if s.startswith("service:")]
    known = {_names(s)[0][-1] for s in subjects}.union(*aliases.values())
    services = services & known
    if not services or not asked or not all(s.startswith("service:") for s in asked):
        return []

    def goes_by(subject: str, name: Name) -> bool:
        return any(
            own[i : i + len(name)] == name
            for own in (_names(subject)[0][-1], *aliases.get(subject, ()))
            for i in range(len(own) - len(name) + 1)
        )

    out = []
    for project in sorted({split_service(s)[0] for s in asked}):
        mine = [s for s in subjects if split_service(s)[0] == project]
        if any(goes_by(s, name) for s in mine for name in services):
            return []
        wanted = " or ".join(sorted(written.get(name, " ".join(name)) for name in services))
        out.append((project, wanted, sorted({split_service(s)[1] for s in mine})))
    return out


def _compose_view(
    free: set[str], facts: list[FactRow]
) -> tuple[Callable[[FactRow], bool], Callable[[FactRow], bool]]:
    """Whether a fact holds in the compose files a question is about (pairing's ``layers``:
    a fact without them holds in every view), and whether a file of that view replaced it
    (``!override``: it is no other view's answer either). ``docker compose up`` reads the
    base file and the override file; a variant the question names ("... in prod":
    compose.prod.yaml) is read with ``-f``, beside the base file and without the override
    file; ``COMPOSE_FILE`` in the project's ``.env`` names the files ``docker compose up``
    reads instead."""
    from brainmap.collectors.compose import layer_of

    # (library, project) -> its compose variants: of its facts' views and evidence files
    variants: dict[tuple[str, str], set[str]] = defaultdict(set)
    listing: set[tuple[str, str]] = set()  # where COMPOSE_FILE names what compose up reads
    for f in facts:
        key = (f.library, service_project(f.subject))
        held = variants[key]
        held.update(f.props.get("layers", ()))
        for cited in f.props.get("evidence", ()):
            if "up" in cited:  # a base file's, or one it includes (the base file's .env's)
                listing.add(key)
            if cited.get("method") == "compose" and not (
                cited.get("included") or cited.get("extended")
            ):
                held.add(layer_of(str(cited.get("path", "")).rpartition("/")[2]) or "")
    named = {
        key: {v for v in layers - {OVERRIDE_LAYER, ""} if _names_variant(v, free)}
        for key, layers in variants.items()
    }

    def view(f: FactRow) -> set[str]:
        """The views asked about in the fact's project: a variant it has that the question
        names, else ``docker compose up``'s (the override file's, unless ``COMPOSE_FILE``
        names others)."""
        key = (f.library, service_project(f.subject))
        return named.get(key) or {LISTED_VIEW if key in listing else OVERRIDE_LAYER}

    def in_view(f: FactRow) -> bool:
        layers = f.props.get("layers")
        return not layers or bool(view(f).intersection(layers))

    def replaced(f: FactRow) -> bool:
        return not in_view(f) and bool(view(f).intersection(f.props.get("replaced_in", ())))

    return in_view, replaced


def _names_variant(variant: str, free: set[str]) -> bool:
    """Whether a question's words name a compose variant: its words, or a word it begins
    ("production" for prod, "producción", "produzione"), of three letters or more."""
    words = set(_name(variant))
    if words <= free:
        return True
    return len(words) == 1 and any(
        len(w) >= 3 and len(variant) >= 3 and (w.startswith(variant) or variant.startswith(w))
        for w in free
    )


def _project_wide(slot: str) -> bool:
    """A slot about all of a project's published ports (pairing's "project:P published
    ports"), rather than one mapping or one host port."""
    return slot.startswith("project:") and slot.endswith(" published ports")


def _best_port_predicates(lead: list[FactRow], exposing: bool) -> list[FactRow]:
    """Of each subject's port facts, those of its best predicate (:data:`_PORT_PRECEDENCE`):
    asked "the port of web", a service that publishes 8080 and exposes 9113 answers 8080;
    asked what it exposes, both (to expose says either, as people use it)."""
    if exposing:
        return lead

    def rank(f: FactRow) -> int | None:
        return _PORT_PRECEDENCE[PUBLISHES] if publishes(f) else _PORT_PRECEDENCE.get(f.predicate)

    best: dict[str, int] = {}
    for f in lead:
        if (mine := rank(f)) is not None:
            best[f.subject] = min(best.get(f.subject, mine), mine)
    return [f for f in lead if rank(f) in (None, best.get(f.subject))]
