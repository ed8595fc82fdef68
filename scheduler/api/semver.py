"""Semantic versions (semver 2.0.0) for DRA ``version`` attributes and the Kubernetes CEL semver library.

:func:`parse` is strict like ``github.com/blang/semver/v4``'s ``Parse`` (what Kubernetes uses): exactly
``MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]``, no leading ``v``, no leading zeros in numeric parts or numeric
pre-release identifiers, identifiers made of ``[0-9A-Za-z-]`` and non-empty, numbers within uint64.
With ``normalize=True`` the input is first normalised like the Kubernetes CEL ``semver(s, true)``
(``normalizeAndParse``): one leading ``v`` is removed, leading zeros are stripped from the three
dot-separated parts and missing minor/patch parts are filled with ``0`` (a shortened version must not
carry pre-release or build data).

Ordering is semver precedence (blang ``Compare``): build metadata is ignored, a pre-release sorts before
the release, numeric identifiers compare numerically and sort before alphanumeric ones, a longer list of
equal-prefixed identifiers sorts last. Equality and hashing follow precedence too
(``1.0.0+a == 1.0.0+b``), as does the Kubernetes ``Semver`` CEL type.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

__all__ = ["SemverError", "Version", "parse", "parse_semver"]

_MAX_UINT64 = 2**64 - 1
_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")

Identifier = str | int


class SemverError(ValueError):
    """The string is not a valid semantic version."""


def _pre_key(pre: tuple[Identifier, ...]) -> tuple[tuple[int, int, str], ...]:
    return tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in pre)


@dataclass(frozen=True, slots=True)
class Version:
    """A parsed semantic version; compared by semver precedence (build metadata ignored)."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[Identifier, ...] = ()
    build: tuple[str, ...] = field(default=(), compare=False)
    text: str = field(default="", compare=False, repr=False)

    def _key(self) -> tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]:
        return (self.major, self.minor, self.patch, 0 if self.prerelease else 1, _pre_key(self.prerelease))

    def compare(self, other: Version) -> int:
        """-1, 0 or 1 (blang ``Version.Compare``)."""
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    def __lt__(self, other: Version) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __le__(self, other: Version) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() <= other._key()

    def __gt__(self, other: Version) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() > other._key()

    def __ge__(self, other: Version) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() >= other._key()

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    def core(self) -> str:
        """``MAJOR.MINOR.PATCH[-PRERELEASE]`` (the part that determines precedence)."""
        s = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            s += "-" + ".".join(str(p) for p in self.prerelease)
        return s

    def __str__(self) -> str:
        """The canonical form ``MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]``."""
        s = self.core()
        if self.build:
            s += "+" + ".".join(self.build)
        return s


def _shown(s: str) -> str:
    """``s`` quoted for a message, shortened past 60 characters."""
    return repr(s) if len(s) <= 60 else f"{s[:60] + '…'!r} ({len(s)} characters)"


def _number(part: str, what: str, s: str) -> int:
    if not part or not set(part) <= _NUMBERS:
        raise SemverError(f"invalid semver {s!r}: invalid character(s) found in {what} number {part!r}")
    if len(part) > 1 and part[0] == "0":
        raise SemverError(f"invalid semver {s!r}: {what} number must not contain leading zeroes {part!r}")
    if len(part) > 20 or int(part) > _MAX_UINT64:  # (20 digits first: no int() of a 5,000-digit string)
        raise SemverError(f"invalid semver {_shown(s)}: {what} number {_shown(part)} is out of range")
    return int(part)


def _strict(s: str, original: str) -> Version:
    if not s:
        raise SemverError("invalid semver '': version string empty")
    parts = s.split(".", 2)
    if len(parts) != 3:
        raise SemverError(f"invalid semver {original!r}: no Major.Minor.Patch elements found")
    major = _number(parts[0], "major", original)
    minor = _number(parts[1], "minor", original)
    rest = parts[2]
    build: tuple[str, ...] = ()
    prerelease: tuple[Identifier, ...] = ()
    plus = rest.find("+")
    if plus != -1:
        build_ids = rest[plus + 1 :].split(".")
        for b in build_ids:
            if not b:
                raise SemverError(f"invalid semver {original!r}: build meta data is empty")
            if not set(b) <= _ALPHANUM:
                raise SemverError(
                    f"invalid semver {original!r}: invalid character(s) in build meta data {b!r}"
                )
        build = tuple(build_ids)
        rest = rest[:plus]
    dash = rest.find("-")
    if dash != -1:
        pre: list[Identifier] = []
        for p in rest[dash + 1 :].split("."):
            if not p:
                raise SemverError(f"invalid semver {original!r}: prerelease is empty")
            if set(p) <= _NUMBERS:
                if len(p) > 1 and p[0] == "0":
                    raise SemverError(
                        f"invalid semver {original!r}: numeric prerelease has leading zeroes {p!r}"
                    )
                if len(p) > 20 or int(p) > _MAX_UINT64:
                    raise SemverError(f"invalid semver {_shown(original)}: prerelease {_shown(p)} is out of range")
                pre.append(int(p))
            elif set(p) <= _ALPHANUM:
                pre.append(p)
            else:
                raise SemverError(f"invalid semver {original!r}: invalid character(s) in prerelease {p!r}")
        prerelease = tuple(pre)
        rest = rest[:dash]
    patch = _number(rest, "patch", original)
    return Version(major, minor, patch, prerelease, build, original)


def _normalize(s: str) -> str:
    """Kubernetes ``normalizeAndParse`` pre-processing (before the strict parse)."""
    if s.startswith("v"):
        s = s[1:]
    parts = s.split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or p[0] not in _NUMBERS:
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise SemverError(
                f"invalid semver {s!r}: short version cannot contain PreRelease/Build meta data"
            )
        parts.extend(["0"] * (3 - len(parts)))
    return ".".join(parts)


@functools.lru_cache(maxsize=8192)
def parse(s: str, normalize: bool = False) -> Version:
    """Parse a semantic version (strict, or Kubernetes-normalised). Raises :class:`SemverError`."""
    if not isinstance(s, str):
        raise SemverError(f"semver must be a string, not {type(s).__name__}")
    if normalize:
        return _strict(_normalize(s), s)
    return _strict(s, s)


parse_semver = parse
