"""Command help as plain text from reStructuredText docstrings.

Command docstrings are written in reStructuredText because the CLI
reference renders them (cliff's ``autoprogram-cliff``); ``--help`` prints
them on a terminal, where markup is noise. :func:`plain` drops it: an
inline literal becomes the text in double quotes (bare when it fills its
line, as a definition-list term does), a role such as
``:mod:`a.b``` its target text (the last part with ``~``).

Standard library only: the partition hook uses it on bare compute nodes.
"""

import re

_ROLE = re.compile(r':[a-z]+(?::[a-z]+)?:`(~?)([^`<]*?)(?:\s*<([^`>]*)>)?`',
                   re.S)
_LITERAL = re.compile(r'``(.+?)``', re.S)
_LINE_LITERAL = re.compile(r'^(\s*)``([^`]+)``\s*$')


def _role(match):
    tilde, text, target = match.groups()
    text = text.strip()
    if tilde:
        text = text.rsplit('.', 1)[-1]
    return text or (target or '').strip()


def plain(text):
    """``text`` (reStructuredText) with its inline markup removed."""
    if not text:
        return text
    lines = []
    for line in text.split('\n'):
        whole = _LINE_LITERAL.match(line)
        if whole:
            line = whole.group(1) + whole.group(2)
        lines.append(line)
    text = _ROLE.sub(_role, '\n'.join(lines))
    return _LITERAL.sub(r'"\1"', text)
