#!/usr/bin/env python3
"""The head's HTTP endpoint against a live cluster (issue 12's tests):

1. /metrics, scraped and parsed by Prometheus' own parser (python3-prometheus-client),
   agrees with `atollctl status --json`;
2. the dashboard in a real headless browser (Debian's chromium + chromedriver, through
   python3-selenium) shows both members and a committed round, updates when a round
   commits, says what of the run's data is learned, refuses the drain button without the
   token, and shows a SIGKILLed node as dead; screenshots are saved in WORK_DIR;
3. hostile requests (an unknown path, a huge header, slow clients holding the request
   threads) leave training going and /metrics answering; the drain with the token works.

Usage: dashboard_test.py ATOLL ATOLLCTL WORK_DIR
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def check(cond, what):
    if not cond:
        raise SystemExit("FAILED: " + what)
    print("ok:", what, flush=True)


def wait_for(what, predicate, timeout=60, every=0.2):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise SystemExit("FAILED: timed out waiting for " + what)


def read(path):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def http(url, method="GET", headers=None, timeout=10):
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Cluster:
    def __init__(self, atoll, atollctl, work):
        self.atoll, self.atollctl, self.work = atoll, atollctl, work
        self.keys = os.path.join(work, "keys")
        subprocess.run([atoll, "keygen", "--out", self.keys], check=True, stdout=subprocess.DEVNULL)
        self.head_dir = os.path.join(work, "head")
        self.procs = []
        # The mlp: rounds every second or so; a dead node is declared within 3 s.
        self.head = self.spawn("head", [atoll, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", self.head_dir,
                                        "--keys", self.keys, "--http", "tcp://127.0.0.1:0", "--set", "run.example=mlp",
                                        "--set", "run.steps=1000000000", "--set", "diloco.sync_every=300",
                                        "--set", "cluster.heartbeat_ms=300", "--set", "cluster.lease_ms=3000"])
        self.endpoint = wait_for("the head", lambda: read(os.path.join(self.head_dir, "head.endpoint")))
        self.url = wait_for("the dashboard", lambda: read(os.path.join(self.head_dir, "http.endpoint")))
        self.nodes = [self.spawn(f"node{i}", [atoll, "join", "--head", self.endpoint, "--keys", self.keys,
                                              "--threads", "1"]) for i in (1, 2)]

    def spawn(self, name, args):
        log = open(os.path.join(self.work, name + ".log"), "w")
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        return p

    def ctl(self, *args):
        r = subprocess.run([self.atollctl, "--head", self.endpoint, "--keys", self.keys, *args, "--json"],
                           capture_output=True, text=True, timeout=30)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def samples(text):
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def check_metrics(c):
    status_before = c.ctl("status")
    code, text = http(c.url + "metrics")
    status_after = c.ctl("status")
    check(code == 200, "GET /metrics answers 200")
    m = samples(text)  # raises on anything the Prometheus parser does not accept
    check(m[("atoll_up", ())] == 1, "atoll_up is 1")
    check(m[("atoll_epoch", ())] == status_after["epoch"], "atoll_epoch is atollctl status's epoch")
    active = sum(1 for x in status_after["members"] if x["state"] == "active")
    check(m[("atoll_members", (("state", "active"),))] == active, f"{active} active members, as atollctl says")
    for f in status_after["fragments"]:
        got = m[("atoll_fragment_rounds_committed_total", (("fragment", str(f["id"])),))]
        before = next(x["round"] for x in status_before["fragments"] if x["id"] == f["id"])
        check(before <= got <= f["round"], f"fragment {f['id']}'s rounds ({got}) between two atollctl answers")
    least = m[("atoll_worker_step_min", ())]
    check(min(x["step"] for x in status_before["workers"]) <= least <= min(x["step"] for x in status_after["workers"]),
          f"the fewest steps ({least}) between two atollctl answers")
    check(not any("worker" in dict(labels) or "node" in dict(labels) for _, labels in m),
          "no series per node or worker by default")
    # With ?per_node=1, each worker's own series.
    code, text = http(c.url + "metrics?per_node=1")
    check(code == 200, "GET /metrics?per_node=1 answers 200")
    per_node = samples(text)
    status_last = c.ctl("status")
    for w in status_last["workers"]:
        got = per_node[("atoll_worker_step", (("worker", w["id"]),))]
        before = next(x["step"] for x in status_after["workers"] if x["id"] == w["id"])
        check(before <= got <= w["step"], f"{w['id']}'s step ({got}) between two atollctl answers")
    check(m[("atoll_keeper_healthy", ())] == (1 if status_after["storage"]["ok"] else 0), "keeper health as atollctl")
    # The data cursor: its series from the status's data, /api/data as atollctl data.
    check(m[("atoll_data_units", (("state", "consumed"),))] == status_after["data"]["consumed"],
          "atoll_data_units{state=consumed} as atollctl status's data")
    code, body = http(c.url + "api/data")
    data = c.ctl("data")
    check(code == 200 and data is not None and set(json.loads(body)) == set(data),
          "/api/data answers the keys of atollctl data --json")
    count = m[("atoll_round_duration_seconds_count", ())]
    check(count >= 1 and m[("atoll_round_duration_seconds_bucket", (("le", "+Inf"),))] == count,
          "the round duration histogram counts the committed rounds")


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1300,1500"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


# The page redraws its tables every second: read them in one script, not element by element.
def member_rows(driver):
    return driver.execute_script(
        "const out = {}; for (const r of document.querySelectorAll('#members tbody tr')) "
        "out[r.dataset.node] = r.className; return out;")


def shown_round(driver):
    text = driver.execute_script(
        "const c = document.querySelector('#fragments tbody tr td.round'); return c ? c.textContent : '';")
    return int(text) if text.isdigit() else -1


def check_dashboard(c, work):
    driver = browser()
    try:
        driver.get(c.url)
        rows = wait_for("both members on the page", lambda: (r := member_rows(driver)) and len(r) == 2 and r, 30)
        check(all(cls == "state-active" for cls in rows.values()), "the page shows both members active")
        first = wait_for("a committed round on the page", lambda: shown_round(driver) >= 1 and shown_round(driver))
        check(first >= 1, f"the page shows committed round {first}")
        later = wait_for("the page to show the next round", lambda: (r := shown_round(driver)) > first and r, 60)
        check(later > first, f"the page updates when a round commits (round {later})")
        driver.save_screenshot(os.path.join(work, "dashboard.png"))
        data = driver.execute_script("return document.getElementById('data').textContent")
        check(data.startswith("no data leased"), "the mlp leases no data, and the page says so: " + data)
        # The leasing line, drawn by the page's own function from a cursor's view (the next
        # poll redraws the real one): what a token task's run shows.
        leasing = driver.execute_script(
            "drawData({leasing: true, epoch: 1, epochs: 3, units: 1000, chunk: 80, consumed: 250, in_flight: 160,"
            " returned: 80, partial: 0, finished: false}); return document.getElementById('data').textContent")
        check(leasing.startswith("epoch 1 of 3: 250 of 1000 units learned (25.0%), 160 in flight, 80 returned"),
              "the data line of a leasing run: " + leasing)

        driver.execute_script("document.querySelector('button.drain').click()")
        driver.switch_to.alert.accept()  # "Drain node 1?"
        result = wait_for("the drain answer",
                          lambda: driver.execute_script("return document.getElementById('drain-result').textContent"),
                          10)
        check("refused (401)" in result, "the drain button without the token is refused: " + result)
        check(all(m["state"] == "active" for m in c.ctl("members")), "and every node is still active")

        victim = c.nodes[1]
        victim_id = next(str(m["node_id"]) for m in c.ctl("members") if m["pid"] == victim.pid)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        dead = wait_for("the killed node shown dead",
                        lambda: [n for n, cls in member_rows(driver).items() if cls == "state-dead"], 30)
        check(dead == [victim_id], f"the page shows the SIGKILLed node {victim_id} as dead")
        driver.save_screenshot(os.path.join(work, "dashboard-dead-node.png"))
    finally:
        driver.quit()


def slow_client(url):
    host, port = url.split("//")[1].rstrip("/").split(":")
    s = socket.create_connection((host, int(port)))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
    return s


def check_hostile(c):
    code, _ = http(c.url + "no/such/page")
    check(code == 404, "an unknown path is 404")
    code, _ = http(c.url + "metrics", method="DELETE")
    check(code in (400, 401, 404, 405), f"an unknown method is refused ({code})")
    try:
        code, _ = http(c.url + "metrics", headers={"X-Huge": "a" * 100000})
    except (ConnectionError, urllib.error.URLError):
        code = "closed"
    check(code != 200, f"a 100 kB header is refused ({code})")
    steps_before = sum(w["step"] for w in c.ctl("status")["workers"])
    slow = [slow_client(c.url) for _ in range(4)]  # more than the endpoint's two threads
    time.sleep(2)
    steps_after = sum(w["step"] for w in c.ctl("status")["workers"])
    check(steps_after > steps_before, "training goes on while slow clients hold the HTTP threads")
    started = time.time()
    code, _ = http(c.url + "metrics", timeout=30)
    check(code == 200, f"/metrics still answers ({time.time() - started:.1f} s: slow clients are dropped after 2 s)")
    for s in slow:
        s.close()


def check_drain_with_token(c):
    token = read(os.path.join(c.keys, "http.token"))
    alive = next(str(m["node_id"]) for m in c.ctl("members") if m["state"] == "active")
    code, _ = http(c.url + "api/drain?node=" + alive, method="POST", headers={"Authorization": "Bearer " + "0" * 64})
    check(code == 401, "a wrong token is refused")
    code, body = http(c.url + "api/drain?node=" + alive, method="POST", headers={"Authorization": "Bearer " + token})
    check(code == 200, "the drain with the token is accepted: " + body)


def main():
    atoll, atollctl, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    c = Cluster(atoll, atollctl, work)
    try:
        wait_for("a committed round", lambda: (s := c.ctl("status")) and s["fragments"][0]["round"] >= 1, 90)
        check_metrics(c)
        check_hostile(c)  # while both nodes train: the one left after the kill below waits for its peer
        check_dashboard(c, work)
        check_drain_with_token(c)
        print("PASS")
    finally:
        c.stop()


if __name__ == "__main__":
    main()
