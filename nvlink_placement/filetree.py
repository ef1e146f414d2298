"""Write a tree of small text files, only those whose text changed.

For generated configuration kept under version control or diffed in CI: a
file whose text is already the same is not touched (its modification time
stays), so a diff shows only real changes. Every target is checked before
the first write (:func:`check`): a bad directory, or a file there that the
caller did not write (``owned``), writes nothing. Each file is replaced
atomically (:func:`nvlink_placement.textfile.write`); a file reached by
a symbolic link (a tree kept under version control elsewhere, linked into
the deployment tool's folder) is replaced where the link points, and the
link stays.
"""

import os

from nvlink_placement import errors
from nvlink_placement import textfile

WRITTEN = 'written'
UNCHANGED = 'unchanged'
REMOVED = 'removed'


def _target(directory, relative):
    return os.path.join(directory, *relative.split('/'))


def _destination(path):
    """Where a write of ``path`` goes: the file a link points to, or it."""
    return os.path.realpath(path) if os.path.islink(path) else path


def check(directory, relatives, owned=None):
    """Make sure every file can be written under ``directory``.

    ``directory`` may be missing if its parent exists. Each folder on the
    way to a file must be a folder (or missing), the file itself no folder,
    and the deepest existing folder writable.

    :param owned: ``owned(text) -> bool``: whether an existing file is one
        the caller wrote and may replace (None: any file may be replaced).
    :raises NvlinkError: naming the path and what is wrong; every file
        ``owned`` refuses (and every link to nothing), at once.
    """
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise errors.NvlinkError('--output-dir %s is not a directory'
                                 % directory)
    parent = os.path.dirname(os.path.abspath(directory))
    if not os.path.isdir(directory) and not os.path.isdir(parent):
        raise errors.NvlinkError('--output-dir %s: its parent directory %s '
                                 'does not exist' % (directory, parent))
    for relative in relatives:
        path = os.path.abspath(_destination(_target(directory, relative)))
        if os.path.isdir(path):
            raise errors.NvlinkError('cannot write %s: it is a directory'
                                     % path)
        # Absolute, so the walk up ends at "/" (a relative name such as
        # "out/x.conf" would reach "" and stay there).
        folder = os.path.dirname(path)
        while not os.path.exists(folder):
            folder = os.path.dirname(folder)
        if not os.path.isdir(folder):
            raise errors.NvlinkError('cannot write %s: %s is not a directory'
                                     % (path, folder))
        if not os.access(folder, os.W_OK | os.X_OK):
            raise errors.NvlinkError('cannot write %s: directory %s is not '
                                     'writable' % (path, folder))
        if os.path.exists(path) and not os.access(path, os.R_OK):
            raise errors.NvlinkError('cannot read %s to compare it'
                                     % path)
    foreign = [_target(directory, r) for r in relatives
               if owned is not None and _foreign(_target(directory, r),
                                                 owned)]
    if foreign:
        raise errors.NvlinkError(
            'nothing written: these files are already there and were not '
            'written by this command (their first line lacks its mark), so '
            'they are left as they are; move them away, or move their '
            'settings to the files the command does not write, and run it '
            'again:\n  %s' % '\n  '.join(foreign))


def _foreign(path, owned):
    """Whether ``path`` is there and not the caller's to replace.

    A link to nothing is (someone made it; writing would replace it).
    """
    if os.path.islink(path) and not os.path.exists(path):
        return True
    return os.path.isfile(path) and not owned(textfile.read(path))


def write(directory, texts, mode=0o644, owned=None):
    """Write ``texts`` (relative path -> text) under ``directory``.

    :param owned: as :func:`check`.
    :returns: list of ``(path, WRITTEN or UNCHANGED)`` in ``texts`` order.
    :raises NvlinkError: as :func:`check`, before anything is written; a
        write that fails later names its file.
    """
    check(directory, list(texts), owned)
    done = []
    for relative, text in texts.items():
        path = _target(directory, relative)
        if textfile.read(path) == text:
            done.append((path, UNCHANGED))
            continue
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError as exc:
            raise errors.NvlinkError('cannot create %s: %s' % (
                os.path.dirname(path), exc.strerror or exc))
        textfile.write(_destination(path), text, mode)
        done.append((path, WRITTEN))
    return done


def remove(directory, relatives):
    """Remove the files ``relatives`` under ``directory``.

    :returns: list of ``(path, REMOVED)``.
    :raises NvlinkError: naming a file that cannot be removed.
    """
    done = []
    for relative in relatives:
        path = _target(directory, relative)
        try:
            os.unlink(path)
        except OSError as exc:
            raise errors.NvlinkError('cannot remove %s: %s' % (
                path, exc.strerror or exc))
        done.append((path, REMOVED))
    return done


def existing(directory):
    """Relative ``/``-separated paths of the files under ``directory``.

    Sorted; empty when it does not exist. Hidden files (a name starting
    with ".") and folders are skipped.
    """
    found = []
    for root, folders, names in os.walk(directory):
        folders[:] = sorted(f for f in folders if not f.startswith('.'))
        relative = os.path.relpath(root, directory)
        for name in names:
            if not name.startswith('.'):
                found.append(name if relative == '.' else
                             '/'.join(relative.split(os.sep) + [name]))
    return sorted(found)
