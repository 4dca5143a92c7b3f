"""The metrics file a head writes (`atoll up --metrics`, JSON lines: step, round, eval,
summary, worker_done, ...); docs/operations.md lists the kinds and their fields."""
import json


def read_lines(path):
    """Every line of the metrics file, parsed; [] while it does not exist yet."""
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def of_type(lines, kind):
    return [line for line in lines if line.get("type") == kind]
