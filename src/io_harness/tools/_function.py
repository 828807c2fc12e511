"""``@tool``: an ordinary typed function as a caller :class:`~io_harness.tools._caller.Tool`.

The spec is built once, at decoration, from the signature (pydantic) and the
docstring (``docstring_parser``: Google, reST and NumPy styles); so is the
model that checks each call's arguments.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import sys
import threading
import warnings
from collections.abc import Callable
from types import FrameType
from typing import Annotated, Any, Generic, ParamSpec, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo

from io_harness._validation import describe_validation
from io_harness.errors import ConfigError
from io_harness.messages import ToolSpec
from io_harness.tools._base import ToolFailure, schema_without_titles
from io_harness.tools._caller import limit_problem
from io_harness.tools._names import tool_name_problem

__all__ = ["FunctionTool", "ToolArgumentsError", "tool"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

_ANY: TypeAdapter[Any] = TypeAdapter(Any)

# Keys whose value maps names to schemas: a property called "title" is not a title.


class ToolArgumentsError(ToolFailure):
    """The model's arguments do not fit the function's parameters.

    The message names each bad field; the call's observation is
    ``<tool>: invalid arguments: <field>: <problem>; ...``.
    """


class FunctionTool(Generic[P, R]):
    """A function made a caller tool by :func:`tool`; still callable as the function.

    ``spec()`` gives the spec built at decoration. ``invoke(arguments)``
    checks the arguments against the parameters (pydantic's lax mode, so
    ``"3"`` is an ``int``), calls the function (a sync one in a worker
    thread, so it never blocks the event loop) and returns its result, as
    JSON when it is not a ``str``.

    A sync function that outlives its ``timeout`` is not stopped (a thread
    cannot be): the call's observation says it was ended, and what the
    function returns later is discarded.
    """

    __wrapped__: Callable[P, R]
    """The decorated function (set by :func:`functools.update_wrapper`, like its name)."""
    __name__: str

    def __init__(
        self,
        func: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        max_result_chars: int | None = None,
    ) -> None:
        functools.update_wrapper(self, func)
        where = getattr(func, "__qualname__", None) or repr(func)
        tool_name = name if name is not None else getattr(func, "__name__", "")
        problem = tool_name_problem(tool_name) or limit_problem(timeout, max_result_chars)
        if problem is not None:
            raise ConfigError(f"@tool {where}: {problem}")
        self._func = func
        self._call: Callable[..., Any] = func
        self._is_async = inspect.iscoroutinefunction(func)
        self.timeout = timeout
        """Seconds a call may take; ``None``: the harness's default."""
        self.max_result_chars = max_result_chars
        """The longest result the model is shown; ``None``: the harness's default."""
        import docstring_parser  # at decoration only: it costs the package's import nothing

        doc = docstring_parser.parse(inspect.getdoc(func) or "")
        documented = {p.arg_name: p.description for p in doc.params if p.description}
        self._model, self._positional, self._keyword = _arguments_model(
            func, where, tool_name, documented
        )
        parameters = schema_without_titles(self._model.model_json_schema(by_alias=True))
        parameters.setdefault("required", [])
        if description is None:
            description = "\n\n".join(
                part for part in (doc.short_description, doc.long_description) if part
            )
            if not description:
                _warn_undescribed(where, tool_name)
        self._spec = ToolSpec(name=tool_name, description=description, parameters=parameters)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the function itself, as if it were not decorated."""
        return self._func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self._spec.name!r} of {self._func!r}>"

    def spec(self) -> ToolSpec:
        """The spec built at decoration."""
        return self._spec

    def check_arguments(self, arguments: dict[str, Any]) -> str | None:
        """What is wrong with ``arguments`` for this function, naming each bad field, if any."""
        try:
            self._model.model_validate(arguments)
        except ValidationError as exc:
            return f"invalid arguments: {describe_validation(exc, top='arguments')}"
        return None

    async def invoke(self, arguments: dict[str, Any]) -> str:
        """Check the model's arguments, call the function, return its result as text.

        Raises :class:`ToolArgumentsError` naming each bad field.
        """
        try:
            checked = self._model.model_validate(arguments)
        except ValidationError as exc:
            problems = describe_validation(exc, top="arguments")
            raise ToolArgumentsError(f"invalid arguments: {problems}") from None
        values = checked.__dict__
        positional = [values[field] for field in self._positional]
        keyword = {parameter: values[field] for field, parameter in self._keyword}
        if self._is_async:
            result = await self._call(*positional, **keyword)
        else:
            result = await in_daemon_thread(self._call, *positional, **keyword)
            if inspect.isawaitable(result):
                result = await result
        if isinstance(result, str):
            return result
        return _ANY.dump_json(result).decode()


async def in_daemon_thread(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``func(*args, **kwargs)`` in a thread of its own, awaited without blocking the loop.

    Not the loop's shared pool (``asyncio.to_thread``): a call abandoned at its
    timeout keeps its thread, and a pool thread would hold up ``asyncio.run``'s
    shutdown (and so ``run_sync``) until the function returned, and fill the
    pool for every later call. A daemon thread is left to finish, or to end
    with the process.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():  # the caller stopped waiting (a timeout, a cancel)
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        try:
            result, error = context.run(func, *args, **kwargs), None
        except BaseException as exc:  # handed to the awaiting task, whatever it is
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed before the function returned
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name=f"ioh-tool-{func.__name__}", daemon=True).start()
    return await future


@overload
def tool(func: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    max_result_chars: int | None = None,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    func: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    max_result_chars: int | None = None,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Make a typed function, sync or async, a caller tool: ``@tool`` or ``@tool(...)``.

    The name is the function's (or ``name``); the description is the
    docstring's summary and body (or ``description``; a function with neither
    is decorated with a :class:`UserWarning`, since the model would be offered
    a name alone); each parameter is an
    argument, described by the docstring's ``Args``/``:param``/``Parameters``
    entry, optional when it has a default. ``timeout`` (seconds) and
    ``max_result_chars`` override the harness's defaults.

    Raises :class:`~io_harness.errors.ConfigError` at decoration, naming the
    function and the parameter, for ``*args``, ``**kwargs``, a parameter
    without a type annotation, or a type pydantic cannot check; and for a bad
    name, ``timeout`` or ``max_result_chars``.
    """

    def decorate(function: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool(
            function,
            name=name,
            description=description,
            timeout=timeout,
            max_result_chars=max_result_chars,
        )

    return decorate if func is None else decorate(func)


def _arguments_model(
    func: Callable[..., Any], where: str, tool_name: str, documented: dict[str, str]
) -> tuple[type[BaseModel], tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The model of the function's parameters, and how its fields map back to a call.

    Fields are named ``p0``, ``p1``... with the parameter's name as alias, so a
    parameter may be called ``json``, ``model_id`` or ``_x`` without meeting
    pydantic's own names.
    """
    try:
        signature = inspect.signature(func, eval_str=True)
    except (NameError, TypeError, ValueError, SyntaxError) as exc:
        raise ConfigError(f"@tool {where}: cannot read its signature: {exc}") from None
    fields: dict[str, Any] = {}
    positional: list[str] = []
    keyword: list[tuple[str, str]] = []
    for index, parameter in enumerate(signature.parameters.values()):
        what = f"@tool {where}: parameter {parameter.name!r}"
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            star = "*" if parameter.kind is parameter.VAR_POSITIONAL else "**"
            raise ConfigError(f"{what}: {star}{parameter.name} cannot be a tool's argument")
        if parameter.annotation is parameter.empty:
            raise ConfigError(f"{what} has no type annotation")
        _check_type(parameter.annotation, what)
        field, annotation, default = f"p{index}", parameter.annotation, parameter.default
        extra: dict[str, Any] = {"alias": parameter.name}
        if isinstance(default, FieldInfo):
            # ``x: int = Field(3, ...)``: its own settings first, the alias and docs on top.
            if default.description is None and parameter.name in documented:
                extra["description"] = documented[parameter.name]
            annotation, default = Annotated[annotation, default], parameter.empty
        elif parameter.name in documented:
            extra["description"] = documented[parameter.name]
        info = Field(**extra) if default is parameter.empty else Field(default, **extra)
        fields[field] = (annotation, info)
        if parameter.kind is parameter.POSITIONAL_ONLY:
            positional.append(field)
        else:
            keyword.append((field, parameter.name))
    try:
        model: type[BaseModel] = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="forbid"),
            **fields,
        )
        model.model_json_schema(by_alias=True)
    except Exception as exc:
        raise ConfigError(f"@tool {where}: cannot build its arguments' schema: {exc}") from None
    return model, tuple(positional), tuple(keyword)


def _warn_undescribed(where: str, tool_name: str) -> None:
    """Warn, at the decoration in the caller's code, that the model gets no description: it
    would be offered a name alone and left to guess what the tool does."""
    level = 2  # 1 is this function; 2 its caller, and so on
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        level, frame = level + 1, frame.f_back
    warnings.warn(
        f"@tool {where}: the function has no docstring, so the model is offered "
        f"{tool_name!r} with an empty description; give it a docstring (its first line says "
        "what the tool does) or @tool(description=...)",
        UserWarning,
        stacklevel=level,
    )


def _check_type(annotation: Any, what: str) -> None:
    try:
        TypeAdapter(annotation).json_schema()
    except Exception as exc:
        raise ConfigError(f"{what}: its type cannot be checked: {exc}") from None
