"""What the recipe tests' Python checks share (wu2019_small_cpu_test.sh, tay2021_tuning_test.sh): the records of a
`cabert inspect --json` file, and a check that stops with its message and the recipe's table."""
import json
import sys


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.startswith("{") and '"kind"' in line]


def checker(table):
    def check(condition, message):
        if not condition:
            sys.exit(message + "\n" + table)

    return check
