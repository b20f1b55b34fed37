"""How many requests one level of a workload runs: `requests_per_level` is an integer or
an expression in C ("2*C", "max(4, C)", "C * ceil(6 / C)"), evaluated per level.

Why here, in the core: the playbook refuses an expression that does not give at least
one request at every level of its workload when it is loaded (one line, exit 2), before
any server starts; the load generator (`tools.loadgen`) evaluates the same function when
it runs the level.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

from campaign.domain.errors import UserError

__all__ = ["count_error", "requests_for_level"]

_BINOPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCS: dict[str, Callable[..., float]] = {
    "max": max,
    "min": min,
    "ceil": math.ceil,
    "floor": math.floor,
    "round": round,
    "int": int,
}


def _eval_node(node: ast.AST, concurrency: int) -> float:
    if isinstance(node, ast.Expression):
        return _eval_node(node.body, concurrency)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and node.id == "C":
        return concurrency
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval_node(node.operand, concurrency)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval_node(node.left, concurrency), _eval_node(node.right, concurrency)
        if isinstance(node.op, ast.Pow) and abs(right) > 8:
            raise ValueError("exponent too large")
        return _BINOPS[type(node.op)](left, right)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCS
        and not node.keywords
        and node.args
    ):
        return _FUNCS[node.func.id](*(_eval_node(a, concurrency) for a in node.args))
    raise ValueError(f"unsupported element {type(node).__name__}")


def count_error(expr: str | int, concurrencies: list[int]) -> str | None:
    """Why `expr` gives no valid request count at one of these levels (None: it does at
    every one), in the words of `requests_for_level`'s error without its field prefix."""
    for c in concurrencies:
        try:
            requests_for_level(expr, c)
        except UserError as exc:
            return str(exc).removeprefix(_PREFIX)
    return None


_PREFIX = "workload: requests_per_level: "


def requests_for_level(expr: str | int, concurrency: int) -> int:
    """Evaluate ``requests_per_level`` ("2*C", "max(4, C)", 16) for one level.

    Only numbers, ``C``, + - * / // % **, and max/min/ceil/floor/round/int are allowed;
    a fractional result is rounded up.  Anything else is a ``UserError``.
    """
    text = str(expr).strip()
    try:
        # float(): an integer past a float's range (a YAML integer, or "((8**8)**8)**8") is an error too
        value = float(
            expr
            if isinstance(expr, int) and not isinstance(expr, bool)
            else _eval_node(ast.parse(text, mode="eval"), concurrency)
        )
    except (SyntaxError, ValueError, TypeError, ZeroDivisionError, OverflowError) as exc:
        raise UserError(
            f"workload: requests_per_level: cannot evaluate {text!r} ({exc}) "
            '(fix: an integer or an expression in C such as "2*C" or "max(4, C)")'
        ) from exc
    if not math.isfinite(value):
        raise UserError(
            f"workload: requests_per_level: {expr!r} gives {value} requests at C={concurrency} "
            '(fix: an expression with a finite value, such as "2*C")'
        )
    count = math.ceil(value)
    if count < 1:
        raise UserError(
            f"workload: requests_per_level: {expr!r} gives {count} requests at C={concurrency} (fix: at least 1)"
        )
    return count
