"""``nvidia-smi topo -m``: parsing the matrix and reading NVLink domains.

Format facts (``reference/host-formats.md``; the captures in
``data/nvidia-smi/topo-*`` and ``tests/fixtures/nvidia-smi``):

- A header row: an empty cell, ``GPU0..GPUn``, NIC columns (``NIC0..`` or
  ``mlx5_N``), then ``CPU Affinity``, ``NUMA Affinity``, ``GPU NUMA ID``
  (the last two absent on older drivers). Cells are TAB-separated; copies
  pasted in issues use runs of spaces, and some lose the leading TAB.
  Pasted copies also lose separators inside the header: DGX-1 captures
  show ``GPU0GPU1...GPU7mlx5_0`` run together, and space-pasted ones put
  a single space between two 7-character NIC names (``mlx5_10 mlx5_11``).
  So device names are read from the header's words, run-together names
  split where a new ``GPU<n>``, ``NIC<n>`` or ``<name>_<n>`` begins.
- Diagonal ``X``; link cells ``NV<n>`` (n bonded NVLinks), ``PIX``,
  ``PXB``, ``PHB``, ``NODE``, ``SYS`` (``SOC`` on old drivers). The matrix
  is symmetric. No cell holds a space, so where pasting left a single
  space (after a 7-character NIC row name or affinity value) the row is
  split there too; affinity cells may be empty or ``N/A``.
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
from nvlink_placement.topology import laminar
from nvlink_placement.topology import pci

_CELL_SPLIT = re.compile(r'\t| {2,}')
# A word of a row: a device name, a link, an affinity value.
_WORD = re.compile(r'^(?:[A-Za-z][A-Za-z0-9_]*|[0-9][0-9,-]*|N/A)$')
# Bounded digits: int() of thousands of digits fails.
_LINK = re.compile(r'^(?:X|NV[0-9]{1,4}|PIX|PXB|PHB|NODE|SYS|SOC)$')
_GPU = re.compile(r'^GPU([0-9]{1,4})$')
# Where the attribute columns start in a header, and their names.
_ATTRIBUTES = re.compile(r'(?:CPU|NUMA|NIC)\s+Affinity|GPU\s+NUMA\s+ID')
_ATTRIBUTE_NAME = re.compile(r'(?:CPU|NUMA|NIC)\s+Affinity|GPU\s+NUMA\s+ID|'
                             r'\S+(?: \S+)*')
# A device name in a run-together header word.
_DEVICE = re.compile(r'GPU\d+|NIC\d+|[A-Za-z][A-Za-z0-9]*?_\d+')
SOURCE = 'nvidia-smi topo -m'
#: NVLinks each GPU of a catalogue NVSwitch board bonds to every peer, as
#: ``nvidia-smi topo -m`` shows them (reference/host-formats.md: NV18 on
#: H100, NV12 on A100): H100/H200 and B200 have 18 links, A100 12, V100
#: (HGX-2) 6, all to the NVSwitches.
SWITCHED_NVLINKS = {'hgx-h100-8gpu': 18, 'hgx-b200-8gpu': 18,
                    'hgx-a100-8gpu': 12, 'hgx-a100-16gpu': 12,
                    'hgx-2-16gpu': 6}


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
    :ivar header_line: line number of the header.
    """

    source: str
    devices: list
    gpus: list
    cells: dict
    attributes: dict
    lines: dict
    header_line: int = 0

    def link(self, a, b):
        """The link between devices ``a`` and ``b``, read from either row.

        None when neither row was captured.
        """
        return self.cells.get((a, b), self.cells.get((b, a)))

    @property
    def last_line(self):
        """Line number of the last row read (the header's when none)."""
        return max(self.lines.values(), default=self.header_line)


def nv_count(link):
    """Number of bonded NVLinks of an ``NV<n>`` cell, else 0."""
    return int(link[2:]) if link and link.startswith('NV') else 0


def _row_cells(line, count):
    """The row name, ``count`` link cells, then the attribute cells.

    Cells are split on TABs and runs of spaces, then on single spaces
    where every word is a name, a link or an affinity value (``112-127 7``
    when pasted); other text (a truncation mark) stays one cell. Empty
    cells (doubled TABs) are dropped.
    """
    cells = []
    for cell in _CELL_SPLIT.split(line):
        words = cell.split()
        if all(_WORD.match(w) for w in words):
            cells.extend(words)
        elif words:
            cells.append(cell.strip())
    return cells[:1 + count], cells[1 + count:]


def _device_names(word, source, lineno):
    """Split a header word into device names (``GPU0GPU1`` -> 2 names)."""
    names = _DEVICE.findall(word)
    if ''.join(names) == word:
        return names
    if not re.search(r'GPU\d+', word):
        return [word]          # a NIC name of another form: keep it whole
    raise files.line_error(source, lineno, 'cannot split header word %r '
                           'into device names (GPU<n>, NIC<n>, <name>_<n>)'
                           % word)


def _header(line, source, lineno):
    """``(devices, attribute names)`` of a header line, or None.

    A header's first word is ``GPU0`` (or device names run together from
    ``GPU0`` on) and no cell is ``X``.
    """
    text = line.strip()
    words = text.split()
    first = _DEVICE.findall(words[0]) if words else []
    if (not first or first[0] != 'GPU0' or ''.join(first) != words[0] or
            'X' in words):
        return None
    match = _ATTRIBUTES.search(text)
    cut = match.start() if match else len(text)
    devices = []
    for word in text[:cut].split():
        devices.extend(_device_names(word, source, lineno))
    attributes = [' '.join(name.split())
                  for name in _ATTRIBUTE_NAME.findall(text[cut:])]
    return devices, attributes


def parse(text, source):
    """Parse ``nvidia-smi topo -m`` output.

    :param text: the output; lines starting with ``#`` are ignored, lines
        before the header (a prompt, the command) are skipped.
    :param source: file name or command, for messages.
    :returns: :class:`TopoMatrix`.
    :raises NvlinkError: with file and line when the header cannot be
        split into device names, a row has fewer link cells than the header
        names devices, a cell is not a known link type, a row repeats, or
        the two halves of the matrix disagree; naming the file when there
        is no header.
    """
    devices = header_line = None
    trailing = []
    cells, attributes, lines = {}, {}, {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith('#'):
            continue
        if devices is None:
            found = _header(line, source, lineno)
            if found is not None:
                (devices, trailing), header_line = found, lineno
            continue
        if not line.strip() or line.strip().startswith('Legend'):
            break
        row, values = _row_cells(line, len(devices))
        label = row[0]
        if label not in devices:
            break
        if label in lines:
            raise files.line_error(source, lineno, 'row %s repeats line %d'
                                   % (label, lines[label]))
        links = row[1:]
        if len(links) < len(devices):
            raise files.line_error(
                source, lineno, 'row %s has %d link cells, but the header '
                '(line %d) names %d devices: %s' % (
                    label, len(links), header_line, len(devices),
                    ' '.join(devices)))
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
        if len(values) > len(trailing):
            raise files.line_error(
                source, lineno, 'row %s has %d values after the links, the '
                'header (line %d) names %d columns (%s)' % (
                    label, len(values), header_line, len(trailing),
                    ', '.join(trailing)))
        attributes[label] = dict(zip(trailing, values))
        lines[label] = lineno
    if devices is None:
        raise errors.NvlinkError(
            '%s: no `nvidia-smi topo -m` header (a row of column names '
            'starting with GPU0) found' % source)
    gpus = [d for d in devices if _GPU.match(d)]
    return TopoMatrix(source, devices, gpus, cells, attributes, lines,
                      header_line)


def affinity(matrix, addresses, lost=()):
    """The affinity cells of each GPU row, by address.

    :param addresses: PCI addresses in NVML index order.
    :param lost: as for :func:`analyse`.
    :returns: dict ``{address: {column name: value}}`` (non-empty cells,
        e.g. ``{'CPU Affinity': '0-55,112-167', 'NUMA Affinity': '0'}``).
    """
    return {address: matrix.attributes.get(column, {})
            for column, address in _by_address(matrix, addresses,
                                               lost).items()}


@dataclasses.dataclass
class NvlinkView:
    """What the matrix says about NVLink domains and link health.

    :ivar switched: True on an NVSwitch board (NVSwitches in sysfs): every
        GPU is in one NVLink fabric whose domains come from Fabric Manager
        partitions or the board, so the matrix makes no groups.
    :ivar domains: list of frozensets of addresses, the NVLink-connected
        components (one set of all GPUs when ``switched``).
    :ivar groups: list of address tuples, empty when ``switched``: the
        meshes (sets of GPUs each linked directly to every other), a
        laminar family of the NVLink cliques, larger ones first.
    :ivar dropped: list of address tuples: NVLink cliques left out because
        they cross a kept mesh (the cross-quad pairs of a DGX-1).
    :ivar degraded: dict ``{address: [reason, ...]}``.
    :ivar notes: list of strings for the operator.
    """

    switched: bool
    domains: list
    groups: list
    dropped: list
    degraded: dict
    notes: list


def _by_address(matrix, addresses, lost=()):
    """dict GPU column -> address, checking the two describe one host.

    :param lost: addresses ``nvidia-smi -q`` reports lost. A matrix that
        counts them too (NVML still counts a GPU it cannot open) numbers
        every GPU in PCI bus order, nvidia-smi's order.
    """
    if lost and len(matrix.gpus) == len(addresses) + len(lost):
        addresses = sorted(list(addresses) + list(lost),
                           key=pci.address_sort_key)
    if len(matrix.gpus) != len(addresses):
        raise errors.NvlinkError(
            '%s: line %d: the header shows %d GPUs, but `nvidia-smi -q` '
            'lists %d%s: they must come from the same host and moment'
            % (matrix.source, matrix.header_line, len(matrix.gpus),
               len(addresses), ' and reports %d lost' % len(lost)
               if lost else ''))
    index = {g: int(_GPU.match(g).group(1)) for g in matrix.gpus}
    if sorted(index.values()) != list(range(len(addresses))):
        raise errors.NvlinkError(
            '%s: line %d: GPU columns %s are not GPU0..GPU%d'
            % (matrix.source, matrix.header_line, ', '.join(matrix.gpus),
               len(addresses) - 1))
    return {g: addresses[i] for g, i in index.items()}


def _shorten(names):
    if len(names) <= 4:
        return ', '.join(names)
    return '%s, %s, ..., %s' % (names[0], names[1], names[-1])


def _pairs(matrix):
    """dict ``(a, b) -> link`` over GPU column pairs, ``a`` before ``b``."""
    pairs, missing = {}, 0
    for i, a in enumerate(matrix.gpus):
        for b in matrix.gpus[i + 1:]:
            pairs[(a, b)] = matrix.link(a, b)
            missing += pairs[(a, b)] is None
    if missing:
        absent = [g for g in matrix.gpus if g not in matrix.lines]
        raise errors.NvlinkError(
            '%s: line %d: the matrix stops after row %s; rows %s are '
            'missing (truncated capture?), so %d GPU pairs have no cell in '
            'either row' % (matrix.source, matrix.last_line,
                            max(matrix.lines, key=matrix.lines.get),
                            _shorten(absent), missing))
    return pairs


def _most_common(counts):
    """The most common value of a Counter (ties: the higher value)."""
    return max(counts, key=lambda n: (counts[n], n)) if counts else 0


def _own_links(pairs):
    """dict GPU -> its best NVLink count to any peer (0: none at all)."""
    own = collections.defaultdict(int)
    for (a, b), link in pairs.items():
        for gpu in (a, b):
            own[gpu] = max(own[gpu], nv_count(link))
    return own


def _expected_links(pairs, switched, designed):
    """Expected NVLink count per GPU pair, and a note when not judged.

    :param switched: False, or True / ``(board name, count)`` for an
        NVSwitch board (the count known from the catalogue).
    :param designed: None, or ``(board name, {pair: count})``.
    :returns: ``(expected, source, note)``: ``expected`` a dict pair ->
        count (absent or 0: not judged), ``source`` what it comes from.
    """
    nv = {p: nv_count(link) for p, link in pairs.items()}
    counts = collections.Counter(n for n in nv.values() if n)
    if designed is not None:
        board, links = designed
        return links, 'board %s, %s' % (board, SOURCE), None
    if isinstance(switched, tuple):
        board, count = switched
        return {p: count for p in pairs}, 'board %s, %s' % (
            board, SOURCE), None
    if switched:
        # Every GPU reaches every peer through the switches with all its
        # links: the count most GPUs have is the design.
        top = _most_common(collections.Counter(
            n for n in _own_links(pairs).values() if n))
        if pairs and not top:
            return {}, SOURCE, (
                'no GPU pair shows NVLink although the board has '
                'NVSwitches: the links or the fabric are down, and the '
                'designed count is unknown (give --board to judge against '
                "the board's)")
        return {p: top for p in pairs}, SOURCE, None
    seen = collections.defaultdict(list)
    for (a, b), n in nv.items():
        if n:
            seen[a].append(n)
            seen[b].append(n)
    common = set.intersection(*map(set, seen.values())) if seen else set()
    if common and len(counts) > 1:
        # Counts every NVLinked GPU has are part of the design (DGX-1:
        # NV1 and NV2); a weakening that keeps that true is not seen.
        return {p: min(common) for p, n in nv.items() if n}, SOURCE, (
            'NVLink counts differ between GPU pairs (%s): judged by the '
            'counts every GPU has, so links weakened alike on every GPU '
            'look as designed; give --board for the designed wiring'
            % ', '.join('NV%d' % n for n in sorted(counts)))
    if common:
        floor = min(common)
    elif all(len(v) == 1 for v in seen.values()):
        floor = _most_common(counts)      # bridge pairs: compare them
    else:
        return {}, SOURCE, (
            'NVLink counts differ between GPUs (%s) and no count is common '
            'to all of them: link health is not judged from the matrix; '
            'give --board for the designed wiring'
            % ', '.join('NV%d' % n for n in sorted(counts)))
    return {p: floor for p, n in nv.items() if n}, SOURCE, None


def analyse(matrix, addresses, nvswitch_board, wiring=None, lost=(),
            switched_links=None):
    """Read NVLink meshes and degraded links from a matrix.

    Groups: on an NVSwitch board (NVSwitches in sysfs) none, the domains
    are Fabric Manager partitions. Otherwise the NVLink cliques (GPUs all
    directly linked to each other, whatever the count), as a laminar
    family, larger first: each is a mesh. A clique crossing a kept one is
    dropped with a note.

    Link health, from what designed the wiring:

    - ``wiring`` (the board): a pair below its designed count, or without
      the NVLink the board gives it, is degraded;
    - an NVSwitch board: every pair is alike by design, at the count the
      catalogue gives the board (``switched_links``) or else the count
      most GPUs have (ties: the higher); a pair below it, or without
      NVLink, degrades the GPU whose own links are below it (both when
      neither is). With no NVLink in the whole matrix and no board count,
      nothing can be judged against a design: every GPU is degraded (an
      NVSwitch board with no NVLink is not healthy) and a note says so;
    - otherwise the matrix's own symmetry: the counts that every
      NVLinked GPU has are designed (DGX-1 V100: NV1 and NV2 on every
      GPU), a link below the lowest of them is degraded; bridge pairs
      (each GPU one NVLink peer) are compared with each other. Pairs
      without NVLink are not judged (a cube-mesh has them by design).

    :param matrix: :class:`TopoMatrix`.
    :param addresses: PCI addresses in NVML index order (from
        ``nvidia-smi -q``): ``GPUi`` is ``addresses[i]``.
    :param nvswitch_board: True when sysfs lists NVSwitches.
    :param wiring: None, or ``(board name, {frozenset of two addresses:
        NVLink count})`` for a direct NVLink board.
    :param switched_links: None, or ``(board name, NVLinks per pair)``
        for a catalogue NVSwitch board (:data:`SWITCHED_NVLINKS`).
    :param lost: addresses ``nvidia-smi -q`` reports lost (not in
        ``addresses``). A matrix with a column for each is read in PCI bus
        order; one without them gets a note: their NVLink peers are
        unknown, so no mesh holds them and they are not reserved.
    :returns: :class:`NvlinkView`.
    :raises NvlinkError: naming the line, when the matrix and
        ``addresses`` count different GPUs, or GPU pairs have no cell in
        either row (truncated capture).
    """
    name = _by_address(matrix, addresses, lost)
    pairs = _pairs(matrix)
    designed = None
    if wiring is not None:
        board, links = wiring
        designed = (board, {p: links.get(frozenset(name[g] for g in p), 0)
                            for p in pairs})
    linked = [p for p, link in pairs.items() if nv_count(link)]
    notes = []
    unseen = sorted(set(lost) - set(name.values()), key=pci.address_sort_key)
    if unseen and not nvswitch_board:
        notes.append(
            '%s has no column for lost GPU %s, so its NVLink peers are '
            'unknown: the meshes found leave it out and reshape cannot '
            'reserve it; give --board (and module ids) to place it by the '
            "board's wiring, or reserve it by hand"
            % (matrix.source, ', '.join(unseen)))
    if nvswitch_board:
        domains = [frozenset(name.values())]
        groups = dropped = []
    else:
        domains = [frozenset(name[g] for g in c)
                   for c in _components(matrix.gpus, linked)]
        kept, crossing = laminar.mesh_family(matrix.gpus, linked)

        def by_address(cliques):
            return [tuple(sorted((name[g] for g in c),
                                 key=pci.address_sort_key))
                    for c in cliques]
        groups, dropped = by_address(kept), by_address(crossing)
        notes.extend(
            '%s: %d GPUs all NVLinked to each other without NVSwitches in '
            'sysfs: no direct NVLink board links more than 4 GPUs '
            'all-to-all; if this is an NVSwitch board whose switches are '
            'not visible, its domains are Fabric Manager partitions (give '
            'FM data or --board), not this mesh' % (matrix.source, len(c))
            for c in groups if len(c) > 4)
        if dropped:
            notes.append(
                '%s: NVLinked GPUs %s cross the meshes kept and get no '
                'group: a resource provider tree must nest, so instances '
                'are never placed across them' % (matrix.source, '; '.join(
                    '{%s}' % ', '.join(c) for c in dropped)))

    switched = nvswitch_board
    if nvswitch_board and switched_links:
        switched = switched_links
    expected, source, note = _expected_links(pairs, switched, designed)
    if note:
        notes.append('%s: %s' % (matrix.source, note))
    own = _own_links(pairs)
    low = collections.defaultdict(lambda: collections.defaultdict(list))
    unlinked = collections.defaultdict(list)
    down = []
    if nvswitch_board and not expected:
        down = [g for g in matrix.gpus if not own[g]] if pairs else []
    for (a, b), link in pairs.items():
        want, have = expected.get((a, b), 0), nv_count(link)
        if not want or have >= want:
            continue
        ends = ((a, b), (b, a))
        if nvswitch_board:
            # Through the switches a pair is as strong as its weaker GPU:
            # blame the GPU whose own links are below the design, both
            # when neither is (a switch port).
            ends = tuple(e for e in ends if own[e[0]] < want) or ends
        for one, other in ends:
            if have:
                low[one][want].append('%s: %s' % (name[other], link))
            else:
                unlinked[one].append((name[other], link, want))
    degraded = collections.defaultdict(list)
    for gpu in matrix.gpus:
        for want, items in sorted(low[gpu].items()):
            degraded[name[gpu]].append(
                'NVLink to %s below the expected NV%d (%s)'
                % (', '.join(items), want, source))
        if gpu in down:
            degraded[name[gpu]].append(
                'no NVLink to any GPU although the board has NVSwitches '
                '(%s)' % source)
        elif unlinked[gpu] and (designed or isinstance(switched, tuple)):
            degraded[name[gpu]].append('no NVLink to %s (%s)' % (', '.join(
                '%s: %s, expected NV%d' % item for item in unlinked[gpu]),
                source))
        elif unlinked[gpu]:
            degraded[name[gpu]].append(
                'no NVLink to %s although the GPUs share an NVLink domain '
                '(%s)' % (', '.join('%s: %s' % item[:2]
                                    for item in unlinked[gpu]), source))
    return NvlinkView(nvswitch_board, domains, groups, dropped,
                      dict(degraded), notes)


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
