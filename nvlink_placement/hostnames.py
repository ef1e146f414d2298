"""Near matches for a host name that Placement does not know.

The commonest mismatch between a topology and Nova's
``hypervisor_hostname`` (the compute node provider's name) is a short name
against a fully qualified one (``gpu-node-17`` and
``gpu-node-17.example.com``), then letter case. Pure: takes the names.
"""

import difflib

#: How many suggestions at most.
LIMIT = 3


#: How many names get the (slow) close-spelling search in one
#: :class:`Names`: a topology naming thousands of hosts Placement does not
#: know (the wrong cloud) must not take minutes to say so.
FUZZY_BUDGET = 10


def _first_label(name):
    return name.split('.', 1)[0].lower()


class Names(object):
    """Known names, indexed once for many :meth:`suggest` calls.

    :param known: names to choose from (compute node provider names).
    :param fuzzy_budget: how many calls may use the close-spelling search
        (:func:`difflib.get_close_matches`, linear in ``known``); later
        calls only try the case and short-name rules.
    """

    def __init__(self, known, fuzzy_budget=FUZZY_BUDGET):
        self.known = sorted(set(known))
        self.by_lower = {}
        self.by_label = {}
        for k in self.known:
            self.by_lower.setdefault(k.lower(), []).append(k)
            self.by_label.setdefault(_first_label(k), []).append(k)
        self.fuzzy_budget = fuzzy_budget

    def suggest(self, name):
        """The names ``name`` probably means, best first.

        In this order, and only the first rule that finds any: equal but
        for letter case; the same first DNS label (short name against
        FQDN, in either direction, any case); else close spelling
        (:func:`difflib.get_close_matches`, similarity 0.8 or more, in
        lower case; while the budget lasts). At most :data:`LIMIT`.

        :returns: list of names (empty: nothing close).
        """
        lower = name.lower()
        same_case = [k for k in self.by_lower.get(lower, ()) if k != name]
        if same_case:
            return same_case[:LIMIT]
        same_label = [k for k in self.by_label.get(_first_label(name), ())
                      if k != name]
        if same_label:
            return sorted(same_label, key=lambda k: (len(k), k))[:LIMIT]
        if self.fuzzy_budget <= 0:
            return []
        self.fuzzy_budget -= 1
        close = difflib.get_close_matches(
            lower, [k for k in self.by_lower if k != lower], n=LIMIT,
            cutoff=0.8)
        return [self.by_lower[c][0] for c in close]

    def did_you_mean(self, name):
        """`` (did you mean 'x'?)`` or '' when nothing is close."""
        found = self.suggest(name)
        if not found:
            return ''
        return ' (did you mean %s?)' % ' or '.join(repr(n) for n in found)


def suggest(name, known):
    """:meth:`Names.suggest` for one name."""
    return Names(known).suggest(name)


def did_you_mean(name, known):
    """:meth:`Names.did_you_mean` for one name."""
    return Names(known).did_you_mean(name)


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
    return ' (hosts: %s%s)' % (', '.join(repr(k) for k in known[:LISTED]),
                               ' and %d more' % more if more > 0 else '')
