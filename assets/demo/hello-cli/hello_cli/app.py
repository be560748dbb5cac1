"""The commands of hello-cli."""

import sys

COMMANDS = {"version": lambda args: print("hello-cli 1.0.0")}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in COMMANDS:
        print("usage: hello-cli {" + ",".join(sorted(COMMANDS)) + "} ...")
        return 2
    COMMANDS[args[0]](args[1:])
    return 0
