"""``cached_attribute``: a lazily computed attribute without a lock.

``functools.cached_property`` on Python 3.11 computes under one lock per *property*, shared by every
instance of the class. ``metrics.evaluate(..., threads=N)`` builds one ranked-lists object per
chunk of queries, on N threads: with that lock, a thread sorting its chunk (``perm``) made every
other thread wait to sort its own, and the threads ran one after another. Python 3.12 dropped the
lock; this descriptor does without it on every version. A value computed twice by two threads of
the *same* instance is the same value (the computations are pure), so nothing needs the lock.
"""

from __future__ import annotations

from typing import Any, Callable


class cached_attribute:  # noqa: N801  named like the decorator it replaces
    """Decorator: ``obj.name`` calls the method once and stores the result in ``obj.__dict__``.

    A non-data descriptor: after the first access the instance attribute shadows it, so later
    reads are plain attribute reads.

    >>> class Lists:
    ...     calls = 0
    ...     @cached_attribute
    ...     def order(self):
    ...         Lists.calls += 1
    ...         return [2, 0, 1]
    >>> x = Lists()
    >>> x.order, x.order, Lists.calls
    ([2, 0, 1], [2, 0, 1], 1)
    """

    def __init__(self, func: Callable[[Any], Any]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = self.func(instance)
        instance.__dict__[self.name] = value
        return value
