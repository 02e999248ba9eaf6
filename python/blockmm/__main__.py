"""python3 -m blockmm import|export|spy ...: the tools without their wrapper scripts."""
import sys

from .cli import export_main, import_main, spy_main

TOOLS = {"import": import_main, "export": export_main, "spy": spy_main}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in TOOLS:
        print("usage: python3 -m blockmm import|export|spy ARGS (each takes --help)", file=sys.stderr)
        sys.exit(2)
    sys.exit(TOOLS[sys.argv[1]](sys.argv[2:]))
