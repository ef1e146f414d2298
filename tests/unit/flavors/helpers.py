"""Topologies for the flavor unit tests, built with the real loader."""

from nvlink_placement.topology import loader

# Real HGX H100 board 1 map (shared/reference/host-formats.md).
H100_MAP = {'0000:19:00.0': 2, '0000:3b:00.0': 4, '0000:4c:00.0': 1,
            '0000:5d:00.0': 3, '0000:9b:00.0': 7, '0000:bb:00.0': 5,
            '0000:cb:00.0': 6, '0000:db:00.0': 8}


def h100_host(name='compute-01', details=None):
    """One HGX H100 host document; ``details`` maps module -> dict."""
    gpus = {}
    for address, module in H100_MAP.items():
        extra = (details or {}).get(module)
        gpus[address] = dict(extra, module_id=module) if extra else module
    return {'board': 'hgx-h100-8gpu', 'gpus': gpus}


def topology(**hosts):
    """A loaded topology of ``hosts`` (name -> host document)."""
    return loader.parse({'version': 1, 'hosts': hosts}, '<test>')


def hosts(**host_docs):
    return list(topology(**host_docs).hosts.values())


def pcie_pairs(name_count=4):
    """A PCIe host without board: bridged pairs by address."""
    addresses = ['0000:%02x:00.0' % (0x10 * (i + 1))
                 for i in range(name_count)]
    return {'groups': [addresses[i:i + 2]
                       for i in range(0, name_count, 2)]}


def by_module(*modules):
    inverse = {m: a for a, m in H100_MAP.items()}
    return frozenset(inverse[m] for m in modules)
