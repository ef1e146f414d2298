"""Draw resource provider trees: indented text or Graphviz DOT."""

from nvlink_placement.placement import naming
from nvlink_placement.placement import usage
from nvlink_placement.topology import members

_MARKS = {usage.FREE: 'free', usage.USED: 'USED', usage.RESERVED: 'RESERVED'}


COLUMNS = ('host', 'provider', 'parent', 'depth', 'traits', 'module',
           'status')


def _traits(provider):
    """The traits a drawing shows: group traits, not the tool's markers."""
    return sorted(t for t in provider.traits
                  if t not in (naming.OWNER_TRAIT, naming.PCI_TRAIT) and
                  not t.startswith(naming.MARKER_PREFIX))


def _label(state, provider, uses, modules):
    """``name [traits] address module N status`` for one RP.

    Member traits are left out of the drawing (``-f json`` lists them).
    """
    parts = [provider.name]
    shown = [t for t in _traits(provider) if not members.parse_any(t)]
    if shown:
        parts.append('[%s]' % ', '.join(shown))
    if provider.uuid in uses:
        module = modules.get(provider.name)
        if module is not None:
            parts.append('module %d' % module)
        parts.append(_MARKS[uses[provider.uuid].status])
    return ' '.join(parts)


def _children(state, uuid):
    return sorted(state.children.get(uuid, []), key=lambda p: p.name)


def text(state, roots, uses, modules=None):
    """Indented tree, one line per RP, with box-drawing branches.

    :param roots: root RP uuids to draw.
    :param uses: dict RP uuid -> :class:`GpuUse` (PCI RPs).
    :param modules: optional dict Nova RP name -> module id.
    :returns: str.
    """
    modules = modules or {}
    lines = []

    def walk(provider, prefix, last):
        branch = '└── ' if last else '├── '
        lines.append(prefix + branch +
                     _label(state, provider, uses, modules))
        kids = _children(state, provider.uuid)
        for i, kid in enumerate(kids):
            walk(kid, prefix + ('    ' if last else '│   '),
                 i == len(kids) - 1)

    for root in roots:
        provider = state.by_uuid[root]
        lines.append(_label(state, provider, uses, modules))
        kids = _children(state, root)
        for i, kid in enumerate(kids):
            walk(kid, '', i == len(kids) - 1)
    return ''.join(line + '\n' for line in lines)


def rows(state, roots, uses, modules=None):
    """One row per RP, in the order :func:`text` draws them.

    ``(host, provider, parent, depth, traits, module, status)``: depth 0
    is the compute node; module and status (free, used, reserved) only
    for GPUs, None otherwise; traits a list.
    """
    modules = modules or {}
    out = []

    def walk(host, provider, parent, depth):
        use = uses.get(provider.uuid)
        out.append((host, provider.name, parent, depth, _traits(provider),
                    modules.get(provider.name) if use else None,
                    use.status if use else None))
        for kid in _children(state, provider.uuid):
            walk(host, kid, provider.name, depth + 1)

    for root in roots:
        provider = state.by_uuid[root]
        walk(provider.name, provider, None, 0)
    return out


def dot(state, roots, uses, modules=None):
    """Graphviz DOT of the trees (render with ``dot -Tsvg``).

    Groups are boxes, GPUs ellipses filled by status (free green, used
    orange, reserved grey).
    """
    modules = modules or {}
    colors = {usage.FREE: '#c8e6c9', usage.USED: '#ffcc80',
              usage.RESERVED: '#bdbdbd'}
    out = ['digraph placement {', '  rankdir=TB;',
           '  node [fontname="Helvetica", fontsize=10];']
    for root in roots:
        for provider in sorted(state.tree(root), key=lambda p: p.name):
            label = _label(state, provider, uses, modules).replace(
                ' [', '\\n[').replace('"', '\\"')
            if provider.uuid in uses:
                style = 'shape=ellipse, style=filled, fillcolor="%s"' % (
                    colors[uses[provider.uuid].status])
            elif provider.parent_uuid is None:
                style = 'shape=box, style="rounded,bold"'
            else:
                style = 'shape=box, style=rounded'
            out.append('  "%s" [label="%s", %s];'
                       % (provider.uuid, label, style))
            if provider.parent_uuid:
                out.append('  "%s" -> "%s";'
                           % (provider.parent_uuid, provider.uuid))
    out.append('}')
    return '\n'.join(out) + '\n'
