"""project-history-recall: a Hermes Agent plugin that recalls what was decided on a codebase.

``register(ctx)`` only wires: the five tools of ``handlers.py`` in the plugin
toolset ``project_history_recall`` (a toolset of our own, so CLI and gateway
sessions get them, not only the desktop's ``project`` toolset), the slash
commands and the two warm-up hooks of ``commands.py``. Importing this
package has no side effects: no database opened, no thread started, no
model loaded; and it imports none of the plugin's modules (``register``
does), so the command line (``__main__.main``) starts before they load and
catches a Ctrl-C while they do.
"""

from __future__ import annotations

from typing import Any


def register(ctx: Any) -> None:
    """Wire the tools, slash commands and hooks into Hermes (no other side effects)."""
    from . import commands, handlers

    for name, schema, handler, emoji in handlers.TOOLS:
        ctx.register_tool(
            name=name,
            toolset=handlers.TOOLSET,
            schema=schema,
            handler=handler,
            check_fn=handlers.check_available,
            description=schema["description"],
            emoji=emoji,
        )
    for name, make, description, hint in commands.COMMANDS:
        extra = {"args_hint": hint} if hint else {}
        ctx.register_command(name, make(ctx.dispatch_tool), description=description, **extra)
    ctx.register_hook("on_session_start", commands.on_session_start)
    ctx.register_hook("pre_llm_call", commands.on_turn)
