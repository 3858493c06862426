"""Answer kinds as tools: each kind of answer is one tool with a name, a JSON schema of its arguments, an executor
over the store's data and a composer of its sentences (``registry``). A planner (``..planning``) turns the
shopper's message into calls; ``registry.execute`` runs them. Facts come from executors, never from a planner.

Importing this package registers every tool.
"""

from . import (  # noqa: F401  (registration)
    capacity, compare, details, gifts, kit, order_cancel, order_items, order_return, order_status, policy, replies, sale, search,
    total, which,
)
from .registry import REGISTRY, Call, Context, PlanError, execute, parse_plan, plan_schema, specs

__all__ = ["REGISTRY", "Call", "Context", "PlanError", "execute", "parse_plan", "plan_schema", "specs"]
