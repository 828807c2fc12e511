"""The guard of the ``PytestPasses`` runner: it notices changes to what decides outcomes.

When the session starts, before any subject code is imported, :class:`Guard`
takes a look at pytest's and pluggy's outcome machinery, the builtins it
leans on, the harness's own modules and the criterion's code; at each test
report and at the session's end it says what differs. It catches a subject
that replaces those functions, classes, methods or their code; code that
understands the guard itself can still get past it (``docs/verification.md``).

It depends on the standard library and pytest only, and is imported by name
from its own folder, never as part of io_harness.
"""

import builtins as _builtins_module

# The functions below resolve builtins through this copy, taken before any subject
# code runs, so a subject that rebinds ``builtins.isinstance`` does not reach them.
globals()["__builtins__"] = dict(vars(_builtins_module))

import ast  # noqa: E402
import itertools  # noqa: E402
import operator  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from collections.abc import Iterable, Mapping, Sequence  # noqa: E402
from types import CodeType, FunctionType, ModuleType  # noqa: E402
from typing import Any, TypeGuard  # noqa: E402

OUTCOME_MODULES = (
    "pytest",
    "_pytest.runner",
    "_pytest.python",
    "_pytest.python_api",
    "_pytest.approx",
    "_pytest.raises",
    "_pytest.reports",
    "_pytest.main",
    "_pytest.nodes",
    "_pytest.outcomes",
    "_pytest.skipping",
    "_pytest.fixtures",
    "_pytest.config",
    "_pytest.assertion",
    "_pytest.assertion.rewrite",
    "_pytest.assertion.util",
    "_pytest._code.code",
    "pluggy",
    "pluggy._caller",
    "pluggy._callers",
    "pluggy._execution",
    "pluggy._hooks",
    "pluggy._impl",
    "pluggy._manager",
    "pluggy._result",
)
"""The modules whose functions and classes decide what a test's outcome is."""

CORE_BUILTINS = (
    "AssertionError",
    "BaseException",
    "Exception",
    "__build_class__",
    "__import__",
    "all",
    "any",
    "bool",
    "callable",
    "compile",
    "dict",
    "exec",
    "frozenset",
    "getattr",
    "hasattr",
    "id",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "list",
    "next",
    "object",
    "repr",
    "set",
    "setattr",
    "sorted",
    "str",
    "super",
    "tuple",
    "type",
    "vars",
)
"""Builtins pytest's outcome logic leans on; a test has no reason to rebind them."""

_WATCHED_PACKAGES = ("_pytest", "pytest", "pluggy")


def _cell(cell: Any) -> object:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


_ABSENT = object()
_gettrace, _getprofile = sys.gettrace, sys.getprofile
_thread_gettrace, _thread_getprofile = threading.gettrace, threading.getprofile


def _state(value: object) -> tuple[object, ...]:
    """The objects that stay the same, by identity, while ``value`` is unchanged.

    A function's code, defaults and closure count: a subject can swap a
    function's ``__code__`` without replacing the function.
    """
    if isinstance(value, FunctionType):
        cells = [_cell(c) for c in value.__closure__ or ()]
        return (value, value.__code__, value.__defaults__, value.__kwdefaults__, *cells)
    if isinstance(value, classmethod | staticmethod):
        return (value, *_state(value.__func__))
    if isinstance(value, property):
        return (value, *_state(value.fget), *_state(value.fset), *_state(value.fdel))
    if isinstance(value, type):
        return (value, value.__mro__)
    return (value,)


def _ids(state: tuple[object, ...]) -> tuple[int, ...]:
    # Compared by identity: an object of the subject's with an ``__eq__`` that
    # always holds must not pass for the one it replaced.
    return tuple(map(id, state))


def _watched_class(value: object, own: Sequence[str]) -> TypeGuard[type]:
    if not isinstance(value, type):
        return False
    module = getattr(value, "__module__", "") or ""
    return module.split(".")[0] in _WATCHED_PACKAGES or module in own


_code_of = operator.attrgetter("__code__")
_defaults_of = operator.attrgetter("__defaults__")
_kwdefaults_of = operator.attrgetter("__kwdefaults__")
_contents_of = operator.attrgetter("cell_contents")
_mro_of = operator.attrgetter("__mro__")


class _Identities:
    """The identities of many watched objects, taken in bulk to compare quickly.

    Each report compares thousands of objects; this takes their identities
    with C-level lookups, and only a difference sends the guard through its
    slow, name-by-name comparison.
    """

    def __init__(
        self,
        pairs: Iterable[tuple[Mapping[str, object], str]],
        states: Iterable[tuple[object, ...]],
    ) -> None:
        groups: dict[int, tuple[Mapping[str, object], list[str]]] = {}
        for space, name in pairs:
            groups.setdefault(id(space), (space, []))[1].append(name)
        # The first name twice: an itemgetter of one name would not return a tuple.
        self._getters = [
            (space, operator.itemgetter(*names, names[0])) for space, names in groups.values()
        ]
        functions: dict[int, FunctionType] = {}
        classes: dict[int, type] = {}
        for state in states:
            for part in state:
                if isinstance(part, FunctionType):
                    functions[id(part)] = part
                elif isinstance(part, type):
                    classes[id(part)] = part
        self._functions = list(functions.values())
        self._cells = [
            cell
            for function in self._functions
            for cell in function.__closure__ or ()
            if _cell(cell) is not None
        ]
        self._classes = list(classes.values())

    def take(self) -> tuple[tuple[int, ...], ...] | None:
        """The identities now; ``None`` when a name or a cell is gone."""
        try:
            values = itertools.chain.from_iterable(getter(space) for space, getter in self._getters)
            return (
                tuple(map(id, values)),
                tuple(map(id, map(_code_of, self._functions))),
                tuple(map(id, map(_defaults_of, self._functions))),
                tuple(map(id, map(_kwdefaults_of, self._functions))),
                tuple(map(id, map(_contents_of, self._cells))),
                tuple(map(id, map(_mro_of, self._classes))),
            )
        except (KeyError, ValueError):
            return None


_Entry = tuple[str, Mapping[str, object], str, tuple[object, ...], tuple[int, ...]]
"""What the guard watches: its name, the namespace, the key, the state it saw (kept,
so no identity is reused) and that state's identities."""


class Guard:
    """Notices changes to what decides a test's outcome, made after it looked.

    It looks once, when the session starts — pytest configured, its plugins
    registered, no subject code imported yet (:meth:`watch_session`): at the
    functions and classes of :data:`OUTCOME_MODULES` (and the methods of
    pytest's and pluggy's classes), :data:`CORE_BUILTINS`, the harness's own
    modules, the plugin manager's hook implementations, the tracing hooks, and
    the code of the criterion's tests and helpers, compiled from the criterion
    file as pytest compiles it. :meth:`changes` compares the present with that.
    """

    def __init__(self, own: Sequence[ModuleType]) -> None:
        self._own = [module.__name__ for module in own]
        self._own_modules = list(own)
        self._session: Any = None
        self._watched: list[_Entry] = []
        self._closed: list[tuple[str, Mapping[str, object], frozenset[str], bool]] = []
        """Namespaces that gain no name: the harness's modules (any name) and pytest's
        classes (no function or descriptor; pytest itself sets a few flags on them)."""
        self._hooks_seen: dict[str, tuple[object, ...]] = {}
        self._expected_code: dict[str, CodeType] = {}
        self._checked_names: list[tuple[str, ...]] = []
        self._verified: dict[str, tuple[object, object]] = {}
        """Criterion functions already compared with the file's code: (function, code)."""
        self._watching = False
        self._bulk: _Identities | None = None
        self._bulk_seen: object = None
        self._criterion: tuple[object, _Identities, object] | None = None
        """The criterion module last found unchanged, its bulk identities and what they were."""

    def _watch(self, key: str, space: Mapping[str, object], name: str) -> None:
        state = _state(space.get(name, _ABSENT))
        self._watched.append((key, space, name, state, _ids(state)))

    def _look(self) -> None:
        classes: list[tuple[str, type]] = []
        for module_name in OUTCOME_MODULES:
            module = sys.modules.get(module_name)
            if module is None:
                continue
            space = vars(module)
            for name, value in list(space.items()):
                if callable(value) and not isinstance(value, ModuleType):
                    self._watch(f"{module_name}.{name}", space, name)
                    if _watched_class(value, self._own):
                        classes.append((f"{module_name}.{name}", value))
        for module in self._own_modules:
            space = vars(module)
            self._closed.append((module.__name__, space, frozenset(space), True))
            for name, value in list(space.items()):
                self._watch(f"{module.__name__}.{name}", space, name)
                if _watched_class(value, self._own):
                    classes.append((f"{module.__name__}.{name}", value))
            own_builtins = space.get("__builtins__")
            if isinstance(own_builtins, dict):
                prefix = f"{module.__name__}.__builtins__"
                self._closed.append((prefix, own_builtins, frozenset(own_builtins), True))
                for name in list(own_builtins):
                    self._watch(f"{prefix}.{name}", own_builtins, name)
        seen: set[int] = set()
        for prefix, cls in classes:
            if id(cls) in seen:
                continue
            seen.add(id(cls))
            class_space = vars(cls)
            self._closed.append((prefix, class_space, frozenset(class_space), False))
            for name, value in list(class_space.items()):
                if isinstance(value, FunctionType | classmethod | staticmethod | property | type):
                    self._watch(f"{prefix}.{name}", class_space, name)
        builtins_space = vars(_builtins_module)
        for name in CORE_BUILTINS:
            self._watch(f"builtins.{name}", builtins_space, name)
        self._hooks_seen = self._hooks()
        present = [entry for entry in self._watched if entry[3][0] is not _ABSENT]
        self._bulk = _Identities(
            ((space, name) for _, space, name, _, _ in present), (e[3] for e in present)
        )
        self._bulk_seen = self._bulk.take()

    def _hooks(self) -> dict[str, tuple[object, ...]]:
        manager = self._session.config.pluginmanager
        now: dict[str, tuple[object, ...]] = {
            "the plugin manager's hook caller": (getattr(manager, "_inner_hookexec", None),),
            "sys.gettrace()": (_gettrace(),),
            "sys.getprofile()": (_getprofile(),),
            "threading.gettrace()": (_thread_gettrace(),),
            "threading.getprofile()": (_thread_getprofile(),),
        }
        for name, caller in list(vars(manager.hook).items()):
            impls = caller.get_hookimpls()
            now[f"hook {name}"] = (
                caller,
                getattr(caller, "_hookexec", None),
                *[part for impl in impls for part in (impl, impl.function)],
            )
        return now

    def watch_session(self, session: Any, test_file: str) -> None:
        """Take the look; the session has started and the subject has not run yet."""
        self._session = session
        self._look()
        with open(test_file, "rb") as handle:
            source = handle.read()
        tree = ast.parse(source, filename=test_file)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _plain(node):
                self._checked_names.append((node.name,))
            elif isinstance(node, ast.ClassDef) and not node.decorator_list:
                self._checked_names.extend(
                    (node.name, item.name)
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _plain(item)
                )
        from _pytest.assertion.rewrite import rewrite_asserts

        rewrite_asserts(tree, source, test_file, session.config)
        module_code = compile(tree, test_file, "exec", dont_inherit=True)
        self._expected_code = dict(_code_objects(module_code))
        self._watching = True

    def changes(self, item: Any = None) -> list[str]:
        """What differs from what was seen before the subject ran, one sentence each.

        With ``item`` (the test being run), also its test function and the
        criterion module's functions, against the criterion file's code.
        """
        if not self._watching:
            return []
        found = []
        closed_changed = any(space.keys() != names for _, space, names, _ in self._closed)
        if closed_changed or self._bulk is None or self._bulk.take() != self._bulk_seen:
            found += self._slow_changes()
        for key, now in self._hooks().items():
            if _ids(now) != _ids(self._hooks_seen.get(key, ())):
                found.append(f"{key} was replaced")
        if item is not None:
            found += self._item_changes(item)
        return found

    def _slow_changes(self) -> list[str]:
        found = []
        for key, space, name, then, then_ids in self._watched:
            value = space.get(name, _ABSENT)
            if value is _ABSENT:
                if then[0] is not _ABSENT:
                    found.append(f"{key} was removed")
            elif value is not then[0] or (len(then) > 1 and _ids(_state(value)) != then_ids):
                found.append(f"{key} was replaced")
        for index, (prefix, space, names, any_name) in enumerate(self._closed):
            if space.keys() == names:
                continue
            added = [
                f"{prefix}.{name} was added"
                for name in sorted(set(space) - names)
                if any_name or callable(space[name]) or hasattr(space[name], "__get__")
            ]
            if added:
                found += added
            else:  # only flags pytest sets on its classes: seen from now on
                self._closed[index] = (prefix, space, frozenset(space), any_name)
        return found

    def _item_changes(self, item: Any) -> list[str]:
        found = [
            f"the test item {item.nodeid} was given its own {name}"
            for name in ("runtest", "setup", "teardown")
            if name in vars(item)
        ]
        found += self._criterion_changes(getattr(item, "module", None))
        cls = getattr(item, "cls", None)
        qualname = (f"{cls.__name__}." if cls is not None else "") + str(
            getattr(item, "originalname", "")
        )
        if (*qualname.split("."),) in self._checked_names:
            found += self._code_changes(qualname, getattr(item, "function", None), item.nodeid)
        return found

    def _criterion_changes(self, module: object) -> list[str]:
        """The criterion module's functions against the file's code (quick when unchanged)."""
        if self._criterion is not None:
            seen_module, bulk, seen = self._criterion
            if seen_module is module and bulk.take() == seen:
                return []
        found: list[str] = []
        pairs: list[tuple[Mapping[str, object], str]] = []
        states: list[tuple[object, ...]] = []
        for names in self._checked_names:
            found += self._code_changes(".".join(names), _lookup(module, names))
            for depth in range(1, len(names) + 1):  # the class too, for a method
                space = getattr(_lookup(module, names[: depth - 1]), "__dict__", None)
                if isinstance(space, Mapping) and names[depth - 1] in space:
                    pairs.append((space, names[depth - 1]))
                    states.append(_state(space[names[depth - 1]]))
        if not found:
            bulk = _Identities(pairs, states)
            self._criterion = (module, bulk, bulk.take())
        return found

    def _code_changes(self, qualname: str, value: object, nodeid: str = "") -> list[str]:
        expected = self._expected_code.get(qualname)
        if expected is None:
            return []
        what = f"the criterion's {qualname}" + (f" that {nodeid} runs" if nodeid else "")
        if value is None:
            return [f"{what} was removed"]
        code = getattr(value, "__code__", None)
        verified = self._verified.get(qualname)
        if verified is not None and verified[0] is value and verified[1] is code:
            return []
        if not isinstance(value, FunctionType) or code != expected:
            return [f"{what} was replaced"]
        if not nodeid:
            self._verified[qualname] = (value, code)
        return []


def _lookup(module: object, names: tuple[str, ...]) -> object:
    value = module
    for name in names:
        namespace = getattr(value, "__dict__", None)
        value = namespace.get(name) if isinstance(namespace, Mapping) else None
    return value


def _plain(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Undecorated, or decorated by ``pytest.mark`` only (which returns the function)."""
    return all(_is_mark(decorator) for decorator in node.decorator_list)


def _is_mark(node: ast.expr) -> bool:
    if isinstance(node, ast.Call):
        node = node.func
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    parts.reverse()
    return parts[:2] == ["pytest", "mark"] or parts[:1] == ["mark"]


def _code_objects(code: CodeType) -> Iterable[tuple[str, CodeType]]:
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield const.co_qualname, const
            yield from _code_objects(const)
