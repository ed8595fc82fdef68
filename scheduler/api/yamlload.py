"""Bounded YAML loading for everything the scheduler reads from files (``simulate`` inputs, ``check-config``).

The input of ``simulate`` and of a configuration is written by users; a scheduler reading objects any
namespace user can write must not let one file burn CPU or memory without bound or end in a traceback.
What the API server path (``sigs.k8s.io/yaml`` → JSON → typed decoding) refuses is refused here, with
an error naming the file, the document and the field:

* **UTF-8 only** — other bytes are refused with their offset (the API server takes UTF-8 JSON only).
* **Aliases** — an alias is a reference, so PyYAML would build a small graph whose *expansion* (what a
  JSON encoder, a deep copy or any walk sees) can be exponential ("billion laughs"). A document whose
  expanded node count exceeds ``max(ALIAS_EXPANSION_FACTOR × its real node count,
  MIN_EXPANDED_NODES)``, or that uses more than :data:`MAX_ALIASES` aliases, is refused (go-yaml v3 has
  the same kind of "excessive aliasing" rule). Recursive aliases (a cyclic document) are refused.
* **Depth** — nesting deeper than :data:`MAX_DEPTH` levels (after alias expansion) is refused before
  the recursive composer can overflow the stack.
* **Integers** — more than :data:`MAX_INT_DIGITS` digits are refused (Python refuses to convert more
  than 4,300 digits with a ``ValueError``; Kubernetes' JSON decoding refuses anything beyond
  int64/float64 anyway).
* **Timestamps** stay strings (``creationTimestamp: 2024-01-01T00:00:00Z`` is a string in the API's JSON).
  ``!!binary`` stays its base64 text. ``!!set``, ``!!omap``/``!!pairs`` and ``.nan``/``.inf`` have no
  JSON form and are refused with their path.
* **Duplicate keys** in one mapping are refused (``kubectl`` says "mapping key already defined").
  Scalar non-string keys (``1: a``, ``true: b``) become their source text, as the YAML → JSON
  conversion does; other keys are refused.

:func:`load_documents` returns plain JSON-compatible data (dict/list/str/int/float/bool/None).

**Three readers, one result.** PyYAML's pure-Python reader/scanner/parser is slow (about 25 s for a 10 MB
file of 1,000 GPU nodes and 6,500 pods), so a text goes, in order, through:

1. **JSON** (text starting with ``{`` or ``[``, as ``kubectl get -o json`` writes): :mod:`json`, refusing
   duplicate keys, NaN/Infinity, integers of more than :data:`MAX_INT_DIGITS` digits and nesting deeper than
   :data:`MAX_DEPTH` (counted as the YAML reader counts it);
2. **libyaml** (``yaml.CParser``, when PyYAML was built with it): the C parser and composer, with the same
   resolvers (no implicit timestamps) and the same bounds: the C composer calls back into Python for every
   node it composes (``descend_resolver``), where the depth is bounded before the (recursive) C composer can
   go deeper, and the alias and expansion bounds are checked on the composed graph before anything is built
   from it. A document is then built by a non-recursive-heavy fast path for plain maps, sequences and
   strings, the bounded constructor doing everything else (numbers, merge keys, refused tags);
3. **the pure-Python loader** above, whenever 1 or 2 refuses or fails: it decides, and its error (file,
   document, line, field path) is the one reported, so messages never depend on which reader ran.

A text all three accept gives the same data from each (``tests/test_yamlload_fast.py`` checks this).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = [
    "ALIAS_EXPANSION_FACTOR",
    "MAX_ALIASES",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MIN_EXPANDED_NODES",
    "YAMLLoadError",
    "decode_utf8",
    "field_path",
    "load_documents",
    "load_file",
]

MAX_DEPTH = 100
MAX_INT_DIGITS = 100
MAX_ALIASES = 10_000
ALIAS_EXPANSION_FACTOR = 10
MIN_EXPANDED_NODES = 100_000

_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_STR = "tag:yaml.org,2002:str"


class YAMLLoadError(ValueError):
    """A file, or one document of it, could not be loaded. ``str()`` names file, document and field."""

    def __init__(self, source: str, message: str, document: int | None = None, path: str = "") -> None:
        where = source
        if document is not None:
            where += f": document {document}"
        if path:
            where += f": {path if len(path) <= 160 else path[:80] + '...' + path[-60:]}"
        super().__init__(f"{where}: {message}")
        self.source = source
        self.document = document
        self.path = path
        self.message = message


class _Limit(yaml.YAMLError):
    def __init__(self, message: str, path: str = "", mark: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.mark = mark


def field_path(parts: list[str | int] | tuple[str | int, ...]) -> str:
    """``["spec", "containers", 0, "name"]`` → ``spec.containers[0].name``."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif out:
            out += f".{p}"
        else:
            out = str(p)
    return out


class _BoundedConstructor(SafeConstructor):
    def construct_yaml_int(self, node: ScalarNode) -> int:
        digits = sum(c.isdigit() or c in "abcdefABCDEF" for c in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise _Limit(f"integer with {digits} digits (at most {MAX_INT_DIGITS})", mark=node.start_mark)
        value: int = super().construct_yaml_int(node)
        return value

    def construct_yaml_float(self, node: ScalarNode) -> float:
        value: float = super().construct_yaml_float(node)
        if math.isnan(value) or math.isinf(value):
            raise _Limit(f"{node.value!r} is not a JSON number (NaN and infinities are refused)", mark=node.start_mark)
        return value

    def construct_as_string(self, node: Node) -> str:
        return str(self.construct_scalar(node))  # type: ignore[arg-type]

    def construct_refused(self, node: Node) -> Any:
        raise _Limit(f"the YAML type {node.tag} has no JSON form", mark=node.start_mark)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        # Duplicate keys (explicit ones: keys brought in by a '<<' merge may be overridden).
        if isinstance(node, MappingNode):
            seen: dict[str, Any] = {}
            for key_node, _ in node.value:
                if isinstance(key_node, ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    k = key_node.value
                    if k in seen:
                        raise _Limit(
                            f"duplicate key {k!r} (mapping key already defined at line {seen[k].line + 1})",
                            mark=key_node.start_mark,
                        )
                    seen[k] = key_node.start_mark
        self.flatten_mapping(node)
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if isinstance(key_node, ScalarNode):
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, str):
                    key = str(key_node.value)  # 1: a, true: b -> "1", "true" as YAML -> JSON does
            else:
                raise _Limit("a mapping key must be a scalar", mark=key_node.start_mark)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


_add: Any = _BoundedConstructor.add_constructor
_add("tag:yaml.org,2002:int", _BoundedConstructor.construct_yaml_int)
_add("tag:yaml.org,2002:float", _BoundedConstructor.construct_yaml_float)
_add(_TIMESTAMP, _BoundedConstructor.construct_as_string)
_add("tag:yaml.org,2002:binary", _BoundedConstructor.construct_as_string)
for _tag in ("set", "omap", "pairs"):
    _add(f"tag:yaml.org,2002:{_tag}", _BoundedConstructor.construct_refused)
_add(None, _BoundedConstructor.construct_refused)  # unknown !tags


class _Loader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    _BoundedConstructor,
    yaml.resolver.Resolver,
):
    """SafeLoader with bounded composition, no implicit timestamps and the constructor above."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _BoundedConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._depth = 0
        self._aliases = 0
        self._nodes = 0

    def compose_document(self) -> Node | None:
        self._depth = 0
        self._aliases = 0
        self._nodes = 0
        node: Node | None = super().compose_document()
        if node is not None:
            _check_expansion(node, self._nodes)
        return node

    def _event_mark(self) -> Any:
        peek: Any = self.peek_event
        return peek().start_mark

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(yaml.events.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _Limit(f"more than {MAX_ALIASES} aliases in one document", mark=self._event_mark())
            node: Node | None = super().compose_node(parent, index)
            return node
        self._depth += 1
        self._nodes += 1
        if self._depth > MAX_DEPTH:
            raise _Limit(f"nested deeper than {MAX_DEPTH} levels", mark=self._event_mark())
        try:
            composed: Node | None = super().compose_node(parent, index)
            return composed
        finally:
            self._depth -= 1


# The implicit resolvers of SafeLoader without timestamps: "2024-01-01" stays a string.
_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != _TIMESTAMP]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


_MERGE = "tag:yaml.org,2002:merge"
_NULL = "tag:yaml.org,2002:null"
_MAP = yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG
_SEQ = yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG
# first character -> implicit resolvers to try, as Resolver.resolve looks them up (wildcard ones appended)
_IMPLICIT: dict[str, list[tuple[str, Any]]] = {
    ch: [*rs, *_Loader.yaml_implicit_resolvers.get(None, [])]
    for ch, rs in _Loader.yaml_implicit_resolvers.items()
    if ch is not None
}
_WILDCARD: list[tuple[str, Any]] = list(_Loader.yaml_implicit_resolvers.get(None, []))
# libyaml, when PyYAML was built with it
_CParser: Any = getattr(yaml, "CParser", None) or getattr(getattr(yaml, "cyaml", None), "CParser", None)


class _Fallback(Exception):
    """The fast reader leaves this text (or document) to a slower one."""


if _CParser is not None:

    class _CLoader(_CParser, _BoundedConstructor, yaml.resolver.Resolver):  # type: ignore[misc]
        """libyaml's parser and composer with this module's resolvers, bounds and constructor.

        The C composer is recursive; it calls ``descend_resolver`` before composing each node that is not an
        alias, which is where the depth is bounded (and real nodes counted) before the C stack can grow deep.
        """

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            _BoundedConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            self._depth = 0
            self.real_nodes = 0
            self._built: dict[Node, Any] = {}
            self._tags: dict[str, str] = {}
            self.saw_null = False

        def descend_resolver(self, current_node: Any, current_index: Any) -> None:
            self.real_nodes += 1
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise _Limit(f"nested deeper than {MAX_DEPTH} levels")

        def ascend_resolver(self) -> None:
            self._depth -= 1

        def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
            """``Resolver.resolve`` for a resolver without path resolvers (the same tags, fewer steps; plain
            scalars repeat a lot, keys above all, so their tags are remembered per text)."""
            if kind is ScalarNode:
                if implicit[0]:
                    known = self._tags.get(value)
                    if known is not None:
                        return known
                    tag = _STR
                    for t, regexp in _IMPLICIT.get(value[:1], _WILDCARD):
                        if regexp.match(value):
                            tag = str(t)
                            break
                    if len(self._tags) < 100_000:
                        self._tags[value] = tag
                    return tag
                return _STR
            return _SEQ if kind is SequenceNode else _MAP

        def build(self, node: Node) -> Any:
            """The document's data: plain maps, sequences and strings directly, other scalars through the
            bounded constructor; merge keys, duplicate keys and other tags raise :class:`_Fallback`."""
            self._built = {}
            try:
                return self._build(node)
            finally:
                self._built = {}
                self.constructed_objects = {}

        def _build(self, node: Node) -> Any:
            cls = node.__class__
            if cls is ScalarNode:
                if node.tag == _STR:
                    return node.value
                if node.tag == _NULL:
                    self.saw_null = True
                return self.construct_object(node)
            built = self._built.get(node)
            if built is not None:  # an alias: the same object, as SafeConstructor does
                return built
            if cls is MappingNode and node.tag == _MAP:
                out: dict[str, Any] = {}
                self._built[node] = out
                for key_node, value_node in node.value:
                    if key_node.__class__ is not ScalarNode or key_node.tag == _MERGE:
                        raise _Fallback
                    key = key_node.value
                    if key_node.tag != _STR:
                        self.construct_object(key_node)  # its bounds (digits, NaN); the key is its text
                    if key in out:
                        raise _Fallback  # a duplicate: the bounded constructor says where
                    out[key] = self._build(value_node)
                return out
            if cls is SequenceNode and node.tag == _SEQ:
                items: list[Any] = []
                self._built[node] = items
                for item in node.value:
                    items.append(self._build(item))
                return items
            raise _Fallback


def _load_c(text: str) -> list[Document] | None:
    """Every document through libyaml, or None: the pure loader then decides (and names any error)."""
    if _CParser is None:
        return None
    # Without a "*" anywhere there is no alias: every document is a tree, whose size and depth the composer bounds.
    shared = "*" in text
    docs: list[Document] = []
    loader = _CLoader(text)
    try:
        while loader.check_node():
            before = loader.real_nodes
            node = loader.get_node()
            if node is None:
                docs.append(Document(len(docs), None))
                continue
            if shared:
                _check_expansion(node, loader.real_nodes - before)
            loader.saw_null = False
            try:
                data = loader.build(node)
            except _Fallback:
                loader.saw_null = True
                data = loader.construct_document(node)
                if next(_walk_json(data, []), None) is not None:
                    return None
            docs.append(Document(len(docs), data, loader.saw_null))
    except Exception:
        return None
    finally:
        loader.dispose()
    return docs


class _JSONRefused(ValueError):
    pass


def _json_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS + 1:
        raise _JSONRefused("integer too long")
    return int(text)


def _json_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _JSONRefused("not a finite number")
    return value


def _json_constant(text: str) -> Any:
    raise _JSONRefused(f"{text} is not a JSON number")


# Bytes that matter for the shape of a JSON text: brackets, member colons and the quotes that delimit strings.
_JSON_DROP = bytes(c for c in range(256) if c not in b'[]{}":')
_JSON_QUOTED = re.compile(rb'"[^"]*"')


def _json_shape(text: str) -> tuple[bytes, int]:
    """The brackets of a JSON text outside its strings, in order, and its number of object members (colons
    outside strings), at C speed (bytes passes, no per-character regex over the whole text: 0.65 -> 0.23 s on
    a 40 MB file). Escaped backslashes, then escaped quotes are removed first (left to right, as a JSON reader
    pairs them), so every quote left delimits a string; then everything but brackets, colons and quotes, then
    empty strings, then what is left inside quotes (string content). Only meaningful for valid JSON, which
    ``json.loads`` checks afterwards."""
    raw = text.encode("utf-8", "surrogatepass").replace(b"\\\\", b"").replace(b'\\"', b"")
    shape = _JSON_QUOTED.sub(b"", raw.translate(None, _JSON_DROP).replace(b'""', b""))
    return shape.replace(b":", b""), shape.count(b":")


def _nesting_below(brackets: bytes, limit: int) -> bool:
    """Whether balanced ``brackets`` nest fewer than ``limit`` levels deep: innermost pairs removed level by
    level (C-speed passes, at most ``limit``)."""
    rest = brackets
    for _ in range(limit - 1):
        if not rest:
            return True
        shorter = rest.replace(b"[]", b"").replace(b"{}", b"")
        if len(shorter) == len(rest):
            return False  # not balanced: not JSON
        rest = shorter
    return not rest


def _load_json(text: str) -> list[Document] | None:
    """A JSON text (``kubectl get -o json``): one document, or None when it is not JSON or is refused (the YAML
    readers then decide). Numbers are JSON's: ``1e5`` is a number, as the API server reads it."""
    start = text.lstrip(" \t\r\n")[:1]
    if start not in ("{", "["):
        return None
    brackets, members = _json_shape(text)
    # YAML counts a scalar as one more level than its collection: fewer than MAX_DEPTH collection levels is safe
    if not _nesting_below(brackets, MAX_DEPTH):
        return None
    kept = 0

    def count(obj: dict[str, Any]) -> dict[str, Any]:
        nonlocal kept
        kept += len(obj)
        return obj

    try:
        data = json.loads(
            text,
            object_hook=count,  # cheaper than a hook per object's pairs (0.49 -> 0.36 s on 40 MB)
            parse_int=_json_int,
            parse_float=_json_float,
            parse_constant=_json_constant,
        )
    except (ValueError, RecursionError):
        return None
    if kept != members:  # a duplicate key: a later member replaced an earlier one (refused, as before)
        return None
    return [Document(0, data, "null" in text)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_expansion(root: Node, real_nodes: int) -> None:
    """Expanded node count and height of the node graph (aliases share nodes), cycles refused, and the number
    of aliases (references to a node beyond its first: the pure composer counts them as it goes, the C
    composer cannot)."""
    limit = max(ALIAS_EXPANSION_FACTOR * real_nodes, MIN_EXPANDED_NODES)
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    refs = 0
    while stack:
        node, done = stack.pop()
        nid = id(node)
        if done:
            on_path.discard(nid)
            kids = _children(node)
            refs += len(kids)
            if refs - len(size) > MAX_ALIASES:  # references minus distinct nodes other than the root so far
                raise _Limit(f"more than {MAX_ALIASES} aliases in one document", mark=node.start_mark)
            s = 1 + sum(size[id(k)] for k in kids)
            h = 1 + max((height[id(k)] for k in kids), default=0)
            if s > limit:
                raise _Limit(
                    f"excessive aliasing: the document expands to more than {limit:,} nodes", mark=node.start_mark
                )
            if h > MAX_DEPTH:
                raise _Limit(f"nested deeper than {MAX_DEPTH} levels (through aliases)", mark=node.start_mark)
            size[nid] = s
            height[nid] = h
            continue
        if nid in size:
            continue
        if nid in on_path:
            raise _Limit("recursive alias (the document refers to itself)", mark=node.start_mark)
        on_path.add(nid)
        stack.append((node, True))
        for k in _children(node):
            if id(k) not in size:
                stack.append((k, False))


def decode_utf8(data: bytes, source: str) -> str:
    """Strict UTF-8 (a leading BOM is dropped); the error names the byte offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise YAMLLoadError(
            source, f"not UTF-8: byte 0x{data[e.start]:02x} at offset {e.start} ({e.reason})"
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def _mark_text(mark: Any) -> str:
    if mark is None:
        return ""
    return f"line {mark.line + 1}, column {mark.column + 1}: "


def _path_at(text: str, document: int, index: int) -> str:
    """The field path of the node that starts at character ``index`` of document ``document`` (best effort,
    from the event stream only: it works where composing refused the document)."""
    frames: list[list[Any]] = []  # [kind, key-or-index, expecting_key]
    doc = -1
    best = ""
    try:
        for ev in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(ev, yaml.DocumentStartEvent):
                doc += 1
                frames = []
                continue
            if doc != document or isinstance(ev, yaml.DocumentEndEvent | yaml.StreamEndEvent):
                if doc > document:
                    break
                continue
            if isinstance(ev, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                frames.pop()
                if frames:
                    _advance(frames[-1])
                continue
            top = frames[-1] if frames else None
            is_key = top is not None and top[0] == "map" and top[2]
            if is_key and isinstance(ev, yaml.ScalarEvent) and top is not None:
                top[1] = ev.value
            start: Any = ev.start_mark
            if start is not None and start.index >= index:
                best = field_path([f[1] for f in frames if f[1] is not None])  # a key: its own path
                break
            if isinstance(ev, yaml.MappingStartEvent):
                frames.append(["map", None, True])
            elif isinstance(ev, yaml.SequenceStartEvent):
                frames.append(["seq", 0, False])
            elif top is not None:
                _advance(top)
    except yaml.YAMLError:
        pass
    return best


def _advance(frame: list[Any]) -> None:
    if frame[0] == "map":
        frame[2] = not frame[2]
    else:
        frame[1] += 1


def _walk_json(value: Any, path: list[str | int]) -> Iterator[tuple[list[str | int], Any]]:
    """(path, value) of every value that is not JSON-compatible (defensive: the constructor refuses them)."""
    stack: list[tuple[Any, list[str | int]]] = [(value, path)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    yield [*p, str(k)], k
                stack.append((x, [*p, k]))
        elif isinstance(v, list):
            stack.extend((x, [*p, i]) for i, x in enumerate(v))
        elif v is None or isinstance(v, str | bool | int):
            continue
        elif isinstance(v, float):
            if math.isnan(v) or math.isinf(v):
                yield p, v
        else:
            yield p, v


@dataclass(frozen=True, slots=True)
class Document:
    index: int
    data: Any
    nulls: bool = True  # False: the reader saw no null (callers may skip looking for them)


def load_documents(text: str | bytes, source: str) -> list[Document]:
    """Every document of ``text`` (empty ones included as ``None``), bounded as the module docstring says.

    Raises :class:`YAMLLoadError` naming ``source``, the document (0-based) and, where known, the line.
    """
    if isinstance(text, bytes):
        text = decode_utf8(text, source)
    fast = _load_json(text)
    if fast is None:
        fast = _load_c(text)
    if fast is not None:
        return fast
    return _load_pure(text, source)


def _flat_hint(text: str) -> str:
    """A hint for YAML copied from a page that lost its indentation (no line of the text is indented, yet it
    has mappings under mappings), the usual cause of "could not find expected ':'" in an article's manifest."""
    lines = [ln for ln in text.splitlines()[:10_000] if ln.strip() and not ln.lstrip().startswith("#")]
    if len(lines) < 4 or any(ln[:1] in (" ", "\t") for ln in lines):
        return ""
    if sum(ln.rstrip().endswith(":") for ln in lines) < 2:
        return ""
    return " (no line is indented: was the YAML's indentation lost when it was copied?)"


def _load_pure(text: str, source: str) -> list[Document]:
    """:func:`load_documents` with PyYAML's pure-Python loader (every error is reported from here)."""
    docs: list[Document] = []
    index = 0
    loader: _Loader | None = None
    try:
        loader = _Loader(text)
        while loader.check_node():
            node = loader.get_node()
            data = None if node is None else loader.construct_document(node)
            for p, bad in _walk_json(data, []):
                raise YAMLLoadError(source, f"value {bad!r} has no JSON form", index, field_path(p))
            docs.append(Document(index, data))
            index += 1
    except _Limit as e:
        mark: Any = e.mark
        path = e.path or (_path_at(text, index, mark.index) if mark is not None else "")
        raise YAMLLoadError(source, f"{_mark_text(e.mark)}{e.message}", index, path) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = e.problem or e.context or str(e)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise YAMLLoadError(source, f"invalid YAML{where}: {problem}{_flat_hint(text)}", index) from None
    except yaml.YAMLError as e:
        raise YAMLLoadError(source, f"invalid YAML: {e}", index) from None
    except (ValueError, TypeError, OverflowError) as e:  # a constructor refused a scalar
        raise YAMLLoadError(source, f"invalid value: {e}", index) from None
    except RecursionError:
        raise YAMLLoadError(source, f"nested deeper than {MAX_DEPTH} levels", index) from None
    finally:
        if loader is not None:
            loader.dispose()
    return docs


def load_file(path: str) -> list[Document]:
    """:func:`load_documents` of a file read as bytes. OSError is turned into :class:`YAMLLoadError`."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise YAMLLoadError(path, f"cannot read: {e.strerror or e}") from None
    return load_documents(data, path)
