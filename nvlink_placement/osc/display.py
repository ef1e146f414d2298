"""How values show in a command's output rows and messages.

``-f value``, ``csv`` and ``shell`` print each value as text
(:func:`flat`); :class:`InOrder` keeps a list in its own order;
:func:`plural` counts nouns in messages.
"""

from cliff import columns
from osc_lib import utils

# Formats that print each value as text: lists and mappings are joined.
FLAT_FORMATS = ('value', 'csv', 'shell')


def plural(count, noun, nouns=None):
    """``1 host``, ``2 hosts``, ``0 hosts``."""
    return '%d %s' % (count, noun if count == 1 else nouns or noun + 's')


def names(items, shown=10):
    """``a, b, c``, or ``a, b, ... and 7 more`` past ``shown`` names."""
    items = list(items)
    text = ', '.join(items[:shown])
    if len(items) > shown:
        text += ' and %d more' % (len(items) - shown)
    return text


def flat(value, shell=False):
    """``value`` for ``-f value``, ``csv`` and ``shell``: no Python reprs.

    Lists become comma-joined text (``1,3``); mappings ``key='value'``
    pairs joined by ``, `` (osc_lib's ``format_dict``: values may hold
    commas); None an empty string.

    :param shell: also escape what is special inside double quotes in a
        POSIX shell (backslash, ``$``, backquote); cliff's shell formatter
        escapes only ``"``, so sourcing its output could run a command
        hidden in a host name.
    """
    if isinstance(value, columns.FormattableColumn):
        value = value.machine_readable()
    if value is None:
        value = ''
    elif isinstance(value, (list, tuple)):
        value = ','.join(str(v) for v in value)
    elif isinstance(value, dict):
        value = utils.format_dict(value)
    if shell and isinstance(value, str):
        value = (value.replace('\\', '\\\\').replace('$', '\\$')
                 .replace('`', '\\`'))
    return value


class InOrder(columns.FormattableColumn):
    """A list shown in its own order, not sorted like osc_lib's ListColumn.

    Keeps physical ids and addresses aligned; JSON and YAML get the list.
    """

    def human_readable(self):
        return ', '.join(str(item) for item in self._value)

    def machine_readable(self):
        return list(self._value)


def long_columns(parsed_args, column, names, rows):
    """Leave the wide ``column`` out of a table unless --long or -c asks.

    Other formats (json, yaml, csv, value) keep every column.
    """
    if (parsed_args.long or column in parsed_args.columns or
            parsed_args.formatter != 'table'):
        return names, rows
    keep = [i for i, name in enumerate(names) if name != column]
    return ([names[i] for i in keep],
            [[row[i] for i in keep] for row in rows])
