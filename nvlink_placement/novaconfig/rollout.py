"""The rollout order, checked before flavors are created.

Member-trait flavors require GPU providers with ``<prefix>N_MEMBER<i>``
traits, which only Nova writes, from the ``[pci] device_spec`` entries of
``openstack nvlink nova-config``. Created before any nova-compute reports
them, such a flavor finds no host (Placement answers no candidates, or
HTTP 400 for a trait it has never seen). The order is: Nova entries,
member traits seen by ``check``, reshape, flavors (doc/source/
operator-guide.rst).
"""

from nvlink_placement import errors
from nvlink_placement.topology import members

#: Placement microversion of ``GET /traits?associated=true`` (1.6).
TRAITS_MICROVERSION = '1.6'
#: The command-line option that skips the check.
SKIP_OPTION = '--skip-member-trait-check'


def member_traits_of(spec):
    """Sorted member traits a :class:`generate.FlavorSpec` requires."""
    return sorted({key.split(':', 1)[1] for key, value in
                   spec.extra_specs.items()
                   if key.startswith('trait') and ':' in key and
                   value == 'required' and
                   members.parse_any(key.split(':', 1)[1])})


def unreported(client, specs):
    """Member traits of ``specs`` that no resource provider has.

    One ``GET /traits?name=in:...&associated=true`` (microversion 1.6):
    traits at least one provider carries.

    :returns: dict flavor name -> sorted traits no provider has (only
        flavors missing some).
    """
    wanted = {spec.name: member_traits_of(spec) for spec in specs}
    names = sorted({t for traits in wanted.values() for t in traits})
    if not names:
        return {}
    body = client.get('/traits?associated=true&name=in:%s'
                      % ','.join(names), version=TRAITS_MICROVERSION)
    seen = set(body.get('traits', ()))
    return {name: [t for t in traits if t not in seen]
            for name, traits in wanted.items()
            if any(t not in seen for t in traits)}


def refusal(missing):
    """The error for :func:`unreported`'s non-empty answer."""
    lines = ['%s requires member traits no resource provider in Placement '
             'has yet: %s' % (name, ', '.join(traits))
             for name, traits in sorted(missing.items())]
    lines.append(
        'Created now, these flavors find no host. Roll out in order: give '
        'each nova-compute the [pci] device_spec entries of "openstack '
        'nvlink nova-config" and restart it; wait until "openstack nvlink '
        'check" reports no member-trait drift; reshape; then create the '
        'flavors. %s creates them anyway; nothing was written.'
        % SKIP_OPTION)
    return errors.NvlinkError('\n'.join(lines))
