"""Seeded random DRA CEL selectors, devices and allocation cases (tests/test_differential.py, the fuzz suite).

Expressions are built from a typed grammar over the Kubernetes 1.37 DRA CEL environment: the ``device``
fields, quantities, semvers, strings, lists, two-variable comprehensions, ext lists, Kubernetes lists, sets,
IP/CIDR/URL, ``cel.bind`` and some deliberately failing pieces (missing keys, empty ``min()``, bad slices),
so that results, compile errors and runtime errors all occur.
"""

from __future__ import annotations

import random
import re
from typing import Any

DRIVER = "dra.example.com"
OTHER = "other.example.com"
A = f'device.attributes["{DRIVER}"]'
C = f'device.capacity["{DRIVER}"]'

MODELS = ["a100", "h100", "l40s", "T4", "mi300x"]
VERSIONS = ["1.2.3", "2.0.0-rc.1", "0.9.1", "10.1.0"]
STRINGS = ['"a100"', '"h100"', '"abc"', '""', '"A-b_c"', '"10.0.0.1"', '"1Gi"', '"1.2.3"', '"x,y,z"']
IPS = ['"10.0.0.1"', '"192.168.1.7"', '"127.0.0.1"', '"::1"', '"fe80::1"', '"2001:db8::5"', '"169.254.3.4"',
       '"224.0.0.9"', '"0.0.0.0"', '"1.2.3"', '"::ffff:1.2.3.4"']
CIDRS = ['"10.0.0.0/8"', '"192.168.0.0/16"', '"10.1.0.0/16"', '"2001:db8::/32"', '"10.0.0.1/24"', '"::/0"',
         '"10.0.0.0/33"']
URLS = ['"https://example.com:8443/a/b?x=1&y=2&x=3"', '"http://example.com/"', '"/just/a/path"', '"ftp://h/p"',
        '"not a url"', '"https://[::1]:80/p"']
QUANTITIES = ['"1Gi"', '"40Gi"', '"500m"', '"2"', '"1.5G"', '"0"', '"-1"']


FORMATS = ["%s", "%d", "%f", "%.2f", "%.0f", "%.3f", "%e", "%.2e", "%.10e", "%x", "%X", "%o", "%b", "%s-%d",
           "%s/%s", "%d%%", "%.1f%%", "100%%", "", "%", "%.", "%z", "%s %s %s", "gpu-%s-%03d", "%.300f"]
NO_VALUE: Any = object()  # a format() argument whose value the generator does not know


def _fits(verb: str, value: Any, text: str) -> bool:
    if value is NO_VALUE:  # device attributes of a known kind
        return text.endswith(".model") if verb == "s" else verb in "dxob" and text.endswith(".index")
    if verb == "s":
        return True
    if verb in "do":
        return isinstance(value, int) and not isinstance(value, bool)
    if verb in "fe":
        return isinstance(value, float) or value in ("NaN", "-Infinity")
    if verb == "b":
        return isinstance(value, int)
    return isinstance(value, int | str | bytes) and not isinstance(value, bool)


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def _cel_string(s: str) -> str:
    """A CEL string literal for ``s`` (any characters)."""
    out = []
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def device(rng: random.Random) -> dict[str, Any]:
    """A device in the JSON form of celdiff's input (resource.k8s.io/v1 DeviceAttribute/DeviceCapacity)."""
    attrs: dict[str, Any] = {}
    if rng.random() < 0.9:
        attrs["model"] = {"string": rng.choice(MODELS)}
    if rng.random() < 0.9:
        attrs["index"] = {"int": rng.randint(0, 7)}
    if rng.random() < 0.8:
        attrs["healthy"] = {"bool": rng.random() < 0.7}
    if rng.random() < 0.8:
        attrs["driverVersion"] = {"version": rng.choice(VERSIONS)}
    if rng.random() < 0.7:
        attrs["tags"] = {"strings": rng.sample(["fast", "nvlink", "mig", "ecc"], rng.randint(1, 3))}
    if rng.random() < 0.7:
        attrs["ids"] = {"ints": [rng.randint(-3, 9) for _ in range(rng.randint(1, 4))]}
    if rng.random() < 0.5:
        attrs[f"{OTHER}/zone"] = {"string": rng.choice(["z1", "z2"])}
    caps: dict[str, Any] = {}
    if rng.random() < 0.9:
        caps["memory"] = {"value": rng.choice(["40Gi", "80Gi", "16G", "1Ti"])}
    if rng.random() < 0.5:
        caps["cores"] = {"value": str(rng.randint(1, 132))}
    return {
        "driver": DRIVER,
        "attributes": attrs,
        "capacity": caps,
        "allowMultipleAllocations": rng.random() < 0.3,
    }


class Gen:
    def __init__(self, rng: random.Random, depth: int = 3) -> None:
        self.r = rng
        self.depth = depth
        self.vars = 0

    def pick(self, options: list[Any]) -> Any:
        return self.r.choice(options)

    def fresh(self) -> str:
        self.vars += 1
        return f"v{self.vars}"

    # -- typed productions ---------------------------------------------------------------------------
    def bool_(self, d: int) -> str:
        r = self.r
        leaves = [
            "true",
            "false",
            f"{A}.healthy",
            "device.allowMultipleAllocations",
            f"has({A}.model)",
            f'"{OTHER}" in device.attributes',
            f'{A}.model == "h100"',
            f'device.driver == "{DRIVER}"',
            f"{A}.missing == 1",
            f"{A}.missing in []",
            f'device.attributes["{OTHER}"].zone == "z1"',
            f'isQuantity({self.pick(STRINGS)})',
            f'isSemver({self.pick(STRINGS)})',
            f"isIP({self.pick(IPS)})",
            f"isCIDR({self.pick(CIDRS)})",
            f"isURL({self.pick(URLS)})",
            f"ip.isCanonical({self.pick(IPS)})",
        ]
        if d <= 0:
            return self.pick(leaves)
        k = r.randint(0, 35)
        if k < 5:
            return self.pick(leaves)
        if k == 5:
            return f"({self.bool_(d - 1)} && {self.bool_(d - 1)})"
        if k == 6:
            return f"({self.bool_(d - 1)} || {self.bool_(d - 1)})"
        if k == 7:
            return f"!({self.bool_(d - 1)})"
        if k == 8:
            return f"({self.bool_(d - 1)} ? {self.bool_(d - 1)} : {self.bool_(d - 1)})"
        if k == 9:
            return f"{self.int_(d - 1)} {self.pick(['<', '<=', '>', '>=', '==', '!='])} {self.int_(d - 1)}"
        if k == 10:
            return f"{self.str_(d - 1)} {self.pick(['==', '!=', '<'])} {self.str_(d - 1)}"
        if k == 11:
            fn = self.pick(["startsWith", "endsWith", "contains", "matches"])
            arg = '"^[a-z0-9]+$"' if fn == "matches" else self.str_(d - 1)
            return f"{self.str_(d - 1)}.{fn}({arg})"
        if k == 12:
            x = self.fresh()
            return f"{self.recv(d - 1)}.{self.pick(['all', 'exists', 'exists_one'])}({x}, {x} > {self.int_(0)})"
        if k == 13:
            i, v = self.fresh(), self.fresh()
            fn = self.pick(["all", "exists", "existsOne"])
            return f"{self.recv(d - 1)}.{fn}({i}, {v}, {v} >= {i})"
        if k == 14:
            k_, v = self.fresh(), self.fresh()
            return f'{{"a": 1, "b": {self.int_(0)}}}.{self.pick(["all", "exists"])}({k_}, {v}, {v} > 0 && {k_} != "")'
        if k == 15:
            return f"{self.list_int(d - 1)}.isSorted()"
        if k == 16:
            return f"{self.int_(d - 1)} in {self.list_int(d - 1)}"
        if k == 17:
            fn = self.pick(["contains", "intersects", "equivalent"])
            return f"sets.{fn}({self.list_int(d - 1)}, {self.list_int(d - 1)})"
        if k == 18:
            fn = self.pick(["isGreaterThan", "isLessThan"])
            return f"{self.quantity(d - 1)}.{fn}({self.quantity(d - 1)})"
        if k == 19:
            return f"{self.quantity(d - 1)} == {self.quantity(d - 1)}"
        if k == 20:
            fn = self.pick(["isGreaterThan", "isLessThan"])
            return f"{self.semver()}.{fn}({self.semver()})"
        if k == 21:
            fn = self.pick(["isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast",
                            "isGlobalUnicast"])
            return f"ip({self.pick(IPS)}).{fn}()"
        if k == 22:
            other = self.pick([f"ip({self.pick(IPS)})", self.pick(IPS)])
            return f"cidr({self.pick(CIDRS)}).containsIP({other})"
        if k == 23:
            other = self.pick([f"cidr({self.pick(CIDRS)})", self.pick(CIDRS)])
            return f"cidr({self.pick(CIDRS)}).containsCIDR({other})"
        if k == 24:
            fn = self.pick(["getScheme", "getHost", "getHostname", "getPort", "getEscapedPath"])
            return f"url({self.pick(URLS)}).{fn}() == {self.str_(0)}"
        if k == 25:
            x = self.fresh()
            return f"cel.bind({x}, {self.list_int(d - 1)}, {x}.size() > {self.int_(0)})"
        if k == 26:
            return f"{self.str_(d - 1)} in {self.list_str(d - 1)}"
        if k == 27:
            k_, v = self.fresh(), self.fresh()
            return f'{{"a": 1, "b": 2}}.transformMap({k_}, {v}, {v} * {self.int_(0)})["a"] == {self.int_(0)}'
        if k == 28:
            return f"ip({self.pick(IPS)}) == cidr({self.pick(CIDRS)}).ip()"
        if k == 29:
            return f'url({self.pick(URLS)}).getQuery()["x"] == ["1", "3"]'
        if k == 30 and r.random() < 0.5:
            return self.cost_bomb()
        if k in (31, 32):
            return self.format_check(d - 1)
        if k in (33, 34):
            return self.semver_vs_other(d - 1)
        return f"{self.int_(d - 1)} in []"

    # -- string.format (cel-go's v1 formatter, strings extension version 2) -------------------------------
    def format_arg(self) -> tuple[str, Any]:
        """A format() argument: (CEL text, its Python value for the prediction, or NO_VALUE)."""
        options: list[tuple[str, Any]] = [
            ("0", 0), ("7", 7), ("-26", -26), ("1234567", 1234567), ("255u", 255),
            ("1.5", 1.5), ("0.125", 0.125), ("2.675", 2.675), ("-0.0", -0.0), ("1234.5", 1234.5), ("1e21", 1e21),
            ("1e-7", 1e-7), ("123456.0", 123456.0), ("-1234567.891", -1234567.891), ("0.1", 0.1),
            ('"a"', "a"), ('""', ""), ('"x\\"y"', 'x"y'), ('"é"', "é"), ('"NaN"', "NaN"), ('"-Infinity"', "-Infinity"),
            ("true", True), ("false", False), ("null", None), ('b"ab"', b"ab"),
            ('[1, "a", 2.5, true, null]', [1, "a", 2.5, True, None]), ("[]", []),
            ('{"b": 1, "a": "x"}', {"b": 1, "a": "x"}), ('{2: [0.5], 10: {}}', {2: [0.5], 10: {}}),
            ('quantity("1Gi")', NO_VALUE), ('semver("1.2.3")', NO_VALUE),
            (f"{A}.model", NO_VALUE), (f"{A}.index", NO_VALUE), (f"{A}.driverVersion", NO_VALUE),
            (f"{A}.tags", NO_VALUE), (f"{A}.ids", NO_VALUE), (f"{A}.missing", NO_VALUE), ("device.driver", NO_VALUE),
            (f"{C}.memory", NO_VALUE), ("double(7) / 3.0", 7 / 3),
        ]
        return self.pick(options)

    def format_call(self) -> tuple[str, Any]:
        """``"<fmt>".format([...])``: (CEL text, predicted value or NO_VALUE)."""
        r = self.r
        fmt = self.pick(FORMATS)
        verbs = [m[-1] for m in re.findall(r"%(?:\.\d+)?[a-zA-Z]", fmt.replace("%%", ""))]
        n = max(0, len(verbs) + self.pick([0, 0, 0, 0, -1, 1]))
        args = []
        for i in range(n):
            arg = self.format_arg()
            if i < len(verbs) and r.random() < 0.7:  # mostly an argument the clause accepts
                while not _fits(verbs[i], arg[1], arg[0]):
                    arg = self.format_arg()
            args.append(arg)
        text_args = ", ".join(a for a, _ in args)
        values = [v for _, v in args]
        if r.random() < 0.15:
            # not a literal list: checked only at run time (extra arguments are fine there)
            return f'"{_escape(fmt)}".format(dyn([{text_args}]))', NO_VALUE
        if r.random() < 0.1:
            return f'({self.str_(0)} + "{_escape(fmt)}").format([{text_args}])', NO_VALUE
        predicted: Any = NO_VALUE
        if all(v is not NO_VALUE for v in values):
            from plugins.dra.cel_format import FormatError, string_format

            try:
                predicted = string_format(fmt, values)
            except FormatError:
                predicted = NO_VALUE
        return f'"{_escape(fmt)}".format([{text_args}])', predicted

    def format_check(self, d: int) -> str:
        call, predicted = self.format_call()
        k = self.r.randint(0, 3)
        if k <= 1 and predicted is not NO_VALUE:
            return f"{call} == {_cel_string(predicted)}"  # cel-go decides whether the prediction is exact
        if k == 2:
            return f"{call}.size() {self.pick(['==', '>', '<'])} {self.r.randint(0, 12)}"
        return f"{call} {self.pick(['==', '!=', '<'])} {self.str_(d)}"

    # -- library values compared with other types ----------------------------------------------------------
    def semver_vs_other(self, d: int) -> str:
        """Semver (and Quantity) values against strings and other types: cel-go's ``Equal`` of the Kubernetes
        types fails ("no such overload"), ``!=`` does not, ``in`` a constant list panics for a Semver."""
        v = f"{A}.driverVersion"
        s = self.pick(['"1.2.3"', '"2.0.0-rc.1"', '"x"'])
        options = [
            f"{v} == {s}",
            f"{v} != {s}",
            f"{s} == {v}",
            f"{v} == {self.str_(d)}",
            f"{v} == {self.int_(0)}",
            f"{v} == null",
            f'{v} == semver("{self.pick(VERSIONS)}")',
            f"{v} in [{s}, \"0.9.1\"]",
            f"{v} in [1, 2]",
            f"{v} in {self.list_str(d)}",
            f"{v} in dyn([{s}])",
            f'{v} in {{{s}: 1}}',
            f"[{v}] == [{s}]",
            f'{A}.model in [{self.pick(STRINGS)}, "h100"]',
            'dyn(quantity("1Gi")) == "1Gi"',
            f'dyn({C}.memory) {self.pick(["==", "!="])} {self.pick(STRINGS)}',
            f'{A}.tags in {{"fast": 1}}',
        ]
        return self.pick(options)

    def cost_bomb(self) -> str:
        """Ten copies per level of a string of 1-40 characters, 1-8 levels: from a few hundred characters to
        3.2e9, so that some stay under Kubernetes' cost limit (1,000,000, 0.1 per character) and some not."""
        r = self.r
        seed = '"' + "x" * r.randint(1, 40) + '"'
        levels = r.randint(1, 8)
        names = [self.fresh() for _ in range(levels + 1)]
        body = f"{names[-1]}.size() > 0"
        for i in range(levels, -1, -1):
            init = seed if i == 0 else " + ".join([names[i - 1]] * 10)
            body = f"cel.bind({names[i]}, {init}, {body})"
        return body

    def int_(self, d: int) -> str:
        leaves = [str(self.r.randint(-3, 12)), f"{A}.index", f"{A}.missing"]
        if d <= 0:
            return self.pick(leaves[:2]) if self.r.random() < 0.9 else leaves[2]
        k = self.r.randint(0, 16)
        if k < 4:
            return self.pick(leaves[:2])
        if k == 4:
            return f"({self.int_(d - 1)} {self.pick(['+', '-', '*'])} {self.int_(d - 1)})"
        if k == 5:
            return f"size({self.str_(d - 1)})"
        if k == 6:
            return f"{self.list_int(d - 1)}.size()"
        if k == 7:
            return f"{self.str_(d - 1)}.indexOf({self.str_(0)})"
        if k == 8:
            return f"{self.quantity(d - 1)}.compareTo({self.quantity(d - 1)})"
        if k == 9:
            return f"{self.semver()}.{self.pick(['major', 'minor', 'patch'])}()"
        if k == 10:
            return f"ip({self.pick(IPS)}).family()"
        if k == 11:
            return f"cidr({self.pick(CIDRS)}).prefixLength()"
        if k == 12:
            return f"{self.list_int(d - 1)}.sum()"
        if k == 13:
            return f"{self.list_int(d - 1)}.{self.pick(['min', 'max'])}()"
        if k == 14:
            return f"{self.list_int(d - 1)}.{self.pick(['indexOf', 'lastIndexOf'])}({self.int_(0)})"
        if k == 15:
            return f"sign({self.quantity(d - 1)})"
        return f"{self.list_int(d - 1)}[0]"

    def str_(self, d: int) -> str:
        leaves = [self.pick(STRINGS), "device.driver", f"{A}.model"]
        if d <= 0:
            return self.pick(leaves)
        k = self.r.randint(0, 13)
        if k < 4:
            return self.pick(leaves)
        if k == 13:
            return self.format_call()[0]
        if k == 4:
            return f"({self.str_(d - 1)} + {self.str_(d - 1)})"
        if k == 5:
            return f"{self.str_(d - 1)}.{self.pick(['lowerAscii', 'upperAscii', 'trim'])}()"
        if k == 6:
            return f'{self.str_(d - 1)}.replace("a", "xy")'
        if k == 7:
            return f'{self.str_(d - 1)}.find("[0-9]+")'
        if k == 8:
            return f'{self.list_str(d - 1)}.join("-")'
        if k == 9:
            return f"string({self.int_(d - 1)})"
        if k == 10:
            return f"{self.str_(d - 1)}.substring({self.r.randint(0, 2)})"
        if k == 11:
            return f'device.attributes["{OTHER}"].zone'
        return f"string(cidr({self.pick(CIDRS)}).masked())"

    def list_int(self, d: int) -> str:
        r = self.r
        lit = "[" + ", ".join(str(r.randint(-3, 9)) for _ in range(r.randint(0, 4))) + "]"
        if d <= 0:
            return lit if r.random() < 0.8 else f"{A}.ids"
        k = r.randint(0, 13)
        if k < 3:
            return lit
        if k == 3:
            return f"{A}.ids"
        if k == 4:
            return f"lists.range({r.randint(0, 5)})"
        if k == 5:
            return f"{self.list_int(d - 1)}.{self.pick(['sort', 'reverse', 'distinct'])}()"
        if k == 6:
            return f"{self.list_int(d - 1)}.slice({r.randint(0, 1)}, {r.randint(1, 3)})"
        if k == 7:
            return f"[{self.list_int(d - 1)}, {self.list_int(d - 1)}].flatten()"
        if k == 8:
            x = self.fresh()
            return f"{self.recv(d - 1)}.map({x}, {x} * 2)"
        if k == 9:
            x = self.fresh()
            return f"{self.recv(d - 1)}.filter({x}, {x} > {self.int_(0)})"
        if k == 10:
            i, v = self.fresh(), self.fresh()
            return f"{self.recv(d - 1)}.transformList({i}, {v}, {v} + {i})"
        if k == 11:
            x = self.fresh()
            # (not on a bare []: cel-go types [].sortBy(x, -x) as list(double), a checker corner not emulated)
            return f"({self.list_int(d - 1)} + [0]).sortBy({x}, -{x})"
        if k == 12:
            i, v = self.fresh(), self.fresh()
            return f"{self.recv(d - 1)}.transformList({i}, {v}, {v} > 0, {v} * {i})"
        return f"({self.list_int(d - 1)} + {self.list_int(d - 1)})"

    def recv(self, d: int) -> str:
        """A list as the receiver of a macro: not a bare ``[]`` (cel-go's checker infers the element type of
        an empty literal from the macro body, e.g. ``[].filter(x, x > i)`` is list(bool))."""
        lst = self.list_int(d)
        return "[0]" if lst == "[]" else lst

    def list_str(self, d: int) -> str:
        r = self.r
        lit = "[" + ", ".join(self.pick(STRINGS) for _ in range(r.randint(0, 3))) + "]"
        if d <= 0:
            return lit if r.random() < 0.7 else f"{A}.tags"
        k = r.randint(0, 4)
        if k == 0:
            return lit
        if k == 1:
            return f"{A}.tags"
        if k == 2:
            return f'{self.str_(d - 1)}.split(",")'
        if k == 3:
            return f"{self.list_str(d - 1)}.sort()"
        return f"{self.list_str(d - 1)}.distinct()"

    def quantity(self, d: int) -> str:
        k = self.r.randint(0, 4 if d > 0 else 2)
        if k == 0:
            return f"quantity({self.pick(QUANTITIES)})"
        if k == 1:
            return f"{C}.memory"
        if k == 2:
            return f'quantity("{self.r.randint(0, 100)}Gi")'
        if k == 3:
            return f"{self.quantity(d - 1)}.add({self.quantity(d - 1)})"
        return f"{self.quantity(d - 1)}.sub({self.r.randint(0, 3)})"

    def semver(self) -> str:
        if self.r.random() < 0.5:
            return f"{A}.driverVersion"
        return f'semver("{self.pick(VERSIONS)}")'


def expression(rng: random.Random, depth: int = 3) -> str:
    return Gen(rng, depth).bool_(depth)


# -- allocation cases ---------------------------------------------------------------------------------------


def _alloc_device(rng: random.Random, d: int, full_p: float) -> dict[str, Any]:
    dev = device(rng)
    dev["attributes"].pop(f"{OTHER}/zone", None)
    if rng.random() < full_p:  # most devices have every attribute; a missing one fails a selector
        full = {
            "model": {"string": rng.choice(MODELS)},
            "index": {"int": d},
            "healthy": {"bool": rng.random() < 0.8},
            "driverVersion": {"version": rng.choice(VERSIONS)},
            "tags": {"strings": rng.sample(["fast", "nvlink", "mig", "ecc"], rng.randint(1, 3))},
            "ids": {"ints": [rng.randint(-3, 9) for _ in range(rng.randint(1, 4))]},
        }
        dev["attributes"] = {**full, **dev["attributes"]}
        dev["capacity"].setdefault("memory", {"value": "40Gi"})
    if rng.random() < 0.25:
        dev["attributes"]["rare"] = {"string": rng.choice(["r1", "r2"])}  # what few devices have (constraints)
    out = {"name": f"dev-{d}", "attributes": dev["attributes"], "capacity": dev["capacity"]}
    if rng.random() < 0.2:  # shareable: requests consume its capacity (KEP-5075)
        out["allowMultipleAllocations"] = True
    return out


def _slice(name: str, pool: str, devices: list[dict[str, Any]], **where: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": DRIVER, **where, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices},
    }


def _opaque(what: str) -> dict[str, Any]:
    return {"opaque": {"driver": DRIVER, "parameters": {"config": what}}}


def allocation_case(rng: random.Random, n: int) -> dict[str, Any]:
    """Node ``node-1``; 1-3 pools with 2-6 devices (some pools with per-device node selection, whose devices
    for ``node-2`` often lack attributes: upstream runs the selectors on them too), sometimes a pool of
    ``node-2`` only; 1-2 classes, some with a config; 1-2 claims with 1-2 requests each (``ExactCount``,
    ``All``, ``firstAvailable`` whose alternatives may use different classes), sometimes a claim config
    (for a request, a subrequest or all) and a ``matchAttribute`` constraint, also on an attribute that most
    devices lack."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1", "labels": {"zone": "z1"}}}
    slices = []
    all_devices: list[tuple[str, str, str]] = []
    for p in range(rng.randint(1, 3)):
        pool = f"pool-{p}"
        per_device = rng.random() < 0.2
        devices = []
        for d in range(rng.randint(2, 6)):
            other_node = per_device and rng.random() < 0.4
            dev = _alloc_device(rng, d, 0.7 if other_node else 0.95)
            if per_device:
                dev["nodeName"] = "node-2" if other_node else "node-1"
            devices.append(dev)
            all_devices.append((DRIVER, pool, f"dev-{d}"))
        where = {"perDeviceNodeSelection": True} if per_device else {"nodeName": "node-1"}
        slices.append(_slice(f"slice-{p}", pool, devices, **where))
    if rng.random() < 0.2:  # another node's pool: never looked at for node-1
        slices.append(_slice("slice-n2", "pool-n2", [_alloc_device(rng, d, 0.3) for d in range(2)], nodeName="node-2"))
    class_selectors = [
        f'device.driver == "{DRIVER}"',
        f'{A}.model != "T4"',
        f"{A}.index >= 1",
        f'has({A}.healthy) && {A}.healthy',
        f"{C}.memory.compareTo(quantity(\"32Gi\")) >= 0",
        f'{A}.driverVersion.isGreaterThan(semver("1.0.0"))',
        f"{A}.ids.exists(i, v, v > i)",
        f"{A}.tags.exists(t, t == \"nvlink\")",
    ]
    classes = []
    for c in range(rng.randint(1, 2)):
        sels = [class_selectors[0]] + rng.sample(class_selectors[1:], rng.randint(0, 2))
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in sels]}
        if rng.random() < 0.5:
            spec["config"] = [_opaque(f"class-{c}")]
        meta = {"name": f"class-{c}"}
        classes.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": meta, "spec": spec})
    request_selectors = [
        f'{A}.model == "{rng.choice(MODELS)}"',
        f"{A}.index % 2 == 0",
        f"{C}.memory.isGreaterThan(quantity(\"20Gi\"))",
        f"{A}.ids.sum() > 2",
        f'{A}.tags.sort()[0] != "ecc"',
    ]

    def class_name() -> str:
        return str(rng.choice(classes)["metadata"]["name"])

    claims = []
    for ci in range(rng.randint(1, 2)):
        requests = []
        names: list[str] = []
        for ri in range(rng.randint(1, 2)):
            exact: dict[str, Any] = {"deviceClassName": class_name()}
            if rng.random() < 0.85:
                exact["allocationMode"] = "ExactCount"
                exact["count"] = rng.randint(1, 3)
            else:
                exact["allocationMode"] = "All"
            if rng.random() < 0.5:
                exact["selectors"] = [{"cel": {"expression": rng.choice(request_selectors)}}]
            if rng.random() < 0.2:
                exact["capacity"] = {"requests": {"memory": rng.choice(["10Gi", "30Gi"])}}
            if rng.random() < 0.2:
                small = {k: v for k, v in exact.items() if k != "allocationMode"}
                small.update(allocationMode="ExactCount", count=1, deviceClassName=class_name())
                requests.append(
                    {
                        "name": f"req-{ri}",
                        "firstAvailable": [
                            {"name": "big", **{**exact, "allocationMode": "ExactCount", "count": 4}},
                            {"name": "small", **small},
                        ],
                    }
                )
                names += [f"req-{ri}/big", f"req-{ri}/small"]
            else:
                requests.append({"name": f"req-{ri}", "exactly": exact})
            names.append(f"req-{ri}")
        devices: dict[str, Any] = {"requests": requests}
        if rng.random() < 0.3:
            attribute = rng.choice(["model", "model", "rare", "healthy"])
            constraint: dict[str, Any] = {"matchAttribute": f"{DRIVER}/{attribute}"}
            if rng.random() < 0.3:
                constraint["requests"] = [rng.choice(names)]
            devices["constraints"] = [constraint]
        if rng.random() < 0.3:
            cfg = _opaque(f"claim-{ci}")
            if rng.random() < 0.7:
                cfg["requests"] = rng.sample(names, rng.randint(1, min(2, len(names))))
            devices["config"] = [cfg]
        claims.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"claim-{n}-{ci}", "namespace": "default", "uid": f"uid-{n}-{ci}"},
                "spec": {"devices": devices},
            }
        )
    allocated = [f"{d}/{p}/{x}" for d, p, x in rng.sample(all_devices, rng.randint(0, len(all_devices) // 3))]
    return {"classes": classes, "slices": slices, "claims": claims, "node": node, "allocated": allocated}
