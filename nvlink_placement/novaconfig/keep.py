"""What an operator already configured that a layout's files must keep.

Pure: every function takes file texts (``{relative path: text}`` of the
files found in ``--output-dir``, read by the command) and returns values or
problems. A *problem* is one sentence naming the file and the key or
variable; :mod:`.layouts` refuses to write anything while there is one.

- :func:`ini_values`: the values of one option in an ini text, every line
  of a multi-valued option in order (oslo.config's own parser,
  ``oslo_config.iniparser``).
- :func:`spec_entries` / :func:`other_entries`: ``[pci] device_spec``
  values as entries, and those for devices other than the GPUs configured
  (an SR-IOV NIC), which a host's file must carry on.
- :func:`alias_lines`: ``[pci] alias`` values merged by alias name.
- :func:`filters`: ``enabled_filters`` with the filters Nova needs added.
- :func:`osa_variables`: the OpenStack-Ansible variables an operator set in
  ``openstack_user_config.yml`` and ``conf.d/*.yml`` (``global_overrides``
  and each host's ``container_vars`` / ``host_vars``).
"""

import json

from oslo_config import iniparser
import yaml

from nvlink_placement.novaconfig import settings

#: The first line of every file :mod:`.layouts` writes contains this.
MARK = 'openstack nvlink nova-config'


def written_here(text):
    """Whether ``text`` is a file :mod:`.layouts` wrote (its first line)."""
    first = (text or '').split('\n', 1)[0]
    return first.startswith('#') and MARK in first


class _Ini(iniparser.BaseParser):

    def __init__(self, path):
        super().__init__()
        self.path = path
        self.section = 'DEFAULT'
        self.values = {}

    def new_section(self, section):
        self.section = section

    def assignment(self, key, value):
        self.values.setdefault((self.section, key.strip()), []).append(
            '\n'.join(value).strip())


def ini_values(path, text, section, option, problems):
    """Every value of ``[section] option`` in ``text``, in file order.

    :param problems: list; a text oslo.config cannot parse adds one (naming
        ``path`` and the line) and gives ``[]``.
    """
    parser = _Ini(path)
    try:
        parser.parse(text.splitlines(True))
    except iniparser.ParseError as exc:
        problems.append('%s: line %d: %s (not an ini file oslo.config '
                        'reads)' % (path, exc.lineno, exc.msg))
        return []
    return parser.values.get((section, option), [])


def spec_entries(where, values, problems):
    """``device_spec`` values (JSON objects or lists) as a list of dicts.

    :param where: names the file and key in a problem.
    """
    entries = []
    for value in values:
        try:
            found = json.loads(value) if isinstance(value, str) else value
        except ValueError:
            problems.append('%s: %r is not JSON (Nova reads each value as a '
                            'JSON object or list)' % (where, value))
            continue
        found = found if isinstance(found, list) else [found]
        for entry in found:
            if not isinstance(entry, dict):
                problems.append('%s: %r is not a JSON object' % (
                    where, entry))
                continue
            entries.append(entry)
    return entries


def other_entries(entries, ids):
    """The entries for devices other than ``ids`` (``(vendor, product)``).

    An entry with one of ``ids`` is the operator's own GPU entry (the
    generic one, usually): the host's file replaces it with the complete,
    ordered list, so it is not carried.
    """
    return [e for e in entries
            if (str(e.get('vendor_id', '')).lower(),
                str(e.get('product_id', '')).lower()) not in ids]


def alias_name(text):
    """The ``name`` of one ``[pci] alias`` JSON text, or None."""
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found.get('name') if isinstance(found, dict) else None


def alias_lines(ours, *kept):
    """``[pci] alias`` values: each of ``kept`` whose name is not ours.

    :param ours: this run's alias JSON texts.
    :param kept: lists of alias texts already configured (the operator's,
        an earlier run's), in the order they must come; a name of
        ``ours`` is replaced by ours, an exact repeat dropped.
    :returns: list of alias texts, the kept ones first.
    """
    names = {alias_name(a) for a in ours}
    out = []
    for texts in kept:
        for text in texts:
            if alias_name(text) not in names and text not in out:
                out.append(text)
    return out + [a for a in ours if a not in out]


def changed_aliases(where, ours, theirs, problems):
    """Name each operator's alias that one of ``ours`` would change.

    An alias of one of our names is replaced by ours (:func:`alias_lines`);
    where the operator's says more or else (``numa_policy``,
    ``device_type``, other ids) that would be lost without a word.

    :param where: the file (and key) ``theirs`` come from.
    :param ours: / :param theirs: alias JSON texts.
    :param problems: list the problems are added to.
    """
    mine = {alias_name(a): json.loads(a) for a in ours}
    for text in theirs:
        name = alias_name(text)
        if name in mine and json.loads(text) != mine[name]:
            problems.append(
                '%s: alias %s is %s, and this run\'s alias of that name, %s,'
                ' would replace it: remove it there, or give the GPUs '
                'another --alias name' % (where, name, text,
                                          json.dumps(mine[name])))


def filters(theirs, ours):
    """``enabled_filters``: the operator's list with ours added at its end.

    Nova's defaults among ours are not added: the operator's list replaced
    them on purpose; only the filters Nova needs for the flavors are.

    :param theirs: the operator's comma-separated value, or None.
    :param ours: our comma-separated value (Nova's defaults plus the PCI
        filter).
    """
    if theirs is None:
        return ours
    have = [f.strip() for f in theirs.split(',') if f.strip()]
    return ','.join(have + [f for f in ours.split(',') if f not in have and
                            f not in settings.NOVA_DEFAULT_FILTERS])


def yaml_document(path, text, problems):
    """A YAML mapping (``{}`` for an empty file); a problem if not one."""
    # yaml.safe_load as OpenStack-Ansible reads it: anchors and aliases
    # (its example file shares host lists so) are fine there.
    try:
        found = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        where = ('line %d column %d: ' % (mark.line + 1, mark.column + 1)
                 if mark else '')
        what = getattr(exc, 'problem', None) or str(exc).split('\n')[0]
        context = getattr(exc, 'context', None)
        problems.append('%s: %sinvalid YAML: %s%s' % (
            path, where, what, ' (%s)' % context if context else ''))
        return {}
    if found is None:
        return {}
    if not isinstance(found, dict):
        problems.append('%s: not a YAML mapping' % path)
        return {}
    return found


def osa_variables(texts, names, problems):
    """The operator's OpenStack-Ansible variables of ``names``.

    Read from ``openstack_user_config.yml`` and ``conf.d/*.yml`` (the
    files OpenStack-Ansible's inventory is built from), as its inventory
    gives them to Ansible: ``global_overrides`` are variables of every
    host; a host's ``container_vars`` and ``host_vars`` under any
    ``<group>_hosts`` key are that host's (for a compute host on metal,
    its own).

    :param texts: ``{relative path: text}``.
    :returns: ``(global, per_host)``: ``{variable: (where, value)}`` and
        ``{host: {variable: (where, value)}}`` for every host named there
        (compute and control hosts), ``where`` naming the file and key.
    """
    everywhere, per_host = {}, {}
    for path in sorted(texts):
        if not (path == 'openstack_user_config.yml' or (
                path.startswith('conf.d/') and path.endswith('.yml'))):
            continue
        document = yaml_document(path, texts[path], problems)
        overrides = document.get('global_overrides') or {}
        for name in names:
            if isinstance(overrides, dict) and name in overrides:
                everywhere[name] = (path, overrides[name])
        for key, members in document.items():
            if not key.endswith('_hosts') or not isinstance(members, dict):
                continue
            for host, entry in members.items():
                if not isinstance(entry, dict):
                    continue
                for part in ('container_vars', 'host_vars'):
                    found = entry.get(part) or {}
                    for name in names:
                        if isinstance(found, dict) and name in found:
                            per_host.setdefault(host, {})[name] = (
                                '%s (%s.%s.%s)' % (path, key, host, part),
                                found[name])
    return everywhere, per_host
