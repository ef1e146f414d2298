"""The fleet rollout playbook (etc/ansible/inspect-hosts.yml) run for real.

Not collected by the default ``stestr run`` (each playbook run takes
seconds); run it with
``stestr --test-path ./ansible_tests --top-dir ./ run``.
"""
