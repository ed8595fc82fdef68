"""Kubernetes name and label validation with the API machinery's messages
(k8s.io/apimachinery ``pkg/util/validation/validation.go``: ``IsQualifiedName``, ``IsValidLabelValue``,
``IsDNS1123Subdomain``). One implementation for every plugin that validates label keys/values or
resource names in its args or in pod specs, so the messages are identical everywhere."""

from __future__ import annotations

import re

_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_RE = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_LABEL_VALUE_FMT = f"(({_QUALIFIED_NAME_FMT}))?"
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")

QUALIFIED_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253

_QUALIFIED_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_QUALIFIED_MSG = (
    "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' "
    "(e.g. 'example.com/MyName')"
)
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def dns1123_subdomain_errors(value: str) -> list[str]:
    """``IsDNS1123Subdomain``."""
    errs: list[str] = []
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} bytes")
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errs.append(_DNS1123_SUBDOMAIN_MSG)
    return errs


def qualified_name_errors(value: str) -> list[str]:
    """``IsQualifiedName`` (label keys, annotation keys, resource names): ``[prefix/]name``; [] when valid."""
    parts = value.split("/")
    if len(parts) == 1:
        prefix, name = "", parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
    else:
        return [_QUALIFIED_MSG]
    errs = [f"prefix part {e}" for e in dns1123_subdomain_errors(prefix)] if prefix else []
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX_LENGTH:
        errs.append(f"name part must be no more than {QUALIFIED_NAME_MAX_LENGTH} bytes")
    if name and not _QUALIFIED_NAME_RE.match(name):
        errs.append(_QUALIFIED_NAME_MSG)
    return errs


def label_value_errors(value: str) -> list[str]:
    """``IsValidLabelValue``."""
    errs: list[str] = []
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        errs.append(f"must be no more than {LABEL_VALUE_MAX_LENGTH} bytes")
    if not _LABEL_VALUE_RE.match(value):
        errs.append(_LABEL_VALUE_MSG)
    return errs
