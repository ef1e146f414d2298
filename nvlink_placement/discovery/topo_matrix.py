"""``nvidia-smi topo -m``: parsing the matrix and reading NVLink domains.

Format facts (``reference/host-formats.md``; all four captures in
``data/nvidia-smi/topo-*``):

- A header row: an empty cell, ``GPU0..GPUn``, NIC columns (``NIC0..`` or
  ``mlx5_N``), then ``CPU Affinity``, ``NUMA Affinity``, ``GPU NUMA ID``
  (the last two absent on older drivers). Cells are TAB-separated; copies
  pasted in issues use runs of spaces, and some lose the leading TAB.
- Diagonal ``X``; link cells ``NV<n>`` (n bonded NVLinks), ``PIX``,
  ``PXB``, ``PHB``, ``NODE``, ``SYS`` (``SOC`` on old drivers). The matrix
  is symmetric. Affinity cells may be empty or ``N/A``.
- Reading stops at the first blank line, ``Legend:``, or any line that is
  not a row of the matrix (e.g. the truncation marks in our captures).

GPU ``GPUi`` is NVML index i: map it to a PCI address through the order of
``nvidia-smi -q``, never through ``/dev/nvidiaN``.
"""

import collections
import dataclasses
import re

from nvlink_placement.discovery import files
from nvlink_placement import errors
from nvlink_placement.topology import pci

_CELL_SPLIT = re.compile(r'\t| {2,}')
# Bounded digits: int() of thousands of digits fails.
_LINK = re.compile(r'^(?:X|NV[0-9]{1,4}|PIX|PXB|PHB|NODE|SYS|SOC)$')
_GPU = re.compile(r'^GPU([0-9]{1,4})$')


@dataclasses.dataclass
class TopoMatrix:
    """A parsed matrix.

    :ivar source: file name or command, for messages.
    :ivar devices: device column names in header order (GPUs and NICs).
    :ivar gpus: the ``GPUn`` column names, in header order.
    :ivar cells: dict ``{(row, column): link}``, e.g.
        ``{('GPU0', 'GPU1'): 'NV18'}``; diagonal cells are ``'X'``.
    :ivar attributes: dict ``{row: {column name: value}}`` for the
        affinity columns (non-empty cells only).
    :ivar lines: dict ``{row: line number}``.
    """

    source: str
    devices: list
    gpus: list
    cells: dict
    attributes: dict
    lines: dict

    def link(self, a, b):
        """The link between devices ``a`` and ``b``, read from either row.

        None when neither row was captured.
        """
        return self.cells.get((a, b), self.cells.get((b, a)))


def nv_count(link):
    """Number of bonded NVLinks of an ``NV<n>`` cell, else 0."""
    return int(link[2:]) if link and link.startswith('NV') else 0


def _split(line):
    return [cell.strip() for cell in _CELL_SPLIT.split(line.rstrip('\n'))]


def parse(text, source):
    """Parse ``nvidia-smi topo -m`` output.

    :param text: the output; lines starting with ``#`` are ignored, lines
        before the header (a prompt, the command) are skipped.
    :param source: file name or command, for messages.
    :returns: :class:`TopoMatrix`.
    :raises NvlinkError: with file and line when there is no header, a
        row has too few cells, a cell is not a known link type, a row
        repeats, or the two halves of the matrix disagree.
    """
    devices = None
    trailing = []
    cells, attributes, lines = {}, {}, {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith('#'):
            continue
        row = _split(line)
        if devices is None:
            names = row[1:] if row and row[0] == '' else row
            if names and names[0] == 'GPU0' and 'X' not in names:
                cut = next((i for i, n in enumerate(names)
                            if 'Affinity' in n or 'NUMA' in n), len(names))
                devices, trailing = names[:cut], names[cut:]
            continue
        if not line.strip() or line.strip().startswith('Legend'):
            break
        label = row[0]
        if label not in devices:
            break
        if label in lines:
            raise files.line_error(source, lineno, 'row %s repeats line %d'
                                   % (label, lines[label]))
        links = row[1:1 + len(devices)]
        if len(links) < len(devices) or '' in links:
            raise files.line_error(
                source, lineno, 'row %s has fewer link cells than the %d '
                'devices the header names' % (label, len(devices)))
        for column, link in zip(devices, links):
            if not _LINK.match(link) or (link == 'X') != (column == label):
                raise files.line_error(source, lineno,
                                       '%s/%s: unexpected cell %r'
                                       % (label, column, link))
            other = cells.get((column, label))
            if other is not None and other != link:
                raise files.line_error(
                    source, lineno, '%s-%s is %s, but %s-%s is %s on line %d'
                    % (label, column, link, column, label, other,
                       lines[column]))
            cells[(label, column)] = link
        values = [c for c in row[1 + len(devices):] if c]
        if len(values) > len(trailing):
            raise files.line_error(
                source, lineno, 'row %s has %d values after the links, the '
                'header names %d columns (%s)' % (
                    label, len(values), len(trailing), ', '.join(trailing)))
        attributes[label] = dict(zip(trailing, values))
        lines[label] = lineno
    if devices is None:
        raise errors.NvlinkError(
            '%s: no `nvidia-smi topo -m` header (a row of column names '
            'starting with GPU0) found' % source)
    gpus = [d for d in devices if _GPU.match(d)]
    return TopoMatrix(source, devices, gpus, cells, attributes, lines)


@dataclasses.dataclass
class NvlinkView:
    """What the matrix says about NVLink domains and link health.

    :ivar single_domain: True when all GPUs form one NVLink domain (an
        NVSwitch board, or every GPU NVLink-connected): the real domains
        then come from Fabric Manager partitions or the board.
    :ivar domains: list of frozensets of addresses, the NVLink-connected
        components (one set of all GPUs when ``single_domain``).
    :ivar groups: list of address tuples: NVLink cliques smaller than the
        host (bridge pairs); empty when ``single_domain``.
    :ivar degraded: dict ``{address: [reason, ...]}``.
    :ivar notes: list of strings for the operator.
    """

    single_domain: bool
    domains: list
    groups: list
    degraded: dict
    notes: list


def analyse(matrix, addresses, nvswitch_board):
    """Read NVLink domains and degraded links from a matrix.

    Rules (``reference/host-formats.md``):

    - The expected link is the most common ``NV<n>`` count among GPU pairs
      (ties: the higher count). A pair with fewer links is degraded.
    - On an NVSwitch board (NVSwitches in sysfs) or when the NVLink graph
      connects every GPU, the host is one domain: no groups come from the
      matrix, and a GPU pair without NVLink (``PXB``, ``SYS``...) is
      degraded.
    - Otherwise each NVLink-connected component where every pair is
      NVLinked (a bridge pair) is a group; in a component that is not
      fully connected the pairs without NVLink are degraded and no group
      is made.

    :param matrix: :class:`TopoMatrix`.
    :param addresses: PCI addresses in NVML index order (from
        ``nvidia-smi -q``): ``GPUi`` is ``addresses[i]``.
    :param nvswitch_board: True when sysfs lists NVSwitches.
    :returns: :class:`NvlinkView`.
    :raises NvlinkError: when the matrix and ``addresses`` count different
        GPUs, or a GPU pair has no cell in either row (truncated capture).
    """
    if len(matrix.gpus) != len(addresses):
        raise errors.NvlinkError(
            '%s shows %d GPUs, but `nvidia-smi -q` lists %d: they must '
            'come from the same host and moment'
            % (matrix.source, len(matrix.gpus), len(addresses)))
    index = {g: int(_GPU.match(g).group(1)) for g in matrix.gpus}
    if sorted(index.values()) != list(range(len(addresses))):
        raise errors.NvlinkError('%s: GPU columns %s are not GPU0..GPU%d'
                                 % (matrix.source, ', '.join(matrix.gpus),
                                    len(addresses) - 1))
    name = {g: addresses[i] for g, i in index.items()}
    pairs = {}
    missing = []
    for i, a in enumerate(matrix.gpus):
        for b in matrix.gpus[i + 1:]:
            link = matrix.link(a, b)
            if link is None:
                missing.append('%s-%s' % (a, b))
            pairs[(a, b)] = link
    if missing:
        raise errors.NvlinkError(
            '%s: no cell for %s (rows %s missing: truncated capture?)'
            % (matrix.source, ', '.join(missing), ', '.join(
                g for g in matrix.gpus if g not in matrix.lines)))

    counts = collections.Counter(nv_count(link) for link in pairs.values()
                                 if nv_count(link))
    expected = max(counts, key=lambda n: (counts[n], n)) if counts else 0
    nv_pairs = [p for p, link in pairs.items() if nv_count(link)]
    components = _components(matrix.gpus, nv_pairs)
    single = nvswitch_board or len(components) == 1
    domains = ([frozenset(name.values())] if single else
               [frozenset(name[g] for g in c) for c in components])

    low = collections.defaultdict(list)
    unlinked = collections.defaultdict(list)
    groups, notes = [], []
    for component in ([matrix.gpus] if single else components):
        for (a, b), link in pairs.items():
            if a not in component or b not in component:
                continue
            if nv_count(link) and nv_count(link) < expected:
                low[a].append((b, link))
                low[b].append((a, link))
            elif not nv_count(link):
                unlinked[a].append((b, link))
                unlinked[b].append((a, link))
        broken = any(g in unlinked for g in component)
        if not single and len(component) > 1:
            members = tuple(sorted((name[g] for g in component),
                                   key=pci.address_sort_key))
            if broken:
                notes.append('%s: GPUs %s are NVLink-connected, but not '
                             'every pair directly: no group made'
                             % (matrix.source, ', '.join(members)))
            else:
                groups.append(members)
    degraded = collections.defaultdict(list)
    for gpu in matrix.gpus:
        if low[gpu]:
            degraded[name[gpu]].append(
                'NVLink to %s below the expected NV%d (nvidia-smi topo -m)'
                % (', '.join('%s: %s' % (name[o], link)
                             for o, link in low[gpu]), expected))
        if unlinked[gpu]:
            degraded[name[gpu]].append(
                'no NVLink to %s although the GPUs share an NVLink domain '
                '(nvidia-smi topo -m)'
                % ', '.join('%s: %s' % (name[o], link)
                            for o, link in unlinked[gpu]))
    return NvlinkView(single, domains, groups, dict(degraded), notes)


def _components(gpus, edges):
    """Connected components of ``gpus`` over ``edges``, in GPU order."""
    parent = {g: g for g in gpus}

    def root(g):
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    for a, b in edges:
        parent[root(a)] = root(b)
    grouped = collections.defaultdict(list)
    for g in gpus:
        grouped[root(g)].append(g)
    return sorted(grouped.values(), key=lambda c: gpus.index(c[0]))
