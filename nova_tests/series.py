"""Whether the installed Nova has the series of ``nova-patches/``.

Detected by behaviour, not by a marker: Nova's own extra spec validator
(compute API 2.86+) accepts the named alias ``alias:count:prefix`` and
``[filter_scheduler] allow_pci_traits_in_flavor`` exists. Tests that need
the series skip without it, unless ``NVLINK_REQUIRE_NOVA_SERIES=1`` (set
by ``tox -e nova-patched``) makes them fail instead; tests of what
upstream Nova refuses skip with it.
"""

import functools
import os
import unittest

from nova.api.validation.extra_specs import validators
import nova.conf
from nova import exception

REQUIRE = 'NVLINK_REQUIRE_NOVA_SERIES'
MISSING = ('the installed Nova lacks the named PCI alias request groups '
           '(nova-patches/, applied by tox -e nova-patched)')
PRESENT = ('the installed Nova has the named PCI alias request groups '
           '(nova-patches/): this test is about upstream Nova 34 refusing '
           'them')


def installed():
    """True when Nova takes ``alias:count:prefix`` and the option exists."""
    try:
        validators.validate('pci_passthrough:alias', 'a:1:_a')
    except exception.ValidationError:
        return False
    return 'allow_pci_traits_in_flavor' in nova.conf.CONF.filter_scheduler


def requires_series(test):
    """Skip a test class or method without the series.

    With ``NVLINK_REQUIRE_NOVA_SERIES=1`` it fails instead.
    """
    if installed():
        return test
    if os.environ.get(REQUIRE) != '1':
        return unittest.skip(MISSING)(test)
    message = '%s=1 but %s' % (REQUIRE, MISSING)
    if not isinstance(test, type):
        @functools.wraps(test)
        def fail(self, *args, **kwargs):
            self.fail(message)
        return fail

    @functools.wraps(test.setUp)
    def fail_setup(self):
        self.fail(message)

    test.setUp = fail_setup
    return test


upstream_only = unittest.skipIf(installed(), PRESENT)
