"""Plain-text help from reStructuredText docstrings."""

from oslotest import base

from nvlink_placement import helptext


class TestPlain(base.BaseTestCase):

    def test_markup_removed(self):
        self.assertEqual(
            'rows as "FILE: key.path: message"; see config and Topology.\n'
            'GUEST prepare begin -\n    what it does',
            helptext.plain(
                'rows as ``FILE: key.path: message``; see '
                ':mod:`config` and :class:`~nvlink_placement.model.Topology`'
                '.\n``GUEST prepare begin -``\n    what it does'))

    def test_plain_text_unchanged(self):
        text = 'Needs --host (repeatable) or --all: "quoted" stays.'
        self.assertEqual(text, helptext.plain(text))
