"""``ukdpack resident status|stop``: the resident server of this interpreter.

``status`` says where the server of this interpreter and installation listens and
whether one runs (exit 0 either way; ``--json`` for a report); ``stop`` asks it to end
once its running packs have (exit 0 whether or not one ran).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ukdpack.resident import client, place


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``resident`` subcommand and its two actions."""
    p = sub.add_parser("resident", help="the resident packer (UKDPACK_RESIDENT=1): whether "
                                        "its server runs, or stop it")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    status = actions.add_parser("status", help="where this interpreter's server listens, "
                                               "and whether one runs")
    status.add_argument("--json", action="store_true", help="print the state as JSON")
    stop = actions.add_parser("stop", help="end this interpreter's server once its running "
                                           "packs have")
    status.set_defaults(handler=cmd_resident)
    stop.set_defaults(handler=cmd_resident, json=False)


def state() -> dict[str, Any]:
    """Where this interpreter's server listens and what it says of itself."""
    where = place.here()
    problem = place.own_folder(where.folder, make=False)
    answer = client.ask(where, {"op": "ping"}) if problem is None else None
    return {"enabled": place.enabled(), "socket": where.socket, "log": where.log,
            "folder_problem": problem,
            "server_pid": answer.get("server") if answer else None,
            "running_packs": answer.get("running") if answer else None,
            "idle_s": answer.get("idle_s") if answer else place.idle_seconds()}


def cmd_resident(args: argparse.Namespace) -> int:
    """``status``: print the state; ``stop``: ask the server to end."""
    now = state()
    if args.action == "stop":
        if now["server_pid"] is None:
            print(f"ukdpack resident: no server listens at {now['socket']}")
            return 0
        answer = client.ask(place.here(), {"op": "stop"})
        pid = answer.get("stopping") if answer else None
        print(f"ukdpack resident: server pid {pid or now['server_pid']} stops"
              + (f" once its {answer['running']} running pack(s) end" if answer and
                 answer.get("running") else ""))
        return 0
    if args.json:
        json.dump(now, sys.stdout, indent=2)
        print()
        return 0
    setting = "on" if now["enabled"] else f"off (set {place.ENABLE_ENV}=1 to use it)"
    print(f"resident packer: {setting}")
    if now["folder_problem"]:
        print(f"socket folder:   unusable: {now['folder_problem']}")
    if now["server_pid"] is None:
        print(f"server:          none at {now['socket']} (the next pack starts one)")
    else:
        print(f"server:          pid {now['server_pid']} at {now['socket']}, "
              f"{now['running_packs']} pack(s) running, ends after {now['idle_s']:g} s idle")
    print(f"log:             {now['log']}")
    return 0
