"""A PodGroup's status as the scheduler writes it: phase, counts, conditions (both the v1beta1 PodGroup and
scheduler-plugins' ``scheduling.x-k8s.io/v1alpha1`` one).
"""


from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.api.model import Pod, PodGroup
from scheduler.api.workload_api import (
    podgroup_conditions,
)
from scheduler.gang.state import (
    GroupState,
)

# --- PodGroup status -------------------------------------------------------------------------------------

# scheduler-plugins' PodGroupPhase values (sigs.k8s.io/scheduler-plugins apis/scheduling/v1alpha1 types.go)
PHASE_PENDING = "Pending"
PHASE_SCHEDULING = "Scheduling"
PHASE_RUNNING = "Running"
PHASE_FAILED = "Failed"
PHASE_FINISHED = "Finished"
PHASE_UNKNOWN = "Unknown"
# The fields of scheduler-plugins' PodGroupStatus (its CRD, manifests/crds/scheduling.x-k8s.io_podgroups.yaml,
# prunes anything else): what the scheduler writes, so that both projects can share the CRD.
XK8S_STATUS_FIELDS = ("phase", "occupiedBy", "running", "succeeded", "failed", "scheduleStartTime")


def podgroup_reason(pg: PodGroup, members: Sequence[Pod], gs: GroupState | None) -> tuple[str, str, str]:
    """(phase, reason, message) of a scheduling.x-k8s.io/v1alpha1 PodGroup: the phase as scheduler-plugins'
    PodGroup controller defines it (``pkg/controllers/podgroup_controller.go``: Pending while fewer than
    ``minMember`` pods exist, Scheduling until ``minMember`` run, Running, Finished when ``minMember`` succeeded,
    Failed when failed pods count towards ``minMember``), plus dra-scheduler's own Failed cases (the
    ``scheduleTimeoutSeconds`` expired; members lost after the group was placed). The reason and message are
    what the phase-transition Event says."""
    live = [p for p in members if not p.meta.deleting]
    scheduled = sum(1 for p in live if p.node_name)
    running = sum(1 for p in live if p.phase == "Running")
    succeeded = sum(1 for p in live if p.phase == "Succeeded")
    failed = sum(1 for p in live if p.phase == "Failed")
    ever_scheduled = gs is not None and gs.scheduled_at is not None
    m = pg.min_member
    if succeeded >= m:
        return PHASE_FINISHED, "Finished", f"{succeeded} members succeeded"
    if failed and failed + running + succeeded >= m:
        return PHASE_FAILED, "MembersFailed", f"{failed} members failed"
    if ever_scheduled and scheduled < m:
        return PHASE_FAILED, "MembersLost", (
            f"only {scheduled} of minMember {m} members remain bound (members were deleted or failed)"
        )
    if running + succeeded >= m:
        return PHASE_RUNNING, "Running", f"{running} members running"
    if gs is not None and gs.timed_out:
        return PHASE_FAILED, "Timeout", gs.message
    if len(live) < m:
        msg = gs.message if gs is not None and gs.message else f"{len(live)} of minMember {m} members exist"
        return PHASE_PENDING, "WaitingForMembers", msg
    if scheduled >= m:
        msg = f"{scheduled} members bound"
        if gs is not None and gs.topology:
            msg = f"{msg}; topology: {gs.topology}"
        return PHASE_SCHEDULING, "Scheduled", msg
    if gs is not None and gs.attempts:
        return PHASE_SCHEDULING, "Unschedulable", gs.message
    return PHASE_SCHEDULING, "Scheduling", f"{len(live)} members waiting to be scheduled"


def podgroup_status(pg: PodGroup, members: Sequence[Pod], gs: GroupState | None) -> dict[str, Any]:
    """The status this scheduler reports for a PodGroup.

    * ``scheduling.x-k8s.io/v1alpha1``: the fields of scheduler-plugins' PodGroupStatus only (``XK8S_STATUS_FIELDS``:
      phase, occupiedBy, running, succeeded, failed, scheduleStartTime); why a group waits is in its members'
      ``PodScheduled`` conditions and in the Events of each phase transition.
    * ``scheduling.k8s.io/v1beta1``: ``conditions`` (``PodGroupInitiallyScheduled``, ``DisruptionTarget``); the
      ``resourceClaimStatuses`` kube-controller-manager writes are left alone (a merge patch does not touch them).
    """
    if pg.is_upstream:
        if gs is None:
            return {}
        placed, reason, message = gs.condition if gs.condition is not None else (None, "", "")
        conds, _ = podgroup_conditions(
            pg, placed, reason, message, gs.disruption, gs.disruption_time or gs.started or pg.meta.creation_timestamp
        )
        return {"conditions": conds} if conds else {}
    live = [p for p in members if not p.meta.deleting]
    phase, _, _ = podgroup_reason(pg, members, gs)
    status: dict[str, Any] = {
        "phase": phase,
        "running": sum(1 for p in live if p.phase == "Running"),
        "succeeded": sum(1 for p in live if p.phase == "Succeeded"),
        "failed": sum(1 for p in live if p.phase == "Failed"),
    }
    if len(live) >= pg.min_member:
        # scheduler-plugins' fillOccupiedObj: the owners of a member, "<namespace>/<owner name>", sorted
        owned = next((p for p in sorted(live, key=lambda p: p.key) if p.meta.owners), None)
        if owned is not None:
            status["occupiedBy"] = ",".join(sorted(f"{owned.namespace}/{o.name}" for o in owned.meta.owners))
    if gs is not None and gs.started:
        status["scheduleStartTime"] = gs.started
    return status
