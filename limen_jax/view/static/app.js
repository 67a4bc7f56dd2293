// limen_jax run viewer. Data comes from the server's JSON API (api/run, api/program, api/stamp)
// (a rollout is a POST to api/rollout with the token api/session gives this page)
// or, in a --static file, from the <script id="limen-data" type="application/json"> block.
// Everything from the run (code, prompts, replies, thoughts, ids) is untrusted: it reaches the
// DOM only through textContent, and reaches Plotly only through esc().
"use strict";

(function () {
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf"];
  const POLL_MS = 2000;
  const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  const embedded = document.getElementById("limen-data");
  const bundle = embedded ? JSON.parse(embedded.textContent) : null;
  const state = { run: null, byId: new Map(), selected: null, stamp: null, gridFollow: true, details: new Map() };
  // asked at once: the server answers while the browser is still parsing plotly.js (loaded after this file)
  let prefetch = bundle ? null : getJSON("api/run");

  // ---- small DOM helpers (text only) ----------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  // For strings handed to Plotly, whose labels understand a few HTML tags.
  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  }
  function fmt(x, digits) {
    if (x === null || x === undefined) return "–";
    return typeof x === "number" ? x.toFixed(digits === undefined ? 3 : digits) : String(x);
  }
  function pre(text, cls) { return el("pre", { class: cls || "", text: text === null || text === undefined ? "" : String(text) }); }
  function section(title, open, ...children) {
    const d = el("details", open ? { open: "" } : {}, el("summary", { text: title }), ...children);
    return d;
  }

  // A collapsible view of any JSON value (the strategy's memory, events, metadata).
  function jsonTree(value, label, depth) {
    depth = depth || 0;
    const key = label === undefined ? null : el("span", { class: "key", text: label + ": " });
    if (value !== null && typeof value === "object") {
      const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
      const brief = Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`;
      const d = el("details", depth < 1 ? { open: "" } : {}, el("summary", {}, key, brief));
      for (const [k, v] of entries) d.appendChild(jsonTree(v, k, depth + 1));
      return d;
    }
    let cls = "nul", text = "null";
    if (typeof value === "string") {
      cls = "str";
      if (value.includes("\n")) return el("div", { class: "leaf" }, key, pre(value, "wrap"));
      text = JSON.stringify(value);
    } else if (typeof value === "number" || typeof value === "boolean") { cls = "num"; text = String(value); }
    return el("div", { class: "leaf" }, key, el("span", { class: cls, text: text }));
  }
  function jsonBlock(value) {
    const box = el("div", { class: "json" });
    if (value === null || value === undefined || (typeof value === "object" && Object.keys(value).length === 0)) {
      box.appendChild(el("span", { class: "empty", text: "(empty)" }));
    } else {
      box.appendChild(jsonTree(value));
    }
    return box;
  }

  // ---- data access -----------------------------------------------------------------------
  async function getJSON(url) {
    const r = await fetch(url, { cache: "no-store" });
    if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
    return r.json();
  }
  let token = null;  // the session's token: only a page the server served can read it
  async function postJSON(url, body) {
    if (token === null) token = (await getJSON("api/session")).token;
    return fetch(url, { method: "POST", cache: "no-store", headers: { "Content-Type": "application/json",
      "X-Limen-Token": token }, body: JSON.stringify(body) });
  }
  function loadRun() {
    if (bundle) return Promise.resolve(bundle);
    const first = prefetch;
    prefetch = null;
    return first || getJSON("api/run");
  }
  async function loadDetail(id) {
    if (bundle) return bundle.details[id];
    const key = `${state.stamp}|${id}`;
    if (!state.details.has(key)) state.details.set(key, await getJSON("api/program?id=" + encodeURIComponent(id)));
    return state.details.get(key);
  }

  // ---- header ------------------------------------------------------------------------------
  function renderHeader(run) {
    const info = run.run;
    document.getElementById("run-title").textContent = `limen_jax run ${info.name}`;
    document.title = `limen_jax: ${info.name}`;
    const facts = clear(document.getElementById("run-facts"));
    const usage = info.usage || {};
    const items = [["task", info.task], ["mode", info.mode], ["strategy", info.strategy], ["mutator", info.mutator],
      ["iteration", `${fmt(info.iteration, 0)} / ${fmt(info.iterations, 0)}`], ["programs", run.programs.length],
      ["LLM calls", usage.calls], ["spend", usage.cost_usd === undefined ? "–" : `$${fmt(usage.cost_usd, 2)}`]];
    // per model: calls, spend and mean improvement over the parents (an ensemble names several)
    for (const [model, u] of Object.entries(usage.by_model || {}))
      items.push([model, `${fmt(u.calls || 0, 0)} calls, $${fmt(u.cost_usd || 0, 2)}, +${fmt(u.mean_improvement || 0, 3)}`]);
    const rep = usage.programs || {};
    if (rep.repeats) items.push(["repeats", `${rep.repeats} of ${rep.checked} checked, ${fmt(rep.train_s_saved, 0)} s of training not spent`]);
    const best = bestProgram(run);
    if (best) items.push(["best", `${best.id} (${fmt(best.success)})`]);
    if (info.baseline !== null && info.baseline !== undefined) items.push(["baseline", `${fmt(info.baseline)} (sparse reward)`]);
    for (const [k, v] of items) facts.appendChild(el("span", {}, `${k} `, el("b", { text: v === undefined || v === null ? "–" : String(v) })));
    const status = document.getElementById("run-status");
    status.textContent = info.live ? (bundle ? "running when saved" : "live: following the run") : `run ${info.status}`;
    status.className = "status" + (info.live && !bundle ? " live" : "");
  }
  function bestProgram(run) {
    let best = null;
    for (const p of run.programs) if (p.evaluated && (!best || p.success > best.success)) best = p;
    return best;
  }

  // ---- lineage graph -----------------------------------------------------------------------
  // Integer ticks, about ten at most: Plotly's own choice puts halves on a short axis, and one
  // label per iteration of a long run costs more than the rest of the chart (each is measured).
  function intTicks(max) { return { tick0: 0, dtick: Math.max(1, Math.ceil((max || 1) / 10)) }; }
  function iterationAxis(run) {
    return { title: { text: "iteration" }, zeroline: false, ...intTicks(run.progress.length - 1) };
  }
  function positions(run, yBy) {
    const pos = new Map();
    const byIter = new Map();
    for (const p of run.programs) {
      if (!byIter.has(p.iteration)) byIter.set(p.iteration, []);
      byIter.get(p.iteration).push(p);
    }
    for (const group of byIter.values()) {
      group.sort((a, b) => a.island - b.island || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      group.forEach((p, i) => {
        const y = yBy === "success" ? (p.success === null ? -0.08 : p.success) : i;
        const jitter = yBy === "success" ? ((i % 5) - 2) * 0.04 : 0;
        pos.set(p.id, [p.iteration + jitter, y]);
      });
    }
    return pos;
  }
  function symbolOf(p) {
    if (p.stage === "rejected" || p.error) return "x";
    if (p.stage === "pending") return "diamond-open";
    if (p.stage === "short") return "circle-open";
    if (p.stage === "demos") return "square-open";
    return "circle";
  }
  function ancestry(run, id) {
    const seen = new Set(), stack = [id];
    while (stack.length) {
      const cur = stack.pop();
      if (seen.has(cur) || !state.byId.has(cur)) continue;
      seen.add(cur);
      for (const q of state.byId.get(cur).parents) stack.push(q);
    }
    return seen;
  }
  function renderLineage(run) {
    const colourBy = document.getElementById("colour-by").value;
    const yBy = document.getElementById("y-by").value;
    const pos = positions(run, yBy);
    const traces = [];
    const lines = [[], [], []]; // first parents, other parents, the selection's ancestry
    const anc = state.selected ? ancestry(run, state.selected) : new Set();
    for (const p of run.programs) {
      p.parents.forEach((q, i) => {
        if (!pos.has(q)) return;
        const target = anc.has(p.id) && anc.has(q) ? lines[2] : lines[i === 0 ? 0 : 1];
        target.push([pos.get(q), pos.get(p.id)]);
      });
    }
    const edgeTrace = (segs, name, line) => {
      const x = [], y = [];
      for (const [a, b] of segs) { x.push(a[0], b[0], null); y.push(a[1], b[1], null); }
      return { type: "scatter", mode: "lines", x, y, name, hoverinfo: "skip", line, showlegend: segs.length > 0 };
    };
    traces.push(edgeTrace(lines[0], "parent → child", { color: "#9aa5b1", width: 1 }));
    traces.push(edgeTrace(lines[1], "second parent", { color: "#9aa5b1", width: 1, dash: "dot" }));
    traces.push(edgeTrace(lines[2], "ancestry of selected", { color: "#111", width: 3 }));
    const groups = new Map();
    for (const p of run.programs) {
      const g = colourBy === "island" ? `island ${p.island}` : p.operator || "(none)";
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(p);
    }
    const names = [...groups.keys()].sort();
    names.forEach((g, k) => {
      const ps = groups.get(g);
      traces.push({
        type: "scatter", mode: "markers", name: esc(g),
        x: ps.map((p) => pos.get(p.id)[0]), y: ps.map((p) => pos.get(p.id)[1]),
        customdata: ps.map((p) => p.id),
        hovertext: ps.map((p) => [`<b>${esc(p.id)}</b>`, `success ${fmt(p.success)} (${esc(p.stage)})`,
          `island ${p.island}, ${esc(p.operator)}`, p.parents.length ? `parents ${p.parents.map(esc).join(", ")}` : "from scratch",
          p.error ? `rejected at ${esc(p.error.stage)}` : ""].filter(Boolean).join("<br>")),
        hoverinfo: "text",
        marker: {
          color: PALETTE[k % PALETTE.length], symbol: ps.map(symbolOf),
          size: ps.map((p) => 7 + 20 * Math.max(0, Math.min(1, p.success || 0))),
          line: { width: ps.map((p) => (p.id === state.selected ? 3 : 1)), color: ps.map((p) => (p.id === state.selected ? "#000" : "#fff")) },
        },
      });
    });
    const layout = {
      margin: { l: 50, r: 10, t: 10, b: 40 }, hovermode: "closest", uirevision: `${colourBy}|${yBy}`,
      xaxis: iterationAxis(run),
      yaxis: yBy === "success" ? { title: { text: "success" }, zeroline: false }
        : { title: { text: "candidate" }, zeroline: false, ...intTicks(Math.max(0, ...[...pos.values()].map((v) => v[1]))) },
      legend: { orientation: "h", y: -0.15 }, showlegend: true,
    };
    const node = document.getElementById("lineage");
    Plotly.react(node, traces, layout, PLOT_CONFIG);
    if (!node.dataset.bound) {
      node.dataset.bound = "1";
      node.on("plotly_click", (ev) => {
        const pt = ev.points && ev.points.find((q) => q.customdata);
        if (pt) select(pt.customdata);
      });
    }
  }

  // ---- one program ----------------------------------------------------------------------
  function diffBlock(text) {
    const box = el("pre", { class: "diff" });
    for (const line of (text || "").split("\n")) {
      let cls = "ctx";
      if (line.startsWith("+++") || line.startsWith("---")) cls = "hunk";
      else if (line.startsWith("@@")) cls = "hunk";
      else if (line.startsWith("+")) cls = "add";
      else if (line.startsWith("-")) cls = "del";
      box.appendChild(el("span", { class: cls, text: line || " " }));
    }
    return box;
  }
  function programButton(id) {
    return el("button", { class: "link", type: "button", text: id, onclick: () => select(id) });
  }
  function kv(pairs) {
    const dl = el("dl", { class: "kv" });
    for (const [k, v] of pairs) {
      dl.appendChild(el("dt", { text: k }));
      dl.appendChild(v instanceof Node ? el("dd", {}, v) : el("dd", { text: v === null || v === undefined ? "–" : String(v) }));
    }
    return dl;
  }
  function curvePlots(d) {
    const box = el("div", { class: "curves", id: "curves" });
    const parent = d.parent_curves;
    const plots = [];
    for (const key of d.curve_keys) {
      const div = el("div", { class: "chart small curve", "data-key": key });
      box.appendChild(div);
      const ys = d.curves[key] || [];
      const traces = [{ type: "scatter", mode: "lines", name: esc(d.id), y: ys, x: ys.map((_, i) => i), line: { color: PALETTE[0] } }];
      if (parent && parent.curves && parent.curves[key]) {
        const py = parent.curves[key];
        traces.push({ type: "scatter", mode: "lines", name: `parent ${esc(parent.id)}`, y: py, x: py.map((_, i) => i),
          line: { color: "#999", dash: "dash" } });
      }
      const title = key.startsWith("reward/") ? `reward term: ${key.slice(7)}` : key;
      plots.push([div, traces, { title: { text: esc(title), font: { size: 12 } }, margin: { l: 40, r: 8, t: 26, b: 26 },
        showlegend: false, xaxis: intTicks(ys.length - 1) }]);
    }
    return [box, plots];
  }
  function renderDetail(d, node) {
    const box = clear(document.getElementById("detail"));
    document.getElementById("detail-empty").hidden = true;
    box.hidden = false;
    box.dataset.id = d.id;
    const head = el("div", {}, el("h2", { id: "detail-title", text: d.id }),
      el("span", { class: `badge ${d.stage}`, text: d.stage }),
      node && node.elite ? el("span", { class: "badge", text: "elite" }) : null,
      d.policy ? el("span", { class: "badge", text: "policy kept" }) : null);
    box.appendChild(head);
    const parents = el("span", {});
    if (!d.parents.length) parents.appendChild(document.createTextNode("none (from scratch)"));
    d.parents.forEach((p, i) => { if (i) parents.appendChild(document.createTextNode(", ")); parents.appendChild(programButton(p.id)); });
    const children = el("span", {});
    const kids = state.run.programs.filter((p) => p.parents.includes(d.id));
    if (!kids.length) children.appendChild(document.createTextNode("none"));
    kids.forEach((p, i) => { if (i) children.appendChild(document.createTextNode(", ")); children.appendChild(programButton(p.id)); });
    const meta = d.metadata || {};
    box.appendChild(kv([
      ["success", `${fmt(d.success)}  (per seed: ${(d.success_per_seed || []).map((s) => fmt(s, 3)).join(", ") || "–"})`],
      ["final return", fmt(d.final_return)], ["island", node ? node.island : "–"], ["operator", node ? node.operator : "–"],
      ["parents", parents], ["children", children],
      ["observation size", d.obs_dim], ["reward AST size", d.reward_ast_size],
      ["LLM", `${meta.model || "–"}: ${fmt(meta.input_tokens, 0)} in / ${fmt(meta.output_tokens, 0)} out tokens, $${fmt(meta.cost_usd, 4)}${meta.cached ? " (cached)" : ""}`],
      ["training wall time", meta.train_wall_s === undefined ? "–" : `${fmt(meta.train_wall_s, 1)} s`],
    ]));
    // the checker's verdict
    const verdict = el("div", { id: "verdict" });
    if (d.error) {
      verdict.appendChild(el("div", { class: "verdict bad", text: `rejected at ${d.error.stage || "?"}${d.error.blame ? ` (${d.error.blame})` : ""}` }));
      verdict.appendChild(pre(d.error.message, "wrap"));
      if (d.error.trace) verdict.appendChild(section("trace", false, pre(d.error.trace)));
    } else if (d.stage === "pending") {
      verdict.appendChild(el("div", { class: "verdict", text: "not scored yet" }));
    } else if (d.stage === "demos") {
      verdict.appendChild(el("div", { class: "verdict ok", text: "passed the checker; scored on demonstrations (not trained)" }));
    } else {
      verdict.appendChild(el("div", { class: "verdict ok", text: `passed the checker; trained (${d.stage} budget)` }));
    }
    box.appendChild(section("Checker verdict", true, verdict));
    // learning curves
    let plots = [];
    if (d.curve_keys && d.curve_keys.length) {
      const [curves, ps] = curvePlots(d);
      plots = ps;
      box.appendChild(section(`Learning curves (${d.curve_keys.length})`, true, curves,
        d.parent_curves ? el("p", { class: "hint", text: `dashed: parent ${d.parent_curves.id}` }) : null));
    } else {
      box.appendChild(section("Learning curves", true, el("span", { class: "empty", text: "(no curves: never trained)" })));
    }
    box.appendChild(section("Code (φ and R)", true, pre(d.code || "(no code)", "code")));
    for (const p of d.parents) {
      const body = p.diff === null ? el("span", { class: "empty", text: "(parent not in the store)" })
        : p.diff === "" ? el("span", { class: "empty", text: "(identical to the parent)" }) : diffBlock(p.diff);
      box.appendChild(section(`Diff against ${p.id}`, true, body));
    }
    box.appendChild(section("Thought", !!d.thought, pre(d.thought || "", "wrap thought")));
    if (d.prompt) {
      box.appendChild(section(`Prompt (${d.prompt.operator || ""})`, false,
        el("h3", { text: "system" }), pre(d.prompt.system, "wrap"), el("h3", { text: "user" }), pre(d.prompt.user, "wrap prompt")));
    }
    if (d.response) {
      const r = d.response;
      box.appendChild(section("Raw reply", false,
        kv([["model", r.model], ["tokens", `${fmt(r.input_tokens, 0)} in / ${fmt(r.output_tokens, 0)} out`],
          ["cost", `$${fmt(r.cost_usd, 4)}`], ["cached", r.cached], ["retries", r.retries], ["error", r.error]]),
        pre(r.text, "wrap reply")));
    }
    box.appendChild(section("Training feedback", false, jsonBlock(d.feedback)));
    box.appendChild(section("Other evaluations", Object.keys(d.evaluations || {}).length > 0, jsonBlock(d.evaluations)));
    if (d.policy) {
      // what a user needs first: the roll-out and which seeds were kept; the checkpoint's
      // own files (a dozen per seed) stay folded
      const seeds = [...new Set(d.policy.map((f) => f.name.split("/")[0]))];
      const kb = d.policy.reduce((sum, f) => sum + f.bytes, 0) / 1024;
      const list = el("ul", {});
      for (const f of d.policy) list.appendChild(el("li", { text: `${f.name} (${f.bytes} bytes)` }));
      const parts = bundle ? [] : [rolloutButton(d.id)];  // a static file has no server to roll out with
      parts.push(el("p", { class: "hint", text: `policies/${d.id}/: ${seeds.length} seed(s) kept (${seeds.join(", ")}), ${fmt(kb, 0)} kB` }),
        section(`checkpoint files (${d.policy.length})`, false, list));
      box.appendChild(section("Kept policy", true, ...parts));
    }
    box.appendChild(section("Metadata", false, jsonBlock(d.metadata)));
    for (const [div, traces, layout] of plots) Plotly.newPlot(div, traces, layout, { displayModeBar: false, responsive: true });
  }
  function rolloutButton(id) {
    const out = el("div", { class: "rollout" });
    const button = el("button", { type: "button", class: "rollout-button", text: "Roll out (16 episodes)" });
    button.addEventListener("click", async () => {
      button.disabled = true;
      out.replaceChildren(el("p", { class: "hint", text: "rolling out: checking the program, compiling, running ..." }));
      let r, body;
      try {
        r = await postJSON("api/rollout", { id });
        body = await r.json();
      } catch (err) {
        out.replaceChildren(el("p", { class: "error", text: `the rollout failed: ${err.message || err}` }));
        button.disabled = false;
        return;
      }
      if (!r.ok) { out.replaceChildren(el("p", { class: "error", text: body.error })); button.disabled = false; return; }
      const rows = [["success", fmt(body.success, 3)], ["return", fmt(body.return, 4)], ["length", fmt(body.length, 1)],
        ...Object.entries(body.terms).map(([k, v]) => [`term ${k}`, fmt(v, 4)]), ["seed", body.seed], ["seconds", body.seconds]];
      const parts = [kv(rows)];
      if (body.gif) parts.push(el("img", { class: "rollout-frames", alt: `episode 0 of ${id}`, src: "data:image/gif;base64," + body.gif }));
      else parts.push(el("p", { class: "hint", text: `no frames: ${body.note}` }));
      out.replaceChildren(...parts);
    });
    return el("div", {}, button, out);
  }
  async function select(id, keepHash) {
    state.selected = id;
    if (!keepHash && location.hash.slice(1) !== encodeURIComponent(id)) history.replaceState(null, "", "#" + encodeURIComponent(id));
    renderLineage(state.run);
    try {
      const d = await loadDetail(id);
      if (state.selected !== id) return;
      if (!d) throw new Error(`no program ${id}`);
      renderDetail(d, state.byId.get(id));
    } catch (err) {
      const box = clear(document.getElementById("detail"));
      box.hidden = false;
      box.appendChild(el("p", { class: "verdict bad", text: String(err.message || err) }));
    }
  }

  // ---- search progress ------------------------------------------------------------------
  function renderProgress(run) {
    const prog = run.progress;
    const its = prog.map((p) => p.iteration);
    const scored = run.programs.filter((p) => p.success !== null);
    const rejected = run.programs.filter((p) => p.error);
    Plotly.react("best-chart", [
      { type: "scatter", mode: "markers", name: "candidate", x: scored.map((p) => p.iteration), y: scored.map((p) => p.success),
        customdata: scored.map((p) => p.id), hovertext: scored.map((p) => esc(p.id)), hoverinfo: "text+y",
        marker: { color: "#1f77b4", size: 7, opacity: 0.6 } },
      { type: "scatter", mode: "markers", name: "rejected", x: rejected.map((p) => p.iteration), y: rejected.map(() => 0),
        customdata: rejected.map((p) => p.id), hovertext: rejected.map((p) => esc(p.id)), hoverinfo: "text",
        marker: { color: "#d62728", symbol: "x", size: 8 } },
      { type: "scatter", mode: "lines", name: "best so far", x: its, y: prog.map((p) => p.best), line: { shape: "hv", color: "#111", width: 2 },
        hovertext: prog.map((p) => esc(p.best_id || "")), hoverinfo: "text+y" },
      ...(run.run.baseline === null || run.run.baseline === undefined || !its.length ? [] : [
        { type: "scatter", mode: "lines", name: "baseline (sparse reward)", x: [its[0], its[its.length - 1]],
          y: [run.run.baseline, run.run.baseline], line: { dash: "dash", color: "#888", width: 1.5 }, hoverinfo: "y" }]),
    ], { title: { text: "success by iteration", font: { size: 13 } }, margin: { l: 45, r: 10, t: 30, b: 40 },
      xaxis: iterationAxis(run), yaxis: { title: { text: "success" }, range: [-0.05, 1.05] },
      legend: { orientation: "h", y: -0.25 }, uirevision: "best" }, PLOT_CONFIG);
    Plotly.react("cost-chart", [
      { type: "bar", name: "LLM calls", x: its, y: prog.map((p) => p.calls), marker: { color: "#c7d3e3" }, yaxis: "y2" },
      { type: "scatter", mode: "lines+markers", name: "spend so far ($)", x: its, y: prog.map((p) => p.cost_total_usd), line: { color: "#ff7f0e" } },
    ], { title: { text: "cost by iteration", font: { size: 13 } }, margin: { l: 50, r: 50, t: 30, b: 40 },
      xaxis: iterationAxis(run), yaxis: { title: { text: "$ (cumulative)" }, rangemode: "tozero" },
      yaxis2: { title: { text: "calls" }, overlaying: "y", side: "right", rangemode: "tozero",
        ...intTicks(Math.max(0, ...prog.map((p) => p.calls))) },
      legend: { orientation: "h", y: -0.25 }, uirevision: "cost" }, PLOT_CONFIG);
    const best = document.getElementById("best-chart");
    if (!best.dataset.bound) {
      best.dataset.bound = "1";
      best.on("plotly_click", (ev) => { const pt = ev.points && ev.points.find((q) => q.customdata); if (pt) select(pt.customdata); });
    }
  }

  // ---- MAP-Elites grid -------------------------------------------------------------------
  function renderGrid(run) {
    const g = run.grid;
    const slider = document.getElementById("grid-slider");
    const n = g.snapshots.length;
    const wasAtEnd = state.gridFollow || Number(slider.value) >= Number(slider.max);
    slider.max = String(Math.max(0, n - 1));
    if (wasAtEnd) slider.value = slider.max;
    const snap = g.snapshots[Number(slider.value)];
    document.getElementById("grid-iter").textContent = snap ? String(snap.iteration) : "–";
    const k = g.num_islands, rows = g.obs_labels.length, cols = g.ast_labels.length;
    const traces = [];
    const layout = { margin: { l: 70, r: 10, t: 30, b: 70 }, annotations: [], uirevision: "grid" };
    for (let i = 0; i < k; i++) {
      const z = Array.from({ length: rows }, () => Array(cols).fill(null));
      const ids = Array.from({ length: rows }, () => Array(cols).fill(""));
      const text = Array.from({ length: rows }, () => Array(cols).fill(""));
      for (const [isl, o, a, id, f] of snap ? snap.cells : []) {
        if (isl !== i) continue;
        z[o][a] = f; ids[o][a] = id; text[o][a] = `${esc(id)}<br>success ${fmt(f)}`;
      }
      const ax = i === 0 ? "" : String(i + 1);
      traces.push({ type: "heatmap", z, customdata: ids, text, hoverinfo: "text", x: g.ast_labels, y: g.obs_labels,
        xaxis: "x" + ax, yaxis: "y" + ax, zmin: 0, zmax: 1, colorscale: "Viridis", showscale: i === k - 1, xgap: 1, ygap: 1,
        hoverongaps: false });
      const w = 1 / k;
      layout["xaxis" + ax] = { domain: [i * w + 0.02, (i + 1) * w - 0.02], tickangle: -60, tickfont: { size: 9 }, type: "category" };
      layout["yaxis" + ax] = { anchor: "x" + ax, tickfont: { size: 9 }, type: "category", showticklabels: i === 0 };
      layout.annotations.push({ text: `island ${i}`, x: (i + 0.5) * w, y: 1.06, xref: "paper", yref: "paper", showarrow: false });
    }
    const node = document.getElementById("grid-chart");
    Plotly.react(node, traces, layout, PLOT_CONFIG);
    if (!node.dataset.bound) {
      node.dataset.bound = "1";
      node.on("plotly_click", (ev) => { const pt = ev.points && ev.points.find((q) => q.customdata); if (pt) select(pt.customdata); });
      slider.addEventListener("input", () => { state.gridFollow = Number(slider.value) >= Number(slider.max); renderGrid(state.run); });
    }
  }

  // ---- text requests, evaluations, strategy, log -------------------------------------------
  function renderTexts(run) {
    const box = clear(document.getElementById("texts"));
    if (!run.texts.length) { box.appendChild(el("span", { class: "empty", text: "(no text requests in this run)" })); return; }
    for (const t of run.texts) {
      box.appendChild(el("div", { class: "item text-request" },
        el("b", { text: `${t.id}` }), ` iteration ${fmt(t.iteration, 0)}, role `, el("b", { text: t.role }),
        ` — ${t.answered ? `${fmt(t.input_tokens, 0)} in / ${fmt(t.output_tokens, 0)} out tokens, $${fmt(t.cost_usd, 4)}` : "not answered yet"}`,
        section("prompt", false, el("h3", { text: "system" }), pre(t.system, "wrap"), el("h3", { text: "user" }), pre(t.user, "wrap")),
        section("answer", true, t.error ? pre(`error: ${t.error}`, "wrap") : pre(t.answer, "wrap answer"))));
    }
  }
  function renderEvals(run) {
    const box = clear(document.getElementById("evals"));
    if (!run.evaluations.length) { box.appendChild(el("span", { class: "empty", text: "(no evaluation requests in this run)" })); return; }
    for (const e of run.evaluations) {
      const progs = el("span", {});
      e.programs.forEach((p, i) => { if (i) progs.appendChild(document.createTextNode(", ")); progs.appendChild(programButton(p)); });
      box.appendChild(el("div", { class: "item" }, el("b", { text: e.id }), ` ${e.kind} at iteration ${fmt(e.iteration, 0)} of `, progs,
        jsonBlock({ options: e.options, results: e.results })));
    }
  }
  function renderStrategy(run) {
    const box = clear(document.getElementById("strategy"));
    box.appendChild(el("p", { class: "hint", text: `${run.run.strategy || "strategy"}: its memory as saved in state.json ("strategy")` }));
    box.appendChild(jsonBlock(run.strategy));
    if (run.pending_requests) box.appendChild(section("requests proposed for the next batch", false, jsonBlock(run.pending_requests)));
  }
  function renderLog(run) {
    const box = clear(document.getElementById("log"));
    if (!run.log.length) { box.appendChild(el("span", { class: "empty", text: "(nothing beyond prompts, replies and scores)" })); return; }
    for (const e of run.log) {
      const when = e.time ? new Date(e.time * 1000).toISOString().replace("T", " ").slice(0, 19) : "";
      const rest = Object.fromEntries(Object.entries(e).filter(([k]) => k !== "event" && k !== "time"));
      box.appendChild(el("div", { class: "item" }, el("b", { text: e.event }), ` ${when}`, jsonBlock(rest)));
    }
  }

  // ---- whole page, live follow ------------------------------------------------------------
  const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  async function renderAll(run) {
    state.run = run;
    state.byId = new Map(run.programs.map((p) => [p.id, p]));
    const parts = [renderHeader, renderLineage, renderTexts, renderEvals, renderStrategy, renderLog, renderProgress,
      renderGrid];
    for (const part of parts) {  // timed (performance.measure) for benchmarks/view_open.py
      const t = performance.now();
      part(run);
      performance.measure(`limen:${part.name}`, { start: t, end: performance.now() });
      // the lineage graph shows (and takes clicks) before the charts below it are drawn
      if (part === renderLineage) { performance.mark("limen:interactive"); await nextFrame(); }
    }
  }
  async function refresh() {
    const t = performance.now();
    const run = await loadRun();
    performance.measure("limen:loadRun", { start: t, end: performance.now() });
    state.stamp = run.stamp;
    state.details.clear();
    await renderAll(run);
    document.body.dataset.programs = String(run.programs.length);
    if (state.selected && state.byId.has(state.selected)) await select(state.selected, true);
  }
  async function poll() {
    try {
      const s = await getJSON("api/stamp");
      if (s.stamp !== state.stamp) await refresh();
    } catch (err) {
      document.getElementById("run-status").textContent = `lost the server (${err.message || err}); retrying`;
    }
    setTimeout(poll, POLL_MS);
  }
  async function start() {
    document.getElementById("colour-by").addEventListener("change", () => renderLineage(state.run));
    document.getElementById("y-by").addEventListener("change", () => renderLineage(state.run));
    document.getElementById("select-best").addEventListener("click", () => { const b = bestProgram(state.run); if (b) select(b.id); });
    try {
      await refresh();
    } catch (err) {
      document.getElementById("run-status").textContent = `cannot load the run: ${err.message || err}`;
      return;
    }
    const want = decodeURIComponent(location.hash.slice(1));
    if (want && state.byId.has(want)) await select(want, true);
    document.body.dataset.ready = "1";
    performance.mark("limen:ready");
    if (!bundle) setTimeout(poll, POLL_MS);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
