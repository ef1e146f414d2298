import os

# Capture logs and output per test (shown only for failing tests), as
# OpenStack projects do through tox; set here so any runner gets it.
for _name in ('OS_LOG_CAPTURE', 'OS_STDOUT_CAPTURE', 'OS_STDERR_CAPTURE'):
    os.environ.setdefault(_name, '1')
