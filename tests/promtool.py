"""Prometheus's ``promtool`` for the tests that need it.

Debian's ``prometheus`` package installs it (``.ci/run`` installs the
package and fails CI when it cannot); elsewhere those tests skip.
"""

import shutil
import subprocess

#: Seconds one promtool run may take (it is quick: a few files).
TIMEOUT = 60


def path(test):
    """The promtool executable; skips ``test`` when there is none."""
    found = shutil.which('promtool')
    if found is None:
        test.skipTest('promtool not installed (Debian: apt-get install '
                      'prometheus)')
    return found


def run(test, *argv, stdin=None):
    """Run ``promtool argv``: ``(exit status, stdout + stderr)``."""
    result = subprocess.run([path(test)] + list(argv), input=stdin,
                            capture_output=True, text=True,
                            timeout=TIMEOUT)
    return result.returncode, result.stdout + result.stderr
