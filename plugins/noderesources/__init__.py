"""NodeResourcesFit (see :mod:`plugins.noderesources.fit`)."""

from plugins.noderesources.fit import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    NAME,
    REQUESTED_TO_CAPACITY_RATIO,
    SPEC,
    FitArgs,
    NodeResourcesFit,
    fits_request,
    parse_args,
    validate_args,
)

__all__ = [
    "LEAST_ALLOCATED",
    "MOST_ALLOCATED",
    "NAME",
    "REQUESTED_TO_CAPACITY_RATIO",
    "SPEC",
    "FitArgs",
    "NodeResourcesFit",
    "fits_request",
    "parse_args",
    "validate_args",
]
