"""What the Python process tests share: a check that fails the test with what it wanted,
bounded waits, and reading a process's log."""
import json
import os
import time


def check(cond, what):
    """Fails the test, saying what was expected, unless cond; prints it otherwise."""
    if not cond:
        raise SystemExit("FAILED: " + what)
    print("ok:", what, flush=True)


def text_of(path):
    """A log file's text so far ("" before the process wrote it)."""
    return open(path).read() if os.path.exists(path) else ""


def wait_for(predicate, seconds, every=0.1):
    """True once predicate() is, False if it is not within `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return False


def wait_for_text(path, text, seconds):
    return wait_for(lambda: text in text_of(path), seconds)


def last_json(text):
    """The last line of `text` that is a JSON object (an example's result line), or None."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


# The start of a child script that checks typed errors: expect(kind, fn) runs fn and wants an
# atoll.AtollError of class `kind`, printing it ("raised ...").
EXPECT_TYPED = """
import atoll
def expect(kind, fn):
    try:
        fn()
    except atoll.AtollError as e:
        assert isinstance(e, kind), f"{type(e).__name__} is not {kind.__name__}: {e}"
        print("raised", type(e).__name__, e.code, str(e)[:200])
        return
    raise SystemExit(f"no {kind.__name__} raised")
"""
