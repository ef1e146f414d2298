"""The simulator's choice rule against Nova 34's scheduler.

Two HGX H100 computes on the flat tree (as Nova reports them), upstream
flavors of 1 and 2 GPUs (``pci_passthrough:alias=h100:N``). Nova's own
scheduler places a sequence of 16 boots with 6 deletes in between; then
every server is deleted and the simulator's engine
(:func:`nvlink_placement.simulate.engine.simulate`) replays the same
sequence against the same Placement, building the query with the tool's
code and choosing with its own rule (:mod:`nvlink_placement.simulate.
choice`, as ``openstack nvlink simulate`` runs it): the modelled weighers,
hosts of equal weight in the order of Nova's host set, which the simulator
builds in this process as Nova's scheduler does (same hash seed), and the
first candidate of the chosen host in Placement's order. Nothing is told
to the simulator: the hosts and the very GPUs must come out the same.

A spy on the scheduler's ``get_allocation_candidates`` also checks the
rule directly on each answer Nova got: Nova took the chosen host's first
allocation request, and the host the simulator's rule ranks first.

The boots are spaced as in a cloud where they come minutes apart: the
computes' periodic resource updates run after each, so no build is still
counted as an I/O operation (``IoOpsWeigher``); back to back, Nova
spreads instead of stacking, which the simulator does not model.
"""

import fixtures
from nova.scheduler.client import report

from nova_tests import base
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import request
from nvlink_placement.simulate import choice
from nvlink_placement.simulate import engine
from nvlink_placement.simulate import workload as workload_mod
from nvlink_placement.topology import loader

HOSTS = ('compute-01', 'compute-02')
#: (kind, server number, GPUs): 16 boots, 6 deletes, at most 10 servers
#: alive (the functional framework's instance quota) and 15 GPUs in use.
SEQUENCE = [('boot', 0, 2), ('boot', 1, 1), ('boot', 2, 2), ('boot', 3, 2),
            ('delete', 1, 1), ('boot', 4, 1), ('boot', 5, 2),
            ('boot', 6, 1), ('delete', 2, 2), ('boot', 7, 2),
            ('boot', 8, 1), ('boot', 9, 2), ('delete', 5, 2),
            ('boot', 10, 1), ('delete', 0, 2), ('boot', 11, 2),
            ('boot', 12, 1), ('delete', 8, 1), ('boot', 13, 2),
            ('delete', 4, 1), ('boot', 14, 1), ('boot', 15, 1)]


class TestChoiceRule(base.NovaTestCase):

    def setUp(self):
        super().setUp()
        for host in HOSTS:
            self.start_board(host)
        self.answers = []
        original = report.SchedulerReportClient.get_allocation_candidates

        def spy(client, context, resources):
            answer = original(client, context, resources)
            self.answers.append(answer)
            return answer

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.SchedulerReportClient.'
            'get_allocation_candidates', spy))
        self.topology = loader.parse(base.topology_document(HOSTS),
                                     '<nova_tests>')
        aliases = inputs.parse_alias_config(base.nova_config()[
            ('pci', 'alias')])
        self.flavors = {}
        for size in (1, 2):
            specs = {'pci_passthrough:alias': '%s:%d' % (base.ALIAS, size)}
            flavor = {'name': 'upstream.%dx' % size, 'vcpus': size,
                      'ram': 512 * size, 'disk': 1, 'ephemeral': 0,
                      'swap': 0, 'extra_specs': specs}
            flavor['id'] = self._create_flavor(
                name=flavor['name'], vcpu=flavor['vcpus'],
                memory_mb=flavor['ram'], disk=flavor['disk'], ephemeral=0,
                extra_spec=flavor['extra_specs'])
            self.flavors[size] = (flavor, request.build(
                inputs.flavor_from_dict(flavor), aliases,
                nova=base.tool_nova()))

    def names(self):
        return {uuid: name for name, (uuid, _) in self.providers().items()}

    def gpus_of(self, allocations, names):
        """``(host, sorted GPU provider names)`` of an allocation."""
        gpus = sorted(names[u] for u, a in allocations.items()
                      if base.RC in a['resources'])
        return self.providers()[gpus[0]][1], gpus

    def boot_with_nova(self):
        """Run :data:`SEQUENCE` through Nova; returns the picks and ties.

        :returns: ``(picks, ties)``: server number -> ``(host, GPU
            provider names)``, and the numbers of the boots where the
            hosts were tied on weight.
        """
        names = self.names()
        servers, picks, ties = {}, {}, []
        for kind, number, size in SEQUENCE:
            if kind == 'delete':
                self._delete_server(servers.pop(number))
                self._run_periodics()
                continue
            server = self._create_server(
                flavor_id=self.flavors[size][0]['id'], networks=[])
            # Boots minutes apart: the resource trackers have reported
            # the finished builds (no I/O ops in flight, see choice.py).
            self._run_periodics()
            servers[number] = server
            allocations = self._get_allocations_by_server_uuid(server['id'])
            host, gpus = self.gpus_of(allocations, names)
            picks[number] = (host, gpus)
            alloc_reqs, summaries, _ = self.answers[-1]
            states = choice.by_host({'allocation_requests': alloc_reqs,
                                     'provider_summaries': summaries})
            weights = dict(zip([names[h.uuid] for h in states],
                               choice.weigh(states)))
            if len(set(weights.values())) < len(weights):
                ties.append(number)
            # The simulator's rule ranks Nova's host first.
            ranked = choice.rank(states, {h.uuid: names[h.uuid]
                                          for h in states})
            self.assertEqual(host, names[ranked[0][0].uuid],
                             (number, weights))
            # Nova claimed that host's first allocation request.
            first = next(h for h in states if names[h.uuid] == host)
            self.assertEqual((host, gpus), self.gpus_of(
                first.candidates[0]['allocations'], names), number)
        for server in servers.values():
            self._delete_server(server)
        return picks, ties

    def test_simulator_picks_what_nova_picks(self):
        nova_picks, ties = self.boot_with_nova()
        self.assertEqual(16, len(nova_picks))
        # The rule for equal weights is exercised: the first boot finds
        # both computes empty.
        self.assertIn(0, ties)
        spanning = [n for n, (_, gpus) in nova_picks.items()
                    if len(gpus) == 2 and self.topology.hosts[
                        gpus[0].split('_')[0]].domain_label(
                            [g.split('_', 1)[1].lower() for g in gpus],
                            2) is None]
        events = [workload_mod.Event(float(i), kind, number, size)
                  for i, (kind, number, size) in enumerate(SEQUENCE)]
        workload = workload_mod.Workload(
            '<sequence>', 0, len(events), None, None,
            ((1, 1.0, None), (2, 1.0, None)))
        result = engine.simulate(
            self.client(), list(self.topology.hosts.values()), engine.FLAT,
            workload, self.flavors, base.RC, events=iter(events))
        sim_picks = {p.index: (p.host, sorted(
            self.topology.hosts[p.host].gpu_provider_name(a)
            for a in p.gpus)) for p in result.picks}
        self.assertEqual(nova_picks, sim_picks)
        self.assertEqual(len(spanning), result.counts[2].spanning)
        self.assertEqual(16, sum(c.placed for c in result.counts.values()))
