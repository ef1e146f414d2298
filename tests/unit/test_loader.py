import json
import os

import fixtures
from oslotest import base

from nvlink_placement import errors
from nvlink_placement.topology import loader

EXAMPLE = os.path.join(os.path.dirname(__file__), '..', '..', 'etc',
                       'examples', 'hgx-h100.yaml')

H100 = '''version: 1
hosts:
  compute-01:
    board: hgx-h100-8gpu
    gpus:
      "0000:19:00.0": 2
      "0000:3b:00.0": 4
      "0000:4c:00.0": 1
      "0000:5d:00.0": 3
      "0000:9b:00.0": 7
      "0000:bb:00.0": 5
      "0000:cb:00.0": 6
      "0000:db:00.0": 8
'''


class TestLoader(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def write(self, text, name='topo.yaml'):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def problems(self, text, name='topo.yaml'):
        path = self.write(text, name)
        exc = self.assertRaises(errors.TopologyError, loader.load, path)
        return [(loc.replace(path, 'F'), msg) for loc, msg in exc.problems]

    def test_example(self):
        topology = loader.load(EXAMPLE)
        self.assertEqual(['compute-01', 'compute-02'], list(topology.hosts))
        host = topology.hosts['compute-02']
        # gpus_file with 8-digit upper-case keys and string module ids.
        self.assertEqual(1, host.gpus['0000:3a:00.0'].module_id)
        names = {g.name: (g.members, g.parent) for g in host.groups}
        self.assertEqual(
            (('0000:9a:00.0', '0000:ab:00.0'),
             'compute-02_nvlink-group-of-4-b'),
            names['compute-02_nvlink-group-of-2-d'])
        self.assertEqual('compute-02_nvlink-group-of-2-c',
                         host.parent_of_gpu('0000:db:00.0'))

    def test_json_and_custom_board_and_prefix(self):
        doc = {'version': 1, 'group_trait_prefix': 'CUSTOM_NVL',
               'boards': {'quad': {'gpus': [1, 2, 3, 4],
                                   'groups': [[1, 2], [3, 4]]}},
               'hosts': {'h1': {'board': 'quad', 'gpus': {
                   '0000:01:00.0': 1, '0000:02:00.0': '2',
                   '0000:03:00.0': 3, '0000:04:00.0': 4}}}}
        topology = loader.load(self.write(json.dumps(doc), 't.json'))
        groups = topology.hosts['h1'].groups
        self.assertEqual(['h1_nvlink-group-of-2-a', 'h1_nvlink-group-of-2-b'],
                         [g.name for g in groups])
        self.assertEqual({'CUSTOM_NVL2'}, {g.trait for g in groups})

    def test_groups_by_address_without_board(self):
        topology = loader.load(self.write(
            'version: 1\nhosts:\n  pcie-07:\n    groups:\n'
            '      - ["0000:31:00.0", "0000:17:00.0"]\n'
            '      - ["0000:4b:00.0", "0000:ca:00.0"]\n'))
        host = topology.hosts['pcie-07']
        self.assertEqual(4, len(host.gpus))
        # Lettered by lowest address when there are no module ids.
        self.assertEqual(
            [('pcie-07_nvlink-group-of-2-a', ('0000:17:00.0',
                                              '0000:31:00.0')),
             ('pcie-07_nvlink-group-of-2-b', ('0000:4b:00.0',
                                              '0000:ca:00.0'))],
            [(g.name, g.members) for g in host.groups])

    def test_whole_host_and_single_groups_create_nothing(self):
        topology = loader.load(self.write(
            'version: 1\nhosts:\n  h:\n    groups:\n'
            '      - ["0000:01:00.0", "0000:02:00.0"]\n'
            '      - ["0000:01:00.0"]\n'))
        self.assertEqual([], topology.hosts['h'].groups)

    def test_unknown_keys_everywhere(self):
        found = self.problems('version: 1\nfoo: 1\nhosts:\n  c1:\n'
                              '    board: hgx-h100-8gpu\n    gpu: {}\n')
        self.assertEqual([('F: foo', 'unknown key'),
                          ('F: hosts.c1.gpu',
                           "unknown key (did you mean 'gpus'?)"),
                          ('F: hosts.c1', 'a host with a board needs gpus '
                           'or gpus_file (PCI address -> module id)')],
                         found)

    def test_version(self):
        found = self.problems('version: 2\nhosts: {}\n')
        self.assertEqual([('F: version', 'unsupported format version 2 '
                           '(this tool reads version 1)')], found)

    def test_bad_module_and_address_values(self):
        found = self.problems(H100.replace('"0000:19:00.0": 2',
                                           '"0000:19:00.0": two'))
        self.assertEqual('F: hosts.compute-01.gpus["0000:19:00.0"]',
                         found[0][0])
        self.assertIn("'two' is not valid here", found[0][1])

    def test_semantic_problems_are_all_listed(self):
        text = H100.replace('"0000:19:00.0": 2', '"0000:19:00.0": 9')
        text = text.replace('"0000:db:00.0": 8', '"0000:DB:00.0": 1\n'
                            '      "zz:00.0": 8\n'
                            '      "00000000:db:00.0": 8')
        found = dict(self.problems(text))
        self.assertEqual(
            'module id 9 is not on board hgx-h100-8gpu (module ids '
            '1, 2, 3, 4, 5, 6, 7, 8)',
            found['F: hosts.compute-01.gpus["0000:19:00.0"]'])
        self.assertEqual("'zz:00.0' is not a PCI address (expected "
                         "dddd:bb:dd.f)",
                         found['F: hosts.compute-01.gpus["zz:00.0"]'])
        self.assertEqual('address 0000:db:00.0 appears twice on this host',
                         found['F: hosts.compute-01.gpus'
                               '["00000000:db:00.0"]'])
        self.assertEqual('module id 1 is also given to 0000:4c:00.0',
                         found['F: hosts.compute-01.gpus["0000:DB:00.0"]'])
        self.assertEqual(4, len(found))

    def test_duplicate_yaml_key(self):
        path = self.write(H100 + '      "0000:19:00.0": 2\n')
        exc = self.assertRaises(errors.TopologyError, loader.load, path)
        self.assertIn("duplicate key '0000:19:00.0'", str(exc))
        self.assertIn(path, str(exc))

    def test_unknown_board(self):
        found = self.problems(H100.replace('hgx-h100-8gpu', 'hgx-z1'))
        self.assertEqual('F: hosts.compute-01.board', found[0][0])
        self.assertIn("unknown board 'hgx-z1'; boards defined in the file: "
                      "none; built-in: ", found[0][1])
        self.assertIn('hgx-b200-8gpu', found[0][1])
        # A near name: the nearest, not the whole catalogue.
        found = self.problems(H100.replace('hgx-h100-8gpu', 'hgx-h100-8gp'))
        self.assertEqual([('F: hosts.compute-01.board',
                           "unknown board 'hgx-h100-8gp'; did you mean "
                           "hgx-h100-8gpu or hgx-h800-8gpu or "
                           "hgx-h200-8gpu?")], found[:1])

    def test_crossing_groups(self):
        found = self.problems(
            'version: 1\nhosts:\n  h:\n    groups:\n'
            '      - ["0000:01:00.0", "0000:02:00.0"]\n'
            '      - ["0000:02:00.0", "0000:03:00.0"]\n'
            '      - ["0000:04:00.0", "0000:05:00.0"]\n')
        self.assertEqual([('F: hosts.h.groups[1]',
                           "group ['0000:02:00.0', '0000:03:00.0'] crosses "
                           "group 0 ['0000:01:00.0', '0000:02:00.0']: NVLink "
                           "groups must be disjoint or nested")], found)

    def test_custom_board_not_laminar(self):
        found = self.problems(
            'version: 1\nboards:\n  b:\n    gpus: [1, 2, 3]\n'
            '    groups: [[1, 2], [2, 3], [4, 1]]\nhosts: {}\n')
        self.assertEqual(
            [('F: boards.b.groups[2]', 'module ids [4] are not in gpus'),
             ('F: boards.b.groups[1]',
              'group [2, 3] crosses group 0 [1, 2]: NVLink groups must be '
              'disjoint or nested'),
             ('F: boards.b.groups[2]',
              'group [1, 4] crosses group 0 [1, 2]: NVLink groups must be '
              'disjoint or nested')], found)

    def test_gpus_file_errors_name_the_mapping_file(self):
        self.write('{"0000:19:00.0": "x"}', 'maps/m.json')
        found = self.problems('version: 1\nhosts:\n  h:\n'
                              '    board: hgx-h100-8gpu\n'
                              '    gpus_file: maps/m.json\n')
        self.assertEqual(1, len(found))
        self.assertTrue(found[0][0].endswith('maps/m.json: '
                                             '["0000:19:00.0"]'), found)

    def test_gpus_file_missing(self):
        found = self.problems('version: 1\nhosts:\n  h:\n'
                              '    board: hgx-h100-8gpu\n'
                              '    gpus_file: nope.json\n')
        self.assertEqual('F: hosts.h.gpus_file', found[0][0])
        self.assertIn('No such file or directory', found[0][1])

    def test_name_too_long(self):
        host = 'h' * 181   # + '_nvlink-group-of-4-a' = 201 characters
        found = self.problems(H100.replace('compute-01', host))
        self.assertEqual('F: hosts.%s' % host, found[0][0])
        self.assertIn('characters; Placement allows 200', found[0][1])

    def test_board_and_groups_must_agree(self):
        text = H100 + ('    groups:\n'
                       '      - ["0000:4c:00.0", "0000:19:00.0"]\n')
        found = self.problems(text)
        self.assertEqual('F: hosts.compute-01.groups', found[0][0])
        self.assertIn('disagree with board hgx-h100-8gpu', found[0][1])

    def test_excluded_gpu_leaves_groups(self):
        text = H100.replace('"0000:5d:00.0": 3',
                            '"0000:5d:00.0": {module_id: 3, excluded: MIG}')
        host = loader.load(self.write(text)).hosts['compute-01']
        # {1,3} lost module 3: a single GPU creates no group, and the other
        # groups keep their names.
        self.assertEqual(['compute-01_nvlink-group-of-4-a',
                          'compute-01_nvlink-group-of-4-b',
                          'compute-01_nvlink-group-of-2-b',
                          'compute-01_nvlink-group-of-2-c',
                          'compute-01_nvlink-group-of-2-d'],
                         [g.name for g in host.groups])
        quad = [g for g in host.groups
                if g.name == 'compute-01_nvlink-group-of-4-a'][0]
        self.assertEqual((2, 4, 1), quad.modules)

    def test_syntax_error_has_line(self):
        path = self.write('version: 1\nhosts: [\n')
        exc = self.assertRaises(errors.TopologyError, loader.load, path)
        self.assertIn('line 3', str(exc))
        path = self.write('{"version": 1,}', 'x.json')
        exc = self.assertRaises(errors.TopologyError, loader.load, path)
        self.assertIn('x.json: line 1 column 15: invalid JSON', str(exc))

    def test_explicit_groups_lettered_by_module_id(self):
        # Same pairs as the board, given by address: same names (DESIGN
        # section 4: letters by lowest module id).
        text = H100.replace('    board: hgx-h100-8gpu\n', '') + (
            '    groups:\n'
            '      - ["0000:19:00.0", "0000:3b:00.0"]\n'
            '      - ["0000:4c:00.0", "0000:5d:00.0"]\n')
        host = loader.load(self.write(text)).hosts['compute-01']
        self.assertEqual(
            [('compute-01_nvlink-group-of-2-a', (1, 3)),
             ('compute-01_nvlink-group-of-2-b', (2, 4))],
            sorted((g.name, tuple(sorted(g.modules))) for g in host.groups))

    def test_unquoted_addresses_stay_addresses(self):
        # YAML 1.1 would read 0000:19:00.0 as the base-60 float 1140.0.
        text = H100.replace('"0000:19:00.0"', '0000:19:00.0').replace(
            '"0000:5d:00.0"', '0000:5d:00.0')
        host = loader.load(self.write(text)).hosts['compute-01']
        self.assertEqual(2, host.gpus['0000:19:00.0'].module_id)
        groups = loader.load(self.write(
            'version: 1\nhosts:\n  h:\n    groups:\n'
            '      - [0000:17:00.0, 0000:31:00.0]\n'
            '      - [0000:45:00.0, 0000:46:00.0]\n')).hosts['h'].groups
        self.assertEqual(('0000:17:00.0', '0000:31:00.0'), groups[0].members)

    def test_one_run_reports_every_problem(self):
        text = ('version: 1\nfoo: 1\nhosts:\n'
                '  bad-type:\n    gpus: [1, 2]\n'
                '  c1:\n    bord: x\n    board: hgx-h100-8gpu\n'
                '    gpus:\n      "0000:19:00.0": 9\n'
                '      "0000:3b:00.0": 4\n      "0000:4c:00.0": 4\n')
        found = self.problems(text)
        self.assertEqual(
            [('F: foo', 'unknown key'),
             ('F: hosts.bad-type.gpus',
              'expected a mapping, got a list [1, 2]'),
             ('F: hosts.c1.bord', "unknown key (did you mean 'board'?)"),
             ('F: hosts.c1.gpus["0000:19:00.0"]',
              'module id 9 is not on board hgx-h100-8gpu (module ids 1, 2, '
              '3, 4, 5, 6, 7, 8)'),
             ('F: hosts.c1.gpus["0000:4c:00.0"]',
              'module id 4 is also given to 0000:3b:00.0')], found)


class TestMeshes(TestLoader):
    """``mesh: true``: any N of the group's GPUs are linked."""

    QUAD = ['0000:19:00.0', '0000:3b:00.0', '0000:9b:00.0', '0000:bb:00.0']

    def test_whole_host_mesh_makes_its_provider(self):
        topology = loader.parse({'version': 1, 'hosts': {'h': {'groups': [
            {'members': self.QUAD, 'mesh': True}]}}}, 't.yaml')
        group, = topology.hosts['h'].groups
        self.assertEqual(('h_nvlink-group-of-4-a', 4, 'CUSTOM_PCI_GROUP4',
                          True, (2, 4),
                          ('CUSTOM_PCI_GROUP2', 'CUSTOM_PCI_GROUP4'), None),
                         (group.name, group.size, group.trait, group.mesh,
                          group.sizes, group.traits, group.parent))
        host = topology.hosts['h']
        self.assertEqual(group.name, host.domain_label(self.QUAD[1:3], 2))
        self.assertIsNone(host.domain_label(self.QUAD[:3], 3))
        self.assertEqual({frozenset(self.QUAD): group.name}, host.meshes(2))
        # The same group without mesh: a whole-host domain, no provider.
        topology = loader.parse({'version': 1, 'hosts': {'h': {'groups': [
            {'members': self.QUAD}]}}}, 't.yaml')
        self.assertEqual([], topology.hosts['h'].groups)

    def test_board_meshes_with_a_custom_prefix(self):
        doc = {'version': 1, 'group_trait_prefix': 'CUSTOM_NVL',
               'boards': {'two-quads': {'gpus': list(range(1, 9)), 'groups': [
                   list(range(1, 9)),
                   {'members': [1, 2, 3, 4], 'mesh': True},
                   {'members': [5, 6, 7, 8], 'mesh': False}, [5, 6]]}},
               'hosts': {'h': {'board': 'two-quads', 'gpus': {
                   '0000:%02x:00.0' % m: m for m in range(1, 9)}}}}
        groups = loader.parse(doc, 't.yaml').hosts['h'].groups
        self.assertEqual(
            [('h_nvlink-group-of-4-a', True, ('CUSTOM_NVL2', 'CUSTOM_NVL4')),
             ('h_nvlink-group-of-4-b', False, ('CUSTOM_NVL4',)),
             ('h_nvlink-group-of-2-a', False, ('CUSTOM_NVL2',))],
            [(g.name, g.mesh, g.traits) for g in groups])

    def test_catalog_mesh_board_and_excluded_gpu(self):
        gpus = {'0000:01:00.0': 1, '0000:41:00.0': 2, '0000:81:00.0': 3,
                '0000:c1:00.0': {'module_id': 4,
                                 'excluded': 'MIG mode enabled'}}
        doc = {'version': 1, 'hosts': {'h': {'board': 'hgx-a100-4gpu',
                                             'gpus': gpus}}}
        group, = loader.parse(doc, 't.yaml').hosts['h'].groups
        # The excluded GPU leaves the mesh; the name and traits stay.
        self.assertEqual(('h_nvlink-group-of-4-a', 3, (2, 4)),
                         (group.name, len(group.members), group.sizes))

    def test_mesh_holds_no_group(self):
        found = self.problems(
            'version: 1\nhosts:\n  h:\n    groups:\n'
            '      - members: ["0000:01:00.0", "0000:02:00.0", '
            '"0000:03:00.0"]\n        mesh: true\n'
            '      - ["0000:01:00.0", "0000:02:00.0"]\n'
            '      - ["0000:04:00.0", "0000:05:00.0"]\n')
        self.assertEqual([(
            'F: hosts.h.groups[1]',
            "group ['0000:01:00.0', '0000:02:00.0'] lies inside mesh 0 "
            "['0000:01:00.0', '0000:02:00.0', '0000:03:00.0'], which already "
            "makes any 2 of its GPUs an NVLink domain: drop the group")],
            found)

    def test_mesh_must_be_boolean(self):
        found = self.problems(
            'version: 1\nhosts:\n  h:\n    groups:\n'
            '      - members: ["0000:01:00.0", "0000:02:00.0"]\n'
            '        mesh: yes please\n')
        self.assertEqual([('F: hosts.h.groups[0].mesh',
                           "expected true or false, got a string "
                           "'yes please'")], found)

    def test_mistakes_in_the_mapping_form_of_a_group(self):
        # The list form's "expected a list" would hide what is wrong.
        group = ('version: 1\nhosts:\n  h:\n    groups:\n      - %s\n')
        self.assertEqual([('F: hosts.h.groups[0]', "unknown key(s) 'meshh' "
                           "(did you mean 'mesh'?)")], self.problems(
            group % '{members: ["0000:01:00.0", "0000:02:00.0"], meshh: 1}'))
        self.assertEqual([('F: hosts.h.groups[0].members',
                           "expected a list, got a string '0000:01:00.0'")],
                         self.problems(group % '{members: "0000:01:00.0"}'))
        self.assertEqual([('F: hosts.h.groups[0]',
                           "missing required key 'members'")],
                         self.problems(group % '{mesh: true}'))
        self.assertEqual([('F: boards.b.groups[0].mesh',
                           'expected true or false, got an integer 1')],
                         self.problems(
                             'version: 1\nboards:\n  b:\n    gpus: [1, 2]\n'
                             '    groups: [{members: [1, 2], mesh: 1}]\n'
                             'hosts: {}\n'))

    def test_board_and_groups_must_agree_on_meshes(self):
        found = self.problems(
            'version: 1\nhosts:\n  h:\n    board: hgx-h100-4gpu\n'
            '    gpus: {"0000:19:00.0": 1, "0000:3b:00.0": 2, '
            '"0000:9b:00.0": 3, "0000:bb:00.0": 4}\n'
            '    groups:\n      - ["0000:19:00.0", "0000:3b:00.0", '
            '"0000:9b:00.0", "0000:bb:00.0"]\n')
        self.assertEqual([('F: hosts.h.groups', 'groups disagree with board '
                           'hgx-h100-4gpu mapped through the module ids; fix '
                           'the mapping or drop one of them')], found)


class TestTraitPrefix(base.BaseTestCase):
    """Traits the prefix makes read back one way and fit Placement."""

    def prefix_problems(self, prefix, gpus=8):
        """Problems of an HGX host of ``gpus`` GPUs under ``prefix``."""
        board = {8: 'hgx-h100-8gpu', 16: 'hgx-2-16gpu'}[gpus]
        doc = {'version': 1, 'group_trait_prefix': prefix, 'hosts': {
            'h': {'board': board, 'gpus': {
                '0000:%02x:00.0' % (8 * m): m for m in range(1, gpus + 1)}}}}
        try:
            loader.parse(doc, 'F')
        except errors.TopologyError as exc:
            return exc.problems
        return []

    def test_prefix_ending_in_a_digit_is_refused(self):
        self.assertEqual([(
            'F: group_trait_prefix',
            'CUSTOM_NVL2 ends in a digit, so its traits read two ways '
            '(CUSTOM_NVL2 + 4 = CUSTOM_NVL24, also a trait of size 24; '
            'member trait CUSTOM_NVL22_MEMBER0 reads as size 22): end it '
            'with a letter or "_", e.g. CUSTOM_NVL2_')],
            self.prefix_problems('CUSTOM_NVL2'))
        self.assertEqual([], self.prefix_problems('CUSTOM_NVL2_'))
        self.assertEqual([], self.prefix_problems('CUSTOM_A100X'))

    def test_prefix_holding_the_member_separator_is_refused(self):
        self.assertEqual([(
            'F: group_trait_prefix',
            'CUSTOM_G_MEMBER holds _MEMBER, which separates size and index '
            'in member traits (CUSTOM_G_MEMBER2_MEMBER0): choose a prefix '
            'without it')], self.prefix_problems('CUSTOM_G_MEMBER'))

    def test_every_trait_fits_placement(self):
        # 8 GPUs: the longest trait is <prefix>8_MEMBER7, 9 more
        # characters than the prefix; 16 GPUs: <prefix>16_MEMBER15, 11.
        self.assertEqual([], self.prefix_problems('CUSTOM_' + 'A' * 239))
        longest = 'CUSTOM_' + 'A' * 240 + '8_MEMBER7'
        self.assertEqual(256, len(longest))
        self.assertEqual([(
            'F: group_trait_prefix',
            'host h makes trait %s, 256 characters; Placement allows 255: '
            'shorten the prefix to at most 246 characters' % longest)],
            self.prefix_problems('CUSTOM_' + 'A' * 240))
        self.assertEqual([], self.prefix_problems('CUSTOM_' + 'A' * 237,
                                                  gpus=16))
        longest = 'CUSTOM_' + 'A' * 238 + '16_MEMBER15'
        self.assertEqual([(
            'F: group_trait_prefix',
            'host h makes trait %s, 256 characters; Placement allows 255: '
            'shorten the prefix to at most 244 characters' % longest)],
            self.prefix_problems('CUSTOM_' + 'A' * 238, gpus=16))
