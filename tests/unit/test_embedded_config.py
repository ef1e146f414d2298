"""The embedded Placement's wide-tree settings on the installed Placement.

Each of ``embedded.WIDE_TREE_OVERRIDES`` is set where the installed
openstack-placement registers the option and left out where it does not:
``[workarounds] optimize_for_wide_provider_trees`` (Launchpad bug 2126751)
is in openstack-placement 13.0.1 (2025.1) and 15.0.0 on, not in 11.0.1
(2024.1, what requirements.txt allows): there the embedded Placement runs
with the two ``[placement]`` ones only, instead of failing with
oslo.config's "no such group [workarounds]".
"""

from oslo_config import cfg
from oslotest import base
from placement import conf as placement_conf

from nvlink_placement.placement import embedded


def registered():
    """(group, option) pairs the installed Placement registers."""
    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    return {(group, option)
            for group, option, _ in embedded.WIDE_TREE_OVERRIDES
            if group in conf and option in conf[group]}


class TestWideTreeSettings(base.BaseTestCase):

    def test_set_where_placement_has_them(self):
        known = registered()
        # Every Placement the tool supports has the two [placement] ones
        # (openstack-placement 11.0.1 and later).
        self.assertLessEqual(
            {('placement', 'max_allocation_candidates'),
             ('placement', 'allocation_candidates_generation_strategy')},
            known)
        conf = embedded._config()
        self.assertEqual(1000, conf.placement.max_allocation_candidates)
        self.assertEqual(
            'breadth-first',
            conf.placement.allocation_candidates_generation_strategy)
        if ('workarounds', 'optimize_for_wide_provider_trees') in known:
            self.assertIs(
                True, conf.workarounds.optimize_for_wide_provider_trees)
        else:
            # openstack-placement 11.0.1 has no [workarounds] at all.
            self.assertNotIn('workarounds', conf)

    def test_embedded_placement_answers(self):
        with embedded.EmbeddedPlacement() as client:
            body = client.get('/resource_providers')
        self.assertEqual([], body['resource_providers'])
