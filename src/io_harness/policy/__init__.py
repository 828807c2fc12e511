"""The policy over acts: what the agent may read, write, run and connect to.

A :class:`Policy` holds named :class:`Layer` s of :class:`Rule` s and a
default :class:`Effect` per :class:`Act`. Its :meth:`~Policy.explain` answers
one act on one target with a :class:`Verdict` that names the deciding rule and
layer: a matching deny rule anywhere wins, then an ask rule, then an allow
rule, then the act's default. A policy may carry a bound (``within``) whose
stricter verdicts win; :meth:`~Policy.contain` uses it so a sub-agent's policy
can only narrow its parent's.

The gate (private) asks the policy for every act of the agent's tools and
the criterion; an *ask* goes to an :class:`Approver`, whose :class:`Decision`
approves (perhaps rewriting the call, perhaps remembering rules), denies with
a reason, or defers the act past the process's exit.

Globs have two wildcards, ``*`` (any run of characters, ``/`` included) and
``?`` (one character), and match the whole target. Path and program globs
also match the target's last part, so ``.env`` applies at any depth; net
globs match ``host:port`` or the bare host, in any letter case, every
spelling of an address as that address (``0x7f.1`` and ``[::ffff:127.0.0.1]``
are ``127.0.0.1``).
"""

from __future__ import annotations

from io_harness.policy._approval import ApprovalContext, ApprovalRequest, Approver, Decision
from io_harness.policy._approvers import ApproveAll, CallbackApprover, DenyAll, StdinApprover
from io_harness.policy._policy import Policy
from io_harness.policy._rules import Act, Effect, Layer, Rule, Verdict, normalise_target

__all__ = [
    "Act",
    "ApprovalContext",
    "ApprovalRequest",
    "ApproveAll",
    "Approver",
    "CallbackApprover",
    "Decision",
    "DenyAll",
    "Effect",
    "Layer",
    "Policy",
    "Rule",
    "StdinApprover",
    "Verdict",
    "normalise_target",
]
