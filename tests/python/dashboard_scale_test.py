#!/usr/bin/env python3
"""The dashboard at a thousand nodes (issue 45): a real head with its HTTP endpoint, 1000
simulated nodes (tools/sim_nodes: the real node agent and worker, a stand-in model) and 10
more that are SIGKILLed, and the page in a real headless Chromium.

Checks that the page's one request a second stays small (one page of members, the workers
and each fragment's workers counted, not listed), that the page shows the members counted by
state and 50 rows, pages forward, filters by state (the 10 dead), and keeps updating.
Prints the sizes it measured; a screenshot lands in WORK_DIR.

Usage: dashboard_scale_test.py ATOLL SIM_NODES WORK_DIR
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dashboard_test import browser, check, http, read, wait_for  # noqa: E402

NODES = 1000
PER_PROCESS = 250  # as `bench scale`
KILLED = 10
PAGE_ROWS = 50
MAX_DASHBOARD_BYTES = 64 * 1024  # a page of 50 members and the summaries; every member was ~0.5 MB


def dashboard(url, query=""):
    code, body = http(url + "api/dashboard" + query, timeout=30)
    if code != 200:
        raise SystemExit(f"FAILED: /api/dashboard{query} answered {code}: {body[:300]}")
    return json.loads(body), len(body)


def status_while_busy(url):
    """The dashboard's status, or None while the head is too busy to answer: a thousand joins
    in two seconds keep the registry a few seconds behind (each is a synced write), and a view
    asked meanwhile times out (3 s)."""
    code, body = http(url + "api/dashboard?limit=1", timeout=30)
    return json.loads(body)["status"] if code == 200 else None


def page_state(driver):
    return driver.execute_script(
        "return {rows: [...document.querySelectorAll('#members tbody tr')].map((r) => r.className),"
        " counts: document.getElementById('member-counts').textContent,"
        " page: document.getElementById('member-page').textContent,"
        " updated: document.getElementById('updated').textContent,"
        " fragments: document.querySelectorAll('#fragments tbody tr').length};")


def main():
    atoll, sim, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    procs = []

    def spawn(name, args):
        p = subprocess.Popen(args, stdout=open(os.path.join(work, name + ".log"), "w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
        procs.append(p)
        return p

    head_dir = os.path.join(work, "head")
    spawn("head", [atoll, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir, "--http", "tcp://127.0.0.1:0",
                   "--set", "run.example=mlp", "--set", f"run.steps={10 ** 9}", "--set", "run.min_workers=2",
                   "--set", "diloco.sync_every=50", "--set", "storage.keepers=head",
                   "--set", "cluster.heartbeat_ms=1000", "--set", "cluster.lease_ms=10000"])
    try:
        endpoint = wait_for("the head", lambda: read(os.path.join(head_dir, "head.endpoint")))
        url = wait_for("the HTTP endpoint", lambda: read(os.path.join(head_dir, "http.endpoint")))

        def sims(name, count, seed):
            return spawn(name, [sim, "--head", endpoint, "--nodes", str(count), "--values", "64", "--step-ms", "200",
                                "--seconds", str(10 ** 6), "--churn-after", str(10 ** 6), "--seed", str(seed)])

        for i in range(NODES // PER_PROCESS):
            sims(f"sim{i}", PER_PROCESS, i + 1)
        doomed = sims("doomed", KILLED, 99)
        total = NODES + KILLED
        wait_for(f"{total} members", lambda: (s := status_while_busy(url)) and s.get("members_total") == total, 180)
        os.killpg(doomed.pid, signal.SIGKILL)  # their connections close: dead within a second or so
        wait_for(f"{KILLED} dead", lambda: (s := status_while_busy(url)) and s["members_by_state"].get("dead")
                 == KILLED, 60)

        d, size = dashboard(url, f"?limit={PAGE_ROWS}")
        with open(os.path.join(work, "dashboard.json"), "w") as fh:
            json.dump(d, fh, indent=1)
        members_bytes = len(http(url + "api/members", timeout=30)[1])
        status_bytes = len(http(url + "api/status", timeout=30)[1])
        print(f"/api/dashboard?limit={PAGE_ROWS}: {size} bytes; every member (/api/members) {members_bytes} and "
              f"/api/status {status_bytes}, what the page fetched a second before", flush=True)
        check(size < MAX_DASHBOARD_BYTES, f"the page's request is {size} bytes at {total} members")
        check(len(d["members"]) == PAGE_ROWS, f"one page of {PAGE_ROWS} members")
        check(all(len(f["workers"]) <= 10 and "workers_agreeing" in f for f in d["fragments"]),
              "each fragment's workers are counted, and at most 10 named")
        check(all(len(e["missing"]) <= 10 for e in d["explain"]), "each round's missing workers: at most 10 named")
        check(d["status"]["workers_summary"]["count"] >= NODES, "the workers are summarized")
        code, body = http(url + "api/dashboard?state=sleeping")
        check(code == 400 and "sleeping" in body, "a bad member query is refused by name")

        driver = browser()
        try:
            driver.get(url)
            s = wait_for("the page's counts", lambda: (p := page_state(driver)) and f"{total} member(s)" in p["counts"]
                         and p, 60)
            check(f"{KILLED} dead" in s["counts"], "the page counts the members by state: " + s["counts"])
            check(len(s["rows"]) == PAGE_ROWS, f"and shows {PAGE_ROWS} rows, not {total}")
            check(s["page"] == f"rows 1-{PAGE_ROWS} of {total}", "where the page is: " + s["page"])
            driver.execute_script("document.getElementById('member-next').click()")
            s = wait_for("the next page", lambda: (p := page_state(driver))
                         and p["page"] == f"rows {PAGE_ROWS + 1}-{2 * PAGE_ROWS} of {total}" and p, 30)
            check(len(s["rows"]) == PAGE_ROWS, "the next page has its rows")
            driver.execute_script("const s = document.getElementById('member-state'); s.value = 'dead';"
                                  "s.dispatchEvent(new Event('change'));")
            s = wait_for("the dead members", lambda: (p := page_state(driver))
                         and p["page"] == f"rows 1-{KILLED} of {KILLED}" and p, 30)
            check(len(s["rows"]) == KILLED and all(r == "state-dead" for r in s["rows"]),
                  f"filtered by state: the {KILLED} dead")
            before = s["updated"]
            time.sleep(2.5)
            s = page_state(driver)
            check(s["updated"] != before and "does not answer" not in s["updated"],
                  "the page keeps updating every second: " + s["updated"])
            check(s["fragments"] >= 1, "and shows the fragments")
            timing = driver.execute_script(
                "const e = performance.getEntriesByType('resource').filter((r) => r.name.includes('/api/dashboard'));"
                "return e.length ? e[e.length - 1].duration : -1;")
            print(f"the page's last /api/dashboard took {timing:.1f} ms in the browser", flush=True)
            driver.save_screenshot(os.path.join(work, "dashboard-1000.png"))
        finally:
            driver.quit()
        print("PASS")
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


if __name__ == "__main__":
    main()
