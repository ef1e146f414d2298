"""Owner and mode checks, and libnvfm's identity from its ELF file."""

import os

import fixtures
from oslotest import base

from nvlink_placement.fabric import library
from nvlink_placement.fabric import trust
from tests.unit.discovery import helpers


class TestTrust(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def file(self, *parts, mode=0o644):
        path = os.path.join(self.tmp, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as handle:
            handle.write('x')
        os.chmod(path, mode)
        return path

    def test_trusted_file(self):
        path = self.file('a', 'hook.conf')
        self.assertIsNone(trust.check(path, 'configuration file'))
        # It read this file's owner and mode, and its directory's: the
        # same path is refused once either is writable by others.
        os.chmod(path, 0o646)
        exc = self.assertRaises(trust.Untrusted, trust.check, path,
                                'configuration file')
        self.assertEqual("refusing configuration file %s: it is writable by "
                         "others (mode 0646) (it must be root's and writable "
                         "by root only)" % path, str(exc))
        os.chmod(path, 0o644)
        os.chmod(os.path.dirname(path), 0o775)
        exc = self.assertRaises(trust.Untrusted, trust.check, path,
                                'configuration file')
        self.assertEqual("refusing configuration file %s: %s is writable by "
                         "group (mode 0775) (it must be root's and writable "
                         "by root only)" % (path, os.path.dirname(path)),
                         str(exc))
        os.chmod(os.path.dirname(path), 0o755)
        self.assertIsNone(trust.check(path, 'configuration file'))

    def test_sticky_directory_writable_by_all(self):
        path = self.file('tmp', 'f')
        os.chmod(os.path.dirname(path), 0o1777)
        trust.check(path, 'f')
        os.chmod(os.path.dirname(path), 0o777)
        exc = self.assertRaises(trust.Untrusted, trust.check, path, 'f')
        self.assertEqual(
            "refusing f %s: %s is writable by group and others (mode 0777) "
            "(it must be root's and writable by root only)"
            % (path, os.path.dirname(path)), str(exc))

    def test_link_leads_to_an_untrusted_directory(self):
        target = self.file('open', 'map.json')
        os.chmod(os.path.dirname(target), 0o757)
        link = os.path.join(self.tmp, 'map.json')
        os.symlink(target, link)
        exc = self.assertRaises(trust.Untrusted, trust.check, link, 'map')
        self.assertIn('%s is writable by others (mode 0757)'
                      % os.path.dirname(target), str(exc))

    def test_owners_are_a_parameter(self):
        path = self.file('f')
        status = os.stat(path)
        trust.check(path, 'f', uids={0, status.st_uid})
        exc = self.assertRaises(trust.Untrusted, trust.check, path, 'f',
                                uids={12345})
        self.assertEqual("refusing f %s: / is owned by uid %d, not by root "
                         "(it must be root's and writable by root only)"
                         % (path, os.stat('/').st_uid), str(exc))

    def test_missing_file_is_left_to_its_reader(self):
        self.assertIsNone(trust.check(os.path.join(self.tmp, 'absent', 'f'),
                                      'f'))
        # The directories above it that exist are still read and judged.
        shared = os.path.join(self.tmp, 'shared')
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        path = os.path.join(shared, 'absent', 'f')
        exc = self.assertRaises(trust.Untrusted, trust.check, path, 'f')
        self.assertEqual("refusing f %s: %s is writable by group and others "
                         "(mode 0777) (it must be root's and writable by root "
                         "only)" % (path, shared), str(exc))


class TestLibrary(base.BaseTestCase):

    def test_fake_libnvfm_passes(self):
        path = helpers.build_fake_nvfm(self)
        with open(path, 'rb') as handle:
            soname, symbols = library.identity(handle.read())
        self.assertEqual('libnvfm.so.1', soname)
        self.assertTrue(set(library.CALLS) <= symbols)
        library.check(path)

    def test_not_elf_and_malformed(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        text = os.path.join(tmp, 'script')
        with open(text, 'w') as handle:
            handle.write('#!/bin/sh\n')
        exc = self.assertRaises(library.NotLibnvfm, library.check, text)
        self.assertEqual('fm_library %s: not a 64-bit ELF shared library'
                         % text, str(exc))
        with open(helpers.build_fake_nvfm(self), 'rb') as handle:
            head = handle.read(200)
        cut = os.path.join(tmp, 'libnvfm.so.1')
        with open(cut, 'wb') as handle:
            handle.write(head)
        exc = self.assertRaises(library.NotLibnvfm, library.check, cut)
        self.assertEqual('fm_library %s: a malformed ELF file (section '
                         'headers beyond the end of the file)' % cut,
                         str(exc))
