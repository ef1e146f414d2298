"""Plan and (optionally) apply: the job behind reshape, check and flatten."""

import dataclasses

from nvlink_placement.placement import client as pc
from nvlink_placement.placement import state as state_mod
from nvlink_placement.plan import executor
from nvlink_placement.plan import planner


@dataclasses.dataclass
class Result:
    """What a run planned and what happened.

    :ivar actions: planned :class:`Action` list, in application order.
    :ivar failures: :class:`HostFailure` list (empty for dry runs).
    :ivar applied: True when writes were attempted.
    """
    actions: list
    failures: list
    applied: bool

    def written(self):
        """The actions that were applied (all but failed hosts' tails)."""
        if not self.applied:
            return []
        stopped = {f.host: f.done for f in self.failures}
        seen = {}
        done = []
        for action in self.actions:
            if action.host in stopped:
                seen[action.host] = seen.get(action.host, 0) + 1
                if seen[action.host] > stopped[action.host]:
                    continue
            done.append(action)
        return done


def run(client, desired_hosts, apply=True, workers=1, on_action=None,
        on_host=None):
    """Read Placement, plan, and apply unless ``apply`` is False.

    :raises PlacementError: server older than microversion 1.37.
    :raises PlanError: the plan is invalid; nothing was written.
    """
    client.require(pc.WRITE_VERSION, 'reshaping (re-parenting providers)')
    current = state_mod.read(client, planner.traits_to_query(desired_hosts))
    actions = planner.plan(current, desired_hosts)
    if not apply or not actions:
        return Result(actions, [], False)
    failures = executor.apply(client, actions, current, workers=workers,
                              on_action=on_action, on_host=on_host)
    return Result(actions, failures, True)
