"""hello-world: the smallest tool that follows aat's contract.

argv: `main.py greet --name NAME`; prints one JSON object on stdout; exit 0 ok, 2 usage error.
"""

import argparse
import json
import sys


class Parser(argparse.ArgumentParser):
    def error(self, message):
        # Usage errors keep the contract: a JSON object on stdout, a line on stderr, exit 2.
        print(json.dumps({"error": message}, ensure_ascii=False))
        print(f"hello-world: error: {message}", file=sys.stderr)
        sys.exit(2)


def main():
    parser = Parser(prog="hello-world")
    actions = parser.add_subparsers(dest="action", required=True)
    greet = actions.add_parser("greet")
    greet.add_argument("--name", required=True)
    args = parser.parse_args()
    print(json.dumps({"greeting": f"Hello, {args.name}!"}, ensure_ascii=False))


if __name__ == "__main__":
    main()
