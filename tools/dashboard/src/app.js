// The dashboard: one request per second to /api/dashboard (the registry's summaries: status,
// members by state, one page of members, fragments with their workers counted, explain),
// tables redrawn from it, charts from the history this page has seen. Its size does not
// grow past a page of members, so a thousand nodes cost what ten do. The one action,
// draining a node, posts to /api/drain with the bearer token.
"use strict";

const history = { t: [], train: [], heldout: [], sent: [], headIn: [], headOut: [] };
const maxPoints = 3600;
const pageSize = 50;  // member rows a request asks for
const page = { offset: 0, state: "" };  // the members shown: a state (or all) and where
let charts = null;
let last = null;

const $ = (id) => document.getElementById(id);
const fmt = (v, digits = 3) => (typeof v === "number" ? Number(v.toPrecision(digits)).toString() : String(v ?? "-"));
const bytes = (b) => {
  const units = ["B", "kB", "MB", "GB", "TB"];
  let u = 0;
  while (b >= 1000 && u < units.length - 1) { b /= 1000; u++; }
  return `${u ? b.toFixed(1) : Math.round(b)} ${units[u]}`;
};

function cell(tr, text, cls) {
  const td = tr.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function drawMembers(members) {
  const body = $("members").tBodies[0];
  body.replaceChildren();
  for (const m of members) {
    const tr = body.insertRow();
    tr.className = `state-${m.state}`;
    tr.dataset.node = m.node_id;
    cell(tr, m.node_id);
    cell(tr, m.state, "state");
    cell(tr, `${fmt(m.since_s)} s`);
    cell(tr, `${fmt(m.last_heartbeat_s)} s ago`);
    cell(tr, `${m.hostname} (pid ${m.pid})`);
    cell(tr, m.link);
    cell(tr, (m.workers || []).join(", "));
    const action = tr.insertCell();
    if (m.state === "active" || m.state === "syncing" || m.state === "joining") {
      const b = document.createElement("button");
      b.className = "drain";
      b.dataset.node = m.node_id;
      b.textContent = "drain";
      b.onclick = () => drain(m.node_id);
      action.appendChild(b);
    }
  }
}

// "1000 members: 990 active, 10 dead", the state filter's choices, and where the page is.
function drawMemberPager(status, shown) {
  const counts = status.members_by_state || {};
  const total = status.members_total ?? shown;
  const states = Object.keys(counts).sort();
  $("member-counts").textContent = `${total} member(s)` +
    (states.length ? ": " + states.map((k) => `${counts[k]} ${k}`).join(", ") : "");
  const select = $("member-state");
  const wanted = ["", ...states];
  if (page.state && !wanted.includes(page.state)) wanted.push(page.state);
  if ([...select.options].map((o) => o.value).join() !== wanted.join()) {
    select.replaceChildren(...wanted.map((v) => new Option(v ? `${v} (${counts[v] ?? 0})` : "every state", v)));
    select.value = page.state;
  }
  const filtered = page.state ? counts[page.state] ?? 0 : total;
  if (page.offset >= filtered && filtered > 0) page.offset = Math.floor((filtered - 1) / pageSize) * pageSize;
  $("member-page").textContent = shown ? `rows ${page.offset + 1}-${page.offset + shown} of ${filtered}` : `none of ${filtered}`;
  $("member-prev").disabled = page.offset === 0;
  $("member-next").disabled = page.offset + pageSize >= filtered;
}

function turnPage(by) {
  page.offset = Math.max(0, page.offset + by * pageSize);
  poll(false);
}

function drawFragments(fragments) {
  const body = $("fragments").tBodies[0];
  body.replaceChildren();
  for (const f of fragments) {
    const tr = body.insertRow();
    tr.dataset.fragment = f.id;
    cell(tr, f.id);
    cell(tr, f.round, "round");
    cell(tr, f.coordinator);
    cell(tr, f.keeper_digest ?? "-");
    const td = tr.insertCell();
    if (f.workers_total !== undefined) {
      const counts = document.createElement("span");
      counts.className = "worker-counts";
      counts.textContent = `${f.workers_total} worker(s), ${f.workers_agreeing} agree with the keeper` +
        (f.workers_total > f.workers_at_keeper_round ? `, ${f.workers_total - f.workers_at_keeper_round} not at its round` : "") +
        ((f.workers || []).length ? ": " : "");
      td.appendChild(counts);
    }
    for (const w of f.workers || []) {
      const span = document.createElement("span");
      // A worker at the keeper's round whose digest differs: theta_global has diverged.
      const differs = w.round === f.keeper_round && f.keeper_digest && w.digest !== f.keeper_digest;
      span.className = differs ? "mismatch" : "";
      span.textContent = `${w.id} (${w.round}: ${w.digest}) `;
      td.appendChild(span);
    }
  }
}

function drawExplain(explain) {
  const div = $("explain");
  div.replaceChildren();
  for (const e of explain || []) {
    const p = document.createElement("p");
    p.className = "explain";
    p.dataset.fragment = e.fragment;
    const head = document.createElement("span");
    head.className = "waiting";
    head.textContent = `fragment ${e.fragment}, waiting for ${e.waiting_for}: `;
    p.append(head, document.createTextNode(e.text));
    div.appendChild(p);
  }
}

// Progress through the run's data (its cursor: `atollctl data`, docs/design.md "Every
// sample once"): the epoch, the share of its units the committed model learned, and what
// is in flight, returned to the pool or learned by some fragments only.
function drawData(d) {
  const p = $("data");
  p.dataset.leasing = d?.leasing ? "yes" : "no";
  if (d?.error) {
    p.textContent = `the data cursor in the store does not load, nothing is leased: ${d.error}`;
    p.className = "error";
    return;
  }
  p.className = "";
  if (!d?.leasing) {
    p.textContent = "no data leased: the task samples its own (or no worker has asked yet)";
    return;
  }
  const pct = d.units ? (100 * d.consumed) / d.units : 0;
  p.textContent = `epoch ${d.epoch}${d.epochs ? ` of ${d.epochs}` : ""}` + (d.finished ? " (finished)" : "") +
    `: ${d.consumed} of ${d.units} units learned (${pct.toFixed(1)}%), ${d.in_flight} in flight, ` +
    `${d.returned} returned, ${d.partial} learned by some fragments only; chunks of ${d.chunk}`;
}

function drawHealth(status) {
  const s = status.storage || {};
  const refused = status.refused?.total || {};
  const parts = [
    `storage: ${s.ok === false ? "FAILING (" + s.last_error + ")" : "ok"}` +
      (s.failed_commits ? `, ${s.failed_commits} failed commit(s)` : ""),
    `refused messages: ${Object.keys(refused).length ? JSON.stringify(refused) : "none"}`,
    `links: ${status.security?.curve ? "CURVE" : "plain TCP"}, failed handshakes ${status.security?.handshakes_failed ?? 0}`,
    `head link: in ${bytes(status.head_link?.bytes_in ?? 0)}, out ${bytes(status.head_link?.bytes_out ?? 0)}, ` +
      `relayed ${bytes(status.head_link?.bytes_relayed ?? 0)}`,
  ];
  $("health").replaceChildren(...parts.map((t) => Object.assign(document.createElement("div"), { textContent: t })));
}

function record(status, now) {
  const workers = status.workers_summary || {};
  history.t.push(now);
  history.train.push(workers.mean_loss ?? null);  // of the workers that stepped
  history.heldout.push(status.last_eval?.step >= 0 ? status.last_eval.val_loss : null);
  // Rates from the last sample: bytes per second.
  const rate = (key, value) => {
    const prev = last?.[key];
    const dt = last ? now - last.t : 0;
    return prev !== undefined && dt > 0 ? Math.max(0, (value - prev) / dt) : null;
  };
  const sent = workers.bytes_sent || 0;
  const hin = status.head_link?.bytes_in ?? 0;
  const hout = status.head_link?.bytes_out ?? 0;
  history.sent.push(rate("sent", sent));
  history.headIn.push(rate("hin", hin));
  history.headOut.push(rate("hout", hout));
  last = { t: now, sent, hin, hout };
  for (const k of Object.keys(history)) if (history[k].length > maxPoints) history[k].shift();
}

function drawCharts() {
  if (typeof uPlot === "undefined") {
    for (const id of ["loss-chart", "bytes-chart"])
      $(id).textContent = "chart library not built (npm at build time); the tables above are complete";
    return;
  }
  const width = Math.max(300, $("loss-chart").clientWidth || 500);
  if (!charts) {
    const axis = { stroke: "#555" };
    const rateAxis = { stroke: "#555", size: 80, values: (u, ticks) => ticks.map((v) => `${bytes(v)}/s`) };
    charts = {
      loss: new uPlot({ width, height: 220, series: [{}, { label: "train (mean)", stroke: "#1a73e8" },
        { label: "held-out", stroke: "#d93025", spanGaps: true }], axes: [axis, axis] }, [[], [], []], $("loss-chart")),
      bytes: new uPlot({ width, height: 220, series: [{}, { label: "workers sent B/s", stroke: "#188038" },
        { label: "head in B/s", stroke: "#9334e6" }, { label: "head out B/s", stroke: "#e37400" }],
        axes: [axis, rateAxis] }, [[], [], [], []], $("bytes-chart")),
    };
  }
  charts.loss.setData([history.t, history.train, history.heldout]);
  charts.bytes.setData([history.t, history.sent, history.headIn, history.headOut]);
}

async function drain(node) {
  const result = $("drain-result");
  if (!window.confirm(`Drain node ${node}? Its workers stop taking part and it leaves the cluster.`)) return;
  const token = $("token").value.trim();
  sessionStorage.setItem("atoll-token", token);
  const res = await fetch(`/api/drain?node=${encodeURIComponent(node)}`, {
    method: "POST",
    headers: token ? { Authorization: `Bearer ${token}` } : {},
  });
  const body = await res.json().catch(() => ({}));
  result.className = res.ok ? "ok" : "error";
  result.textContent = res.ok ? `node ${node} is draining` : `refused (${res.status}): ${body.error ?? res.statusText}`;
}

let polling = null;

// `again`: the once-a-second poll (a page turned asks at once, and the timer goes on).
async function poll(again = true) {
  try {
    const query = new URLSearchParams({ limit: pageSize, offset: page.offset });
    if (page.state) query.set("state", page.state);
    const res = await fetch(`/api/dashboard?${query}`, { cache: "no-store" });
    const d = await res.json();
    if (!res.ok) throw new Error(d.error ?? res.statusText);
    const s = d.status;
    $("summary").textContent = `cluster ${s.cluster_id} · ${s.state} · epoch ${s.epoch} · ${s.example} · ` +
      (s.last_eval?.step >= 0 ? `held-out loss ${fmt(s.last_eval.val_loss, 4)} at step ${s.last_eval.step}` : "no eval yet");
    $("summary").dataset.state = s.state;
    drawMembers(d.members || []);
    drawMemberPager(s, (d.members || []).length);
    drawFragments(d.fragments || []);
    drawExplain(d.explain);
    drawData(s.data);
    drawHealth(s);
    if (again) {
      record(s, Date.now() / 1000);
      drawCharts();
    }
    $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    $("updated").textContent = `the head does not answer (${err})`;
  }
  if (!again) return;
  clearTimeout(polling);
  polling = setTimeout(poll, 1000);  // at most one request per second per open page
}

$("token").value = sessionStorage.getItem("atoll-token") || "";
$("member-prev").onclick = () => turnPage(-1);
$("member-next").onclick = () => turnPage(1);
$("member-state").onchange = (e) => {
  page.state = e.target.value;
  page.offset = 0;
  poll(false);
};
poll();
