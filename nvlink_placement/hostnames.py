"""Near matches for a host name that Placement does not know.

The commonest mismatch between a topology and Nova's
``hypervisor_hostname`` (the compute node provider's name) is a short name
against a fully qualified one (``gpu-node-17`` and
``gpu-node-17.example.com``), then letter case. Pure: takes the names.
"""

import difflib

#: How many suggestions at most.
LIMIT = 3


def _first_label(name):
    return name.split('.', 1)[0].lower()


def suggest(name, known):
    """The names of ``known`` that ``name`` probably means, best first.

    In this order, and only the first rule that finds any: equal but for
    letter case; the same first DNS label (short name against FQDN, in
    either direction, any case); else :func:`difflib.get_close_matches`
    (at most :data:`LIMIT`, similarity 0.8 or more, compared in lower
    case).

    :param known: names to choose from (compute node provider names).
    :returns: list of names (empty: nothing close).
    """
    known = sorted(set(known) - {name})
    lower = name.lower()
    same_case = [k for k in known if k.lower() == lower]
    if same_case:
        return same_case[:LIMIT]
    label = _first_label(name)
    same_label = [k for k in known if _first_label(k) == label]
    if same_label:
        return sorted(same_label, key=lambda k: (len(k), k))[:LIMIT]
    by_lower = {}
    for k in known:
        by_lower.setdefault(k.lower(), k)
    close = difflib.get_close_matches(lower, list(by_lower), n=LIMIT,
                                      cutoff=0.8)
    return [by_lower[c] for c in close]


def did_you_mean(name, known):
    """`` (did you mean 'x'?)`` or '' when nothing is close."""
    found = suggest(name, known)
    if not found:
        return ''
    return ' (did you mean %s?)' % ' or '.join(repr(n) for n in found)


#: How many names :func:`known_hint` lists at most.
LISTED = 10


def known_hint(name, known):
    """What to say after "no host NAME in ...": the near names, else all.

    `` (did you mean 'x'?)`` when some names are close, else
    `` (hosts: a, b)`` listing at most :data:`LISTED` of ``known`` (then
    ``and N more``), or `` (it has no hosts)``.
    """
    close = did_you_mean(name, known)
    if close:
        return close
    known = sorted(known)
    if not known:
        return ' (it has no hosts)'
    more = len(known) - LISTED
    return ' (hosts: %s%s)' % (', '.join(known[:LISTED]),
                               ' and %d more' % more if more > 0 else '')
