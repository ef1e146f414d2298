"""Generated keys against the patterns Nova's extra spec validators use.

Copied from openstack/nova (flavor extra spec validation, API microversion
2.86+); ``base.ExtraSpecValidator`` turns ``{param}`` in a name into a
named group and matches names and values with ``re.fullmatch``:

- ``nova/api/validation/extra_specs/pci_passthrough.py``:
  ``pci_passthrough:alias`` value ``[^:]+:\\d+(?:\\s*,\\s*[^:]+:\\d+)*``.
- ``nova/api/validation/extra_specs/resources.py``:
  ``resources{group}:CUSTOM_{resource}``, group ``([a-zA-Z0-9_-]{1,64})?``,
  resource ``[A-Z0-9_]+``, integer value.
- ``nova/api/validation/extra_specs/traits.py``:
  ``trait{group}:CUSTOM_{trait}``, same group pattern, trait
  ``[A-Z0-9_]+``, value ``required`` or ``forbidden``.
- ``nova/api/validation/extra_specs/null.py``: ``group_policy`` value
  ``isolate`` or ``none``.
- ``nova/api/validation/extra_specs/validators.py``: a key whose namespace
  no validator registers (``placement:``) is accepted unchecked.
"""

import re

from oslotest import base

from nvlink_placement.flavors import generate
from nvlink_placement.flavors import inputs
from nvlink_placement.flavors import request
from tests.unit.flavors import helpers

GROUP = r'([a-zA-Z0-9_-]{1,64})?'
ALIAS_VALUE = r'[^:]+:\d+(?:\s*,\s*[^:]+:\d+)*'
RESOURCES_NAME = 'resources{group}:CUSTOM_{resource}'
TRAIT_NAME = 'trait{group}:CUSTOM_{trait}'
TRAIT_VALUES = ('required', 'forbidden')
GROUP_POLICY_VALUES = ('isolate', 'none')


def name_regex(name, **params):
    """``base.ExtraSpecValidator.__post_init__``'s name regex."""
    for param, pattern in params.items():
        name = name.replace('{%s}' % param, '(?P<%s>%s)' % (param, pattern))
    return name


RESOURCES_RE = name_regex(RESOURCES_NAME, group=GROUP, resource='[A-Z0-9_]+')
TRAIT_RE = name_regex(TRAIT_NAME, group=GROUP, trait='[A-Z0-9_]+')
H100 = helpers.hosts(**{'compute-01': helpers.h100_host()})


class TestNovaPatterns(base.BaseTestCase):

    def test_trait_keys(self):
        seen = set()
        for flavor in generate.generate(H100, 'h100').flavors:
            for key, value in flavor.extra_specs.items():
                if key.startswith('trait'):
                    match = re.fullmatch(TRAIT_RE, key)
                    self.assertIsNotNone(match, key)
                    self.assertIn(match.group('group'), {
                        '_nvl%d' % flavor.size} | {
                        '_h100-%d' % i for i in range(flavor.size)})
                    self.assertIn(value, TRAIT_VALUES)
                    seen.add(match.group('group'))
        # Every GPU group of the 2-, 4- and 8-GPU flavors has its member
        # trait, the domain flavors their resourceless group.
        self.assertEqual({'_nvl2', '_nvl4'} | {
            '_h100-%d' % i for i in range(8)}, seen)

    def test_upstream_alias_values(self):
        values = [f.extra_specs['pci_passthrough:alias'] for f in
                  generate.generate(H100, 'h100',
                                    dialect=generate.UPSTREAM).flavors]
        self.assertEqual(['h100:1', 'h100:8'], values)
        for value in values:
            self.assertIsNotNone(re.fullmatch(ALIAS_VALUE, value))

    def test_named_alias_needs_the_downstream_validator(self):
        # The MOSK form fails upstream validation (HTTP 400 from the
        # flavor API at 2.86+): it cannot be set by mistake on upstream.
        self.assertIsNone(re.fullmatch(ALIAS_VALUE, 'h100:2:_h100'))

    def test_gpu_groups_fit_the_resources_pattern(self):
        # The groups Nova derives from the alias, written as flavor keys.
        aliases = {'h100': request.Alias('h100', 'CUSTOM_PCI_10DE_2330')}
        for flavor in generate.generate(H100, 'h100').flavors:
            built = request.build(inputs.flavor_from_dict(
                flavor.as_dict()), aliases)
            for suffix in built.gpu_groups:
                key = 'resources%s:CUSTOM_PCI_10DE_2330' % suffix
                self.assertIsNotNone(re.fullmatch(RESOURCES_RE, key), key)

    def test_group_policy_values(self):
        sizes = []
        for flavor in generate.generate(H100, 'h100').flavors:
            policy = flavor.extra_specs.get(generate.POLICY_KEY)
            if policy is not None:
                self.assertIn(policy, GROUP_POLICY_VALUES)
                sizes.append(flavor.size)
        # Every flavor with more than one request group has one (the mosk
        # whole-host flavor names its 8 groups too).
        self.assertEqual([2, 4, 8], sizes)
