"""Signals core sends for the apps above it (core imports no other app)."""

from django.dispatch import Signal

# A write refused with 403 (a role too low, a CSRF failure): ``exc`` (the PermissionDenied) and ``request``.
write_denied = Signal()

# What the lifecycle schedules follow changed (the lifecycle app keeps them in step; the apps below it
# do not know it): ``namespace`` created or re-policied, ``node`` created or re-policied, ``everything``
# (the cluster policy), each with ``removed`` when the namespace or node is about to be deleted.
schedules_changed = Signal()
