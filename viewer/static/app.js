/* VideoSeek viewer front end: plain JS, no build step, works offline.
 *
 * Two data sources with one interface: the local server's JSON endpoints, or (in an exported
 * file) the data embedded in <script id="viewer-data">, filtered here the same way the server
 * filters (videoseek/viewer/runindex.py). Routes live in the URL hash:
 *   #/?outcome=wrong&q=...         episode list (filters, sort, page)
 *   #/episode/A/12?turn=3          one episode (or #/episode/play/id/<episode id>)
 *   #/play                         play mode
 */
"use strict";
(function () {
  const SVGNS = "http://www.w3.org/2000/svg";
  const $ = (sel, root) => (root || document).querySelector(sel);

  // ---- DOM helpers ------------------------------------------------------------------------------
  function fill(el, attrs, children) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
      else if (k === "text") el.textContent = v;
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  const h = (tag, attrs, ...children) => fill(document.createElement(tag), attrs, children);
  const s = (tag, attrs, ...children) => fill(document.createElementNS(SVGNS, tag), attrs, children);
  const isNum = (x) => typeof x === "number" && isFinite(x);
  const fmt = (x, d = 2) => (isNum(x) ? x.toFixed(d) : "–");
  // A frame time the way the env writes it (`envs.video.format_seconds`): Python's f"{t:.2f}" with
  // trailing zeros dropped, at least one decimal. An exact tie (t * 8 odd, such as 12.125) rounds to
  // even there, up in toFixed.
  const seconds = (t) => {
    const text = Number.isInteger(t * 8) && (t * 8) % 2 !== 0
      ? (() => { const lo = Math.floor(t * 100); return ((lo % 2 === 0 ? lo : lo + 1) / 100).toFixed(2); })()
      : t.toFixed(2);
    const trimmed = text.replace(/0+$/, "");
    return trimmed.endsWith(".") ? trimmed + "0" : trimmed;
  };
  const fmtT = (t) => (isNum(t) ? seconds(t) + "s" : "?");
  const verdict = (c) => (c === true ? h("span", { class: "ok" }, "✓") : c === false ? h("span", { class: "no" }, "✗") : h("span", { class: "na" }, "–"));

  // ---- data sources ---------------------------------------------------------------------------
  const EMBEDDED = (() => {
    const el = document.getElementById("viewer-data");
    return el ? JSON.parse(el.textContent) : null;
  })();

  const serverApi = {
    static: false,
    async get(path, params) {
      const url = path + (params ? "?" + new URLSearchParams(params) : "");
      const r = await fetch(url);
      const body = await r.json().catch(() => ({ error: "HTTP " + r.status }));
      if (!r.ok) throw new Error(body.error || "HTTP " + r.status);
      return body;
    },
    async post(path, payload) {
      const r = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json", "X-VideoSeek": "1" }, body: JSON.stringify(payload) });
      const body = await r.json().catch(() => ({ error: "HTTP " + r.status }));
      if (!r.ok) throw new Error(body.error || "HTTP " + r.status);
      return body;
    },
    runs() { return this.get("/api/runs"); },
    episodes(params) { return this.get("/api/episodes", params); },
    episode(run, ref) { return this.get("/api/episode", Object.assign({ run }, ref)); },
    training(run) { return this.get("/api/training", { run }); },
    step(run, step) { return this.get("/api/step", { run, step }); },
    tokens(run, id) { return this.get("/api/tokens", { run, id }); },
    probe(run, sample) { return this.get("/api/probe", { run, sample }); },
    compare(a, b) { return this.get("/api/compare", { a, b }); },
    playSamples() { return this.get("/api/play/samples"); },
    playStart(sampleId) { return this.post("/api/play/start", { sample_id: sampleId }); },
    playStep(session, action) { return this.post("/api/play/step", { session, action }); },
    playClues(session) { return this.post("/api/play/clues", { session }); },
    select(a, b) { return this.post("/api/select", { a, b }); },
  };

  // The same filters, ordering and facets as runindex.py, over the rows embedded in an export.
  function staticApi(data) {
    const rows = data.rows;
    const searchText = (r) => [r.episode_id, r.sample_id, r.question, r.prediction || "", r.answer, r.failure || "", r.problem || ""].join(" ").toLowerCase();
    for (const key of Object.keys(rows)) for (const r of rows[key]) r._search = searchText(r);
    const find = (key, id, sample) => {
      const list = rows[key] || [];
      return list.find((r) => r.episode_id === id) || list.find((r) => sample && r.sample_id === sample) || null;
    };
    const matches = (r, q) => {
      const o = q.outcome || "all";
      if (o === "correct" && r.correct !== true) return false;
      if (o === "wrong" && r.correct !== false) return false;
      if (o === "unanswered" && !(r.problem === null && r.prediction === null)) return false;
      if (o === "problem" && !(r.problem || r.failure)) return false;
      for (const f of ["policy", "problem_type", "task_kind", "role"]) if (q[f] && r[f] !== q[f]) return false;
      if (q.reward_min !== undefined && q.reward_min !== "" && !(isNum(r.reward) && r.reward >= Number(q.reward_min))) return false;
      if (q.reward_max !== undefined && q.reward_max !== "" && !(isNum(r.reward) && r.reward <= Number(q.reward_max))) return false;
      return !q.q || r._search.includes(q.q.toLowerCase());
    };
    const versusOk = (v, a, b) => {
      if (!v) return true;
      if (v === "missing") return b === null;
      if (b === null) return false;
      if (v === "agree") return a.correct === b.correct;
      if (v === "disagree") return a.correct !== b.correct;
      if (v === "a_only") return a.correct === true && b.correct !== true;
      return b.correct === true && a.correct !== true;
    };
    const facets = (list) => {
      const out = {};
      for (const f of ["policy", "problem_type", "task_kind", "role"]) {
        const counts = {};
        for (const r of list) if (r[f]) counts[r[f]] = (counts[r[f]] || 0) + 1;
        out[f] = Object.fromEntries(Object.entries(counts).sort());
      }
      const rewards = list.map((r) => r.reward).filter(isNum);
      out.reward = rewards.length ? [Math.min(...rewards), Math.max(...rewards)] : null;
      return out;
    };
    return {
      static: true,
      async runs() { return { runs: data.runs, compare: data.compare, play: { available: false, reason: "an exported file has no play mode" } }; },
      async episodes(q) {
        const key = q.run || "A";
        const all = rows[key] || [];
        const other = key === "A" && rows.B ? "B" : null;
        let kept = all.filter((r) => matches(r, q));
        if (other && q.versus) kept = kept.filter((r) => versusOk(q.versus, r, find(other, r.episode_id, r.sample_id)));
        let sort = q.sort || "index";
        const desc = sort.startsWith("-");
        sort = sort.replace(/^-/, "");
        const present = kept.filter((r) => r[sort] !== null && r[sort] !== undefined);
        const absent = kept.filter((r) => r[sort] === null || r[sort] === undefined);
        present.sort((a, b) => (a[sort] < b[sort] ? -1 : a[sort] > b[sort] ? 1 : 0) * (desc ? -1 : 1) || a.index - b.index);
        kept = present.concat(absent);
        const perPage = Math.max(1, Math.min(500, Number(q.per_page || 50)));
        const page = Math.max(0, Number(q.page || 0));
        const pageRows = kept.slice(page * perPage, (page + 1) * perPage).map((r) => {
          if (!other) return r;
          const b = find(other, r.episode_id, r.sample_id);
          return Object.assign({}, r, { other: b && { index: b.index, episode_id: b.episode_id, correct: b.correct, reward: b.reward } });
        });
        return { run: key, status: (data.runs.find((r) => r.key === key) || {}).status || "", total: kept.length, all: all.length, page, per_page: perPage, rows: pageRows, facets: facets(all) };
      },
      async episode(key, ref) {
        const list = rows[key] || [];
        const row = ref.id !== undefined ? list.find((r) => r.episode_id === ref.id) : list.find((r) => r.index === Number(ref.i));
        if (!row) throw new Error("episode not in this export");
        const ep = (data.episodes[key] || {})[row.index];
        if (!ep) throw new Error("episode not in this export");
        const gid = row.group_id || row.sample_id;
        const group = list.filter((r) => (r.group_id || r.sample_id) === gid);
        let counterpart = null;
        if ((key === "A" || key === "B") && rows.B) {
          const ok = key === "A" ? "B" : "A";
          const b = find(ok, row.episode_id, row.sample_id);
          counterpart = b && { run: ok, index: b.index, episode_id: b.episode_id };
        }
        return { episode: ep, group, counterpart };
      },
    };
  }

  const api = EMBEDDED ? staticApi(EMBEDDED) : serverApi;

  // ---- routing ----------------------------------------------------------------------------------
  let keyHandler = null; // the episode view's ← / → handler
  let runsInfo = null;

  function parseHash() {
    const raw = location.hash.replace(/^#/, "") || "/";
    const [path, query] = raw.split("?");
    return { parts: path.split("/").filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(query || "") };
  }

  async function route() {
    keyHandler = null;
    const { parts, params } = parseHash();
    document.querySelectorAll("header nav a").forEach((a) => a.classList.remove("active"));
    try {
      if (!runsInfo) runsInfo = await api.runs();
      $("#run-info").textContent = runsInfo.runs.map((r) => r.key + ": " + r.path + (r.training ? " (training, " + r.steps + " steps)" : " (" + r.episodes + ")")).join("   ");
      $("#nav-play").hidden = !runsInfo.play.available && api.static;
      const training = runsInfo.runs.filter((r) => r.training);
      $("#nav-training").hidden = !training.length;
      $("#nav-compare").hidden = !(runsInfo.compare || training.length) || api.static;
      const parent = runsInfo.parent;
      $("#nav-runs").hidden = !parent;
      if (parent) $("#run-info").textContent = parent.path + (parent.selected.length ? " › " + parent.selected.join(" vs ") : " (a folder of " + parent.runs.length + " runs)");
      const needServer = ["training", "group", "tokens", "probe", "compare"];
      if (api.static && needServer.includes(parts[0])) {
        $("#app").replaceChildren(h("p", { class: "notice" }, "This view needs the viewer server (videoseek view RUN)."));
      } else if (parts[0] === "runs" || (parent && !parent.selected.length && !parts.length)) {
        $("#nav-runs").classList.add("active");
        await showRuns(parent);
      } else if (parts[0] === "training") {
        $("#nav-training").classList.add("active");
        await showTraining(parts[1] || training[0].key, params);
      } else if (parts[0] === "group" && parts.length >= 3) {
        await showGroup(parts[1], parts.slice(2).join("/"));
      } else if (parts[0] === "tokens" && parts.length >= 3) {
        await showTokens(parts[1], parts.slice(2).join("/"));
      } else if (parts[0] === "probe" && parts.length >= 3) {
        await showProbe(parts[1], parts.slice(2).join("/"));
      } else if (parts[0] === "compare") {
        $("#nav-compare").classList.add("active");
        await showCompare(params);
      } else if (!parts.length && !params.get("run") && runsInfo.runs[0].training && !runsInfo.runs[0].episodes) {
        $("#nav-training").classList.add("active");
        await showTraining(runsInfo.runs[0].key, params);
      } else if (parts[0] === "episode" && parts.length >= 3) {
        const ref = parts[2] === "id" ? { id: parts.slice(3).join("/") } : { i: parts[2] };
        await showEpisode(parts[1], ref, params);
      } else if (parts[0] === "play") {
        $("#nav-play").classList.add("active");
        await showPlay();
      } else {
        $("#nav-episodes").classList.add("active");
        await showList(params);
      }
    } catch (err) {
      $("#app").replaceChildren(h("div", { class: "error-banner", id: "page-error" }, String(err.message || err)));
    }
  }
  window.addEventListener("hashchange", route);
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape") closeLightbox();
    const tag = (ev.target && ev.target.tagName) || "";
    if (["INPUT", "TEXTAREA", "SELECT"].includes(tag)) return;
    if (keyHandler && (ev.key === "ArrowLeft" || ev.key === "ArrowRight")) {
      ev.preventDefault();
      keyHandler(ev.key === "ArrowLeft" ? -1 : 1);
    }
  });

  // ---- lightbox ---------------------------------------------------------------------------------
  function openLightbox(src, caption) {
    const box = $("#lightbox");
    $("img", box).src = src;
    $("figcaption", box).textContent = caption;
    box.hidden = false;
  }
  function closeLightbox() { $("#lightbox").hidden = true; }
  $("#lightbox").addEventListener("click", closeLightbox);

  // ---- episode list -----------------------------------------------------------------------------
  const FILTER_KEYS = ["outcome", "policy", "problem_type", "task_kind", "role", "reward_min", "reward_max", "q", "sort", "versus", "per_page"];
  const SORTS = [["index", "file order"], ["-reward", "reward ↓"], ["reward", "reward ↑"], ["-advantage", "advantage ↓"], ["advantage", "advantage ↑"],
    ["-score", "evidence score ↓"], ["score", "evidence score ↑"], ["-turns", "turns ↓"], ["turns", "turns ↑"], ["-calls", "calls ↓"], ["calls", "calls ↑"], ["episode_id", "episode id"]];
  let listSeq = 0;

  function listHash(values) {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(values)) if (v !== "" && v !== undefined && v !== null && !(k === "page" && Number(v) === 0)) p.set(k, v);
    const q = p.toString();
    return "#/" + (q ? "?" + q : "");
  }

  function select(name, label, current, choices) {
    return h("label", {}, label, h("select", { name }, choices.map(([v, text]) => h("option", { value: v, selected: v === current }, text))));
  }

  function facetChoices(counts) {
    return [["", "any"]].concat(Object.entries(counts || {}).map(([v, n]) => [v, v + " (" + n + ")"]));
  }

  async function showList(params) {
    const seq = ++listSeq;
    const q = {};
    for (const k of FILTER_KEYS.concat(["page", "run"])) if (params.get(k)) q[k] = params.get(k);
    const data = await api.episodes(q);
    if (seq !== listSeq) return; // a newer request is on its way
    const focused = document.activeElement && document.activeElement.name;
    const caret = focused && document.activeElement.selectionStart;
    const f = data.facets;
    const form = h("form", { class: "filters", id: "filters", onsubmit: (e) => e.preventDefault() },
      select("outcome", "outcome", q.outcome || "all", [["all", "all"], ["correct", "correct"], ["wrong", "wrong"], ["unanswered", "unanswered"], ["problem", "problems"]]),
      select("policy", "policy", q.policy || "", facetChoices(f.policy)),
      select("problem_type", "problem type", q.problem_type || "", facetChoices(f.problem_type)),
      select("task_kind", "task kind", q.task_kind || "", facetChoices(f.task_kind)),
      select("role", "group role", q.role || "", facetChoices(f.role)),
      h("label", {}, "reward ≥", h("input", { type: "number", step: "any", name: "reward_min", value: q.reward_min || "", placeholder: f.reward ? fmt(f.reward[0]) : "" })),
      h("label", {}, "reward ≤", h("input", { type: "number", step: "any", name: "reward_max", value: q.reward_max || "", placeholder: f.reward ? fmt(f.reward[1]) : "" })),
      h("label", {}, "search", h("input", { type: "search", name: "q", value: q.q || "", placeholder: "id, question, answer…" })),
      select("sort", "sort", q.sort || "index", SORTS),
      runsInfo.compare ? select("versus", "A vs B", q.versus || "", [["", "all"], ["disagree", "A ≠ B"], ["agree", "A = B"], ["a_only", "only A right"], ["b_only", "only B right"], ["missing", "not in B"]]) : null,
    );
    let timer = null;
    const apply = () => {
      const values = {};
      for (const el of form.elements) if (el.name) values[el.name] = el.value;
      if (values.outcome === "all") values.outcome = "";
      if (values.sort === "index") values.sort = "";
      location.hash = listHash(Object.assign(values, { run: q.run || "" }));
    };
    form.addEventListener("change", apply);
    form.addEventListener("input", (e) => { if (e.target.name === "q") { clearTimeout(timer); timer = setTimeout(apply, 250); } });

    const pages = Math.max(1, Math.ceil(data.total / data.per_page));
    const go = (page) => { location.hash = listHash(Object.assign({}, q, { page })); };
    const summary = h("div", { class: "list-summary" },
      h("span", { id: "list-count" }, data.total + " of " + data.all + " episodes"),
      h("button", { id: "page-prev", disabled: data.page <= 0, onclick: () => go(data.page - 1) }, "◀"),
      h("span", { id: "page-pos" }, "page " + (data.page + 1) + " / " + pages),
      h("button", { id: "page-next", disabled: data.page + 1 >= pages, onclick: () => go(data.page + 1) }, "▶"));
    const compare = runsInfo.compare && (q.run || "A") === "A";
    const head = h("tr", {}, ["#", "episode", "policy", "type", "task", "role", "turns", "calls", "evidence", "reward", "adv.", "✓"].map((t) => h("th", {}, t)),
      compare ? [h("th", {}, "B ✓"), h("th", {}, "B reward")] : null, h("th", {}, "question / problem"));
    const body = h("tbody", {}, data.rows.map((r) => h("tr", {
      class: r.problem || r.failure ? "problem" : null, "data-index": r.index, "data-episode": r.episode_id,
      onclick: () => { location.hash = "#/episode/" + encodeURIComponent(data.run) + "/" + r.index; },
    },
    h("td", { class: "num" }, r.index), h("td", {}, r.episode_id), h("td", {}, r.policy), h("td", {}, r.problem_type), h("td", {}, r.task_kind), h("td", {}, r.role),
    h("td", { class: "num" }, r.turns), h("td", { class: "num" }, r.calls), h("td", { class: "num" }, fmt(r.score)), h("td", { class: "num" }, fmt(r.reward, 3)),
    h("td", { class: "num" }, fmt(r.advantage)), h("td", {}, verdict(r.correct)),
    compare ? [h("td", {}, r.other ? verdict(r.other.correct) : h("span", { class: "na" }, "absent")), h("td", { class: "num" }, r.other ? fmt(r.other.reward, 3) : "")] : null,
    h("td", { class: "question" }, r.problem ? h("span", { class: "no" }, r.problem) : r.failure ? h("span", { class: "no" }, "failure: " + r.failure) : r.question))));
    const children = [form];
    if (data.status) children.push(h("p", { class: "notice", id: "run-status" }, "Run " + data.run + ": " + data.status));
    children.push(summary, data.rows.length ? h("table", { class: "episodes", id: "episode-table" }, h("thead", {}, head), body)
      : h("p", { class: "notice", id: "no-rows" }, data.all ? "No episode matches these filters." : "This run has no episodes."));
    $("#app").replaceChildren(...children);
    if (focused && form.elements[focused]) {
      const el = form.elements[focused];
      el.focus();
      if (caret !== null && caret !== undefined && el.setSelectionRange) try { el.setSelectionRange(caret, caret); } catch (e) { /* number inputs */ }
    }
  }

  // ---- timeline (inline SVG) --------------------------------------------------------------------
  const gainColour = (g) => {
    if (!isNum(g) || Math.abs(g) < 1e-9) return "#d1d5db";
    const strength = Math.min(1, Math.abs(g) / 0.5);
    return g > 0 ? "hsl(140, 60%, " + (82 - 40 * strength) + "%)" : "hsl(0, 75%, " + (85 - 35 * strength) + "%)";
  };

  function niceStep(span) {
    const raw = span / 8;
    const base = Math.pow(10, Math.floor(Math.log10(raw)));
    return [1, 2, 5, 10].map((m) => m * base).find((st) => st >= raw) || raw;
  }

  // A call's lane: its number and tool ("2 zoom"), cut to fit the label column.
  const laneName = (c) => { const t = c.n + " " + (c.tool || "invalid"); return t.length > 13 ? t.slice(0, 12) + "…" : t; };

  /* opts: {end, clues, masked, initial: [frame], calls: [call], currentTurn, frameTicks: [frame], showClues, selection: [s,e], onCall(turn), onDrag(s,e)} */
  function timeline(opts) {
    // drawn at the container's pixel width (when known) so labels keep their size in narrow panels
    const W = Math.max(320, Math.round(opts.width || 1000)), L = 78, R = 12, end = Math.max(opts.end || 1, 1e-6);
    // the window shown: opts.view = [v0, v1] (zoomed), else the whole video
    const v0 = opts.view ? Math.max(0, opts.view[0]) : 0, v1 = opts.view ? Math.min(end, opts.view[1]) : end;
    const x = (t) => L + ((Math.min(Math.max(t, v0), v1) - v0) / (v1 - v0)) * (W - L - R);
    const inView = (t) => t >= v0 - 1e-9 && t <= v1 + 1e-9;
    const calls = opts.calls || [];
    const laneH = 16;
    let y = 24;
    const items = [];
    const lane = (label) => { items.push(s("text", { x: 4, y: y + 11, class: "lane-label" }, label)); const top = y; y += laneH + 4; return top; };
    // axis
    const step = niceStep(v1 - v0);
    const axis = s("g", { class: "axis" }, s("line", { x1: L, x2: W - R, y1: 18, y2: 18 }));
    for (let t = Math.ceil(v0 / step - 1e-9) * step; t <= v1 + 1e-9; t += step) axis.append(s("line", { x1: x(t), x2: x(t), y1: 14, y2: 18 }), s("text", { x: x(t), y: 11, "text-anchor": "middle" }, t.toFixed(step < 0.1 ? 2 : step < 1 ? 1 : 0) + "s"));
    items.push(axis);
    if (opts.showClues !== false) {
      const top = lane("clues");
      for (const [cs, ce] of opts.clues || []) items.push(s("rect", { class: "clue", x: x(cs), y: top, width: Math.max(1, x(ce) - x(cs)), height: laneH, "data-start": cs, "data-end": ce }, s("title", {}, "clue " + fmtT(cs) + "–" + fmtT(ce))));
    }
    const maskedFrames = (opts.initial || []).concat(opts.allFrames || []).filter((f) => f.masked && isNum(f.t));
    if ((opts.masked || []).length || maskedFrames.length) {
      const top = lane("masked");
      for (const [ms, me] of opts.masked || []) items.push(s("rect", { class: "masked-range", x: x(ms), y: top, width: Math.max(2, x(me) - x(ms)), height: laneH, "data-start": ms, "data-end": me }, s("title", {}, "perturbed (masked) " + fmtT(ms) + "–" + fmtT(me))));
      for (const f of maskedFrames.filter((f) => inView(f.t))) items.push(s("line", { class: "masked-tick", x1: x(f.t), x2: x(f.t), y1: top, y2: top + laneH, stroke: "#111827" }));
    }
    {
      const top = lane("initial");
      for (const f of opts.initial || []) if (isNum(f.t) && inView(f.t)) items.push(s("line", { class: "init-tick", x1: x(f.t), x2: x(f.t), y1: top + 2, y2: top + laneH - 2, "data-t": f.t }, s("title", {}, "initial frame " + fmtT(f.t))));
    }
    // Each call is drawn from what it returned (viewer/episode.py, call_record): a span (crop_video),
    // a box on one frame at its time (zoom), ticks at the frames any other tool returned, or, for a
    // rejected call, a cross with the env's reason.
    for (const c of calls) {
      const top = lane(laneName(c));
      const dup = c.duplicate_of !== null && c.duplicate_of !== undefined;
      const cls = ["call", c.rejected ? "rejected" : "", dup ? "dup" : "", c.fragment ? "frag" : "", c.turn === opts.currentTurn ? "current" : ""].filter(Boolean).join(" ");
      const isSpan = isNum(c.start) && isNum(c.end);
      const where = isSpan ? " " + fmtT(c.start) + "–" + fmtT(c.end) : isNum(c.time) ? " at " + fmtT(c.time) : "";
      const tip = "call " + c.n + " (turn " + c.turn + "): " + (c.label || "") + where + (c.rejected ? " rejected: " + c.reason : opts.hideGain || !isSpan ? "" : " gain " + fmt(c.gain, 3)) +
        (dup ? ", duplicate of call " + (c.duplicate_of_n || c.duplicate_of + 1) : "") + (c.fragment ? ", fragment" : "") + (c.clipped ? ", clipped" : "") +
        (isNum(c.box_iou) && !opts.hideGain ? ", box IoU " + fmt(c.box_iou, 2) : "");
      const attrs = { class: cls, "data-n": c.n, "data-turn": c.turn, "data-tool": c.tool || "", "data-start": c.start, "data-end": c.end, "data-gain": isNum(c.gain) ? c.gain : "",
        fill: opts.hideGain && !c.rejected ? "#dbeafe" : gainColour(c.gain), onclick: () => opts.onCall && opts.onCall(c.turn) };
      // a label that would run past the right edge is drawn to the left of its anchor (or of `left`, the mark's left edge) instead
      const label = (at, text, gap, left) => {
        const right = at + gap + text.length * 5.6 > W - 2;
        return s("text", { class: "call-label", x: right ? Math.max(2, (left ?? at) - gap) : at + gap, y: top + 12, "text-anchor": right ? "end" : "start" }, text);
      };
      if (!c.rejected && c.box && isNum(c.time)) {
        // a region of one frame: a tick at its time and the frame in miniature with the box in it
        if (!inView(c.time)) continue;
        const at = x(c.time), gh = laneH - 2, gw = Math.round(gh * 16 / 9), gx = Math.min(Math.max(at - gw / 2, L), W - R - gw);
        const [x1, y1, x2, y2] = c.box.map((v) => Math.min(1, Math.max(0, v)));
        items.push(s("g", { class: cls + " box-call", "data-n": c.n, "data-turn": c.turn, "data-tool": c.tool, "data-time": c.time, "data-box": JSON.stringify(c.box), onclick: attrs.onclick },
          s("line", { class: "box-tick", x1: at, x2: at, y1: top, y2: top + laneH }),
          s("rect", { class: "box-frame", x: gx, y: top + 1, width: gw, height: gh }),
          s("rect", { class: "box-region", x: gx + x1 * gw, y: top + 1 + y1 * gh, width: Math.max(1, (x2 - x1) * gw), height: Math.max(1, (y2 - y1) * gh) }),
          s("title", {}, tip)));
        items.push(label(gx + gw, c.n + " " + c.label, 3, gx));
      } else if (isSpan && c.end > c.start && c.end > 0 && c.start < end) {
        if (c.end < v0 || c.start > v1) continue; // outside the zoomed window
        items.push(s("rect", Object.assign(attrs, { x: x(c.start), y: top, width: Math.max(2, x(c.end) - x(c.start)), height: laneH }), s("title", {}, tip)));
        items.push(label(x(Math.max(c.start, v0)), String(c.n) + (c.rejected ? " ✗" : dup ? " dup" : c.fragment ? " frag" : ""), 3));
      } else if (!c.rejected) {
        // any other tool: a tick at each frame it returned (none for a text-only tool), and its call
        const times = (c.times || []).filter((t) => isNum(t) && inView(t));
        items.push(s("g", { class: cls + " tool-call", "data-n": c.n, "data-turn": c.turn, "data-tool": c.tool, "data-times": JSON.stringify(c.times || []), onclick: attrs.onclick },
          times.map((t) => s("line", { class: "call-tick", x1: x(t), x2: x(t), y1: top + 1, y2: top + laneH - 1, "data-t": t })),
          s("rect", { class: "call-hit", x: times.length ? x(times[0]) - 4 : L, y: top, width: times.length ? Math.max(8, x(times[times.length - 1]) - x(times[0]) + 8) : 8, height: laneH }),
          s("title", {}, tip)));
        items.push(label(times.length ? x(times[times.length - 1]) : L, c.n + " " + c.label, times.length ? 5 : 2, times.length ? x(times[0]) : L));
      } else {
        // a rejected call: a cross where it would have looked (its start or time, else 0), labelled
        const t0 = isNum(c.start) ? c.start : isNum(c.time) ? c.time : 0;
        const at = x(Math.min(Math.max(t0, 0), end));
        items.push(s("g", Object.assign(attrs, { class: cls + " reject-mark" }), s("line", { x1: at - 5, x2: at + 5, y1: top + 3, y2: top + 13 }), s("line", { x1: at - 5, x2: at + 5, y1: top + 13, y2: top + 3 }), s("title", {}, tip)));
        items.push(label(at, c.n + " ✗ " + (c.reason || "rejected"), 8));
      }
    }
    if ((opts.frameTicks || []).length) {
      const top = lane("frames");
      for (const f of opts.frameTicks) if (isNum(f.t) && inView(f.t)) items.push(s("line", { class: "frame-tick", x1: x(f.t), x2: x(f.t), y1: top + 2, y2: top + laneH - 2, "data-t": f.t }, s("title", {}, "frame " + fmtT(f.t))));
    }
    // key frames: thumbnails of the frames this turn's call returned, each under its time
    const thumbs = (opts.keyFrames || []).filter((f) => f.url && isNum(f.t) && inView(f.t));
    if (thumbs.length) {
      const th = 40, top = y;
      items.push(s("text", { x: 4, y: top + th / 2 + 4, class: "lane-label" }, "key frames"));
      const gap = thumbs.length > 1 ? Math.min(...thumbs.slice(1).map((f, k) => x(f.t) - x(thumbs[k].t))) : Infinity;
      const tw = Math.max(12, Math.min(th * 1.6, gap - 2));
      thumbs.forEach((f, k) => {
        const cx = Math.min(Math.max(x(f.t), L + tw / 2), W - R - tw / 2);
        items.push(s("g", { class: "keyframe", "data-t": f.t, "data-k": k, onclick: () => openLightbox(f.url, fmtT(f.t)) },
          s("image", { href: f.url, x: cx - tw / 2, y: top, width: tw, height: th, preserveAspectRatio: "xMidYMid slice" }),
          s("rect", { class: "keyframe-frame", x: cx - tw / 2, y: top, width: tw, height: th }), s("title", {}, "frame " + fmtT(f.t))));
      });
      y += th + 6;
    }
    const height = y + 4;
    const svg = s("svg", { class: "timeline", viewBox: "0 0 " + W + " " + height, preserveAspectRatio: "xMinYMin meet", "data-end": end },
      s("defs", {}, s("pattern", { id: "hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" }, s("rect", { width: 6, height: 6, fill: "#e5e7eb" }), s("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#4b5563", "stroke-width": 3 }))),
      items, s("line", { class: "playhead", x1: 0, x2: 0, y1: 14, y2: height, visibility: "hidden" }));
    svg.timeAt = x; // for the frame player's playhead
    if (opts.onDrag) addDrag(svg, x, [v0, v1], L, W - R, height, opts);
    if (opts.onZoom) addWheelZoom(svg, [v0, v1], end, L, W - R, opts.onZoom);
    return svg;
  }

  // Zoom: the wheel over the timeline zooms around the pointer; tools add buttons and a reset.
  function zoomAround(view, end, at, factor) {
    const span = Math.min(end, Math.max(end / 200, 0.2, (view[1] - view[0]) * factor));
    let a = at - (at - view[0]) * (span / (view[1] - view[0]));
    a = Math.min(Math.max(0, a), end - span);
    return span >= end - 1e-9 ? null : [a, a + span];
  }
  function addWheelZoom(svg, view, end, x0, x1, onZoom) {
    svg.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const box = svg.getBoundingClientRect();
      const vx = ((ev.clientX - box.left) / box.width) * svg.viewBox.baseVal.width;
      const at = view[0] + Math.min(1, Math.max(0, (vx - x0) / (x1 - x0))) * (view[1] - view[0]);
      onZoom(zoomAround(view, end, at, ev.deltaY > 0 ? 1.25 : 0.8));
    }, { passive: false });
  }
  function zoomTools(getView, end, onZoom) {
    const v = getView() || [0, end];
    const mid = (v[0] + v[1]) / 2;
    const pan = (d) => { const w = v[1] - v[0]; const a = Math.min(Math.max(0, v[0] + d * w * 0.5), end - w); onZoom([a, a + w]); };
    return h("div", { class: "tl-tools" }, "zoom",
      h("button", { class: "zoom-in", title: "zoom in (or the mouse wheel over the timeline)", onclick: () => onZoom(zoomAround(v, end, mid, 0.5)) }, "+"),
      h("button", { class: "zoom-out", title: "zoom out", disabled: !getView(), onclick: () => onZoom(zoomAround(v, end, mid, 2)) }, "−"),
      h("button", { class: "pan-left", disabled: !getView() || v[0] <= 1e-9, onclick: () => pan(-1) }, "◀"),
      h("button", { class: "pan-right", disabled: !getView() || v[1] >= end - 1e-9, onclick: () => pan(1) }, "▶"),
      h("button", { class: "zoom-reset", disabled: !getView(), onclick: () => onZoom(null) }, "whole video"),
      h("span", { class: "zoom-window" }, fmtT(v[0]) + " – " + fmtT(v[1])));
  }

  // Drag on the timeline to choose a span (play mode): mouse or touch via pointer events.
  function addDrag(svg, x, view, x0, x1, height, opts) {
    const area = s("rect", { class: "drag-area", x: x0, y: 0, width: x1 - x0, height });
    const sel = s("rect", { class: "selection", x: 0, y: 0, width: 0, height, visibility: "hidden" });
    svg.append(sel, area);
    const toTime = (ev) => {
      const box = svg.getBoundingClientRect();
      const vx = ((ev.clientX - box.left) / box.width) * svg.viewBox.baseVal.width;
      return view[0] + Math.min(1, Math.max(0, (vx - x0) / (x1 - x0))) * (view[1] - view[0]);
    };
    const show = (a, b) => {
      const lo = Math.min(a, b), hi = Math.max(a, b);
      sel.setAttribute("x", x(lo)); sel.setAttribute("width", Math.max(1, x(hi) - x(lo))); sel.setAttribute("visibility", "visible");
      return [lo, hi];
    };
    if (opts.selection) show(opts.selection[0], opts.selection[1]);
    let start = null;
    area.addEventListener("pointerdown", (ev) => { start = toTime(ev); area.setPointerCapture(ev.pointerId); show(start, start); });
    area.addEventListener("pointermove", (ev) => { if (start !== null) { const [lo, hi] = show(start, toTime(ev)); opts.onDrag(lo, hi, false); } });
    area.addEventListener("pointerup", (ev) => { if (start === null) return; const [lo, hi] = show(start, toTime(ev)); start = null; opts.onDrag(lo, hi, true); });
  }

  // ---- evidence curve ---------------------------------------------------------------------------
  function evidenceCurve(points, nPositions, current) {
    const W = 300, H = 110, L = 26, B = 16, T = 8;
    const xs = (k) => L + (nPositions > 1 ? (k / (nPositions - 1)) * (W - L - 8) : 0);
    const ys = (v) => T + (1 - Math.min(1, Math.max(0, v))) * (H - T - B);
    const path = (key) => points.map((p, k) => (k ? "L" : "M") + xs(p.pos).toFixed(1) + " " + ys(p[key] || 0).toFixed(1)).join(" ");
    return s("svg", { class: "curve", viewBox: "0 0 " + W + " " + H, "data-points": points.length },
      s("line", { x1: L, x2: W - 8, y1: ys(0), y2: ys(0), stroke: "#9ca3af" }), s("line", { x1: L, x2: L, y1: ys(0), y2: ys(1), stroke: "#9ca3af" }),
      s("text", { x: 2, y: ys(1) + 4 }, "1"), s("text", { x: 2, y: ys(0) + 4 }, "0"),
      points.length ? [s("path", { class: "coverage", d: path("coverage") }), s("path", { class: "score", d: path("score") })] : null,
      s("line", { class: "marker", x1: xs(current), x2: xs(current), y1: ys(0), y2: ys(1) }),
      s("text", { x: L + 4, y: H - 3 }, "start"), s("text", { x: W - 8, y: H - 3, "text-anchor": "end" }, "turn " + Math.max(0, nPositions - 1)));
  }

  // ---- one episode ------------------------------------------------------------------------------
  // The frames of a turn; with `onBox(box, frame)` (play mode, a tool that takes a box) a box can be
  // dragged on each frame, in fractions of its width and height.
  function framesBlock(frames, label, onBox) {
    if (!frames.length) return h("p", { class: "meta" }, "no frames");
    return h("div", { class: "frames" }, frames.map((f, k) => {
      const caption = fmtT(f.t) + (f.masked ? " masked" : "");
      if (!f.url) return h("figure", { class: f.masked ? "masked" : null, "data-t": f.t }, h("div", { class: "missing", title: f.path || "" }, f.missing || "no image"), h("figcaption", {}, caption));
      if (onBox) {
        const img = h("img", { src: f.url, alt: label + " frame " + k + " at " + caption, draggable: "false" });
        const holder = h("div", { class: "boxed-frame" }, img);
        addBoxDrag(holder, img, (box) => onBox(box, f), () => openLightbox(f.url, label + " · " + caption));
        return h("figure", { class: "box-target" + (f.masked ? " masked" : ""), "data-t": f.t, title: "drag a box on the frame" }, holder, h("figcaption", {}, caption));
      }
      return h("figure", { class: f.masked ? "masked" : null, "data-t": f.t },
        h("img", { src: f.url, alt: label + " frame " + k + " at " + caption, loading: "lazy", onclick: () => openLightbox(f.url, label + " · " + caption) }), h("figcaption", {}, caption));
    }));
  }

  // Drag a box on a frame (mouse or touch): `onBox([x1, y1, x2, y2])` in fractions, rounded to 0.001;
  // a click without a drag calls `onClick`. The last box drawn on any frame stays shown.
  let shownBox = null;
  function addBoxDrag(holder, img, onBox, onClick) {
    const box = h("div", { class: "zoom-box drawn-box", hidden: true });
    holder.append(box);
    let from = null;
    const at = (ev) => {
      const r = img.getBoundingClientRect();
      return [Math.min(1, Math.max(0, (ev.clientX - r.left) / r.width)), Math.min(1, Math.max(0, (ev.clientY - r.top) / r.height))];
    };
    const show = (a, b) => {
      const [x1, x2] = [Math.min(a[0], b[0]), Math.max(a[0], b[0])], [y1, y2] = [Math.min(a[1], b[1]), Math.max(a[1], b[1])];
      Object.assign(box.style, { left: 100 * x1 + "%", top: 100 * y1 + "%", width: 100 * (x2 - x1) + "%", height: 100 * (y2 - y1) + "%" });
      if (shownBox && shownBox !== box) shownBox.hidden = true;
      box.hidden = false;
      shownBox = box;
      return [x1, y1, x2, y2];
    };
    img.addEventListener("pointerdown", (ev) => { ev.preventDefault(); from = at(ev); img.setPointerCapture(ev.pointerId); });
    img.addEventListener("pointermove", (ev) => { if (from) show(from, at(ev)); });
    img.addEventListener("pointerup", (ev) => {
      if (!from) return;
      const b = show(from, at(ev));
      from = null;
      if (b[2] - b[0] < 0.01 || b[3] - b[1] < 0.01) { box.hidden = true; onClick(); return; }
      onBox(b.map((v) => Math.round(v * 1000) / 1000));
    });
  }

  // One line about a call: its `name(arguments)` label, then what it returned or why it was rejected.
  function callLine(c, hideGain) {
    const dup = c.duplicate_of !== null && c.duplicate_of !== undefined;
    const what = c.rejected ? " rejected: " + c.reason
      : isNum(c.start) && isNum(c.end) ? " → " + fmtT(c.start) + "–" + fmtT(c.end) + (hideGain ? "" : " gain " + fmt(c.gain, 3))
      : c.box && isNum(c.time) ? " → the region at " + fmtT(c.time) + (isNum(c.box_iou) && !hideGain ? " · box IoU " + fmt(c.box_iou, 2) : "")
      : (c.times || []).length ? " → " + c.times.length + " frame" + (c.times.length > 1 ? "s" : "") + " at " + c.times.map(fmtT).join(", ") : "";
    return "#" + c.n + " turn " + c.turn + ": " + c.label + what + (dup ? " · duplicate of #" + (c.duplicate_of_n || c.duplicate_of + 1) : "") + (c.fragment ? " · fragment" : "") + (c.clipped ? " · clipped" : "");
  }

  // Where a region call looked: its box drawn on the nearest initial or retrieved frame (`c.frame`).
  function boxView(c) {
    if (!c || c.rejected || !c.box || !isNum(c.time)) return null;
    const f = c.frame;
    if (!f) return h("p", { class: "meta box-view", "data-n": c.n }, "the box [" + c.box.map((v) => fmt(v, 2)).join(", ") + "] at " + fmtT(c.time) + ": no frame near that time to draw it on (see the timeline)");
    const [x1, y1, x2, y2] = c.box.map((v) => Math.min(1, Math.max(0, v)));
    const pct = (v) => (100 * v).toFixed(2) + "%";
    return h("div", { class: "box-view", "data-n": c.n }, h("figure", { class: "boxed" + (f.masked ? " masked" : ""), "data-t": f.t },
      h("div", { class: "boxed-frame" }, h("img", { src: f.url, alt: "frame at " + fmtT(f.t) + " with the box of call " + c.n, onclick: () => openLightbox(f.url, f.source + " · " + fmtT(f.t)) }),
        h("div", { class: "zoom-box", style: "left:" + pct(x1) + ";top:" + pct(y1) + ";width:" + pct(x2 - x1) + ";height:" + pct(y2 - y1) })),
      h("figcaption", {}, "where call " + c.n + " looked: its box on the " + (f.source || "") + " frame at " + fmtT(f.t) + (f.dt > 0.05 ? " (" + fmt(f.dt, 1) + "s from " + fmtT(c.time) + ")" : ""))));
  }

  // Playback of a call's frames: one frame at a time at their times, with a playhead on the timeline.
  function framePlayer(frames, label, getSvg) {
    const shown = frames.filter((f) => f.url);
    if (shown.length < 2) return null;
    let k = 0, timer = null;
    const img = h("img", { class: "player-img", src: shown[0].url, alt: label + " playback" });
    const caption = h("span", { class: "player-caption" });
    const slider = h("input", { type: "range", class: "player-slider", min: 0, max: shown.length - 1, step: 1, value: 0 });
    const btn = h("button", { class: "player-play" }, "▶ play");
    const speed = h("select", { class: "player-speed" }, [["1", "1 fps"], ["2", "2 fps"], ["4", "4 fps"], ["8", "8 fps"]].map(([v, t]) => h("option", { value: v, selected: v === "2" }, t)));
    const show = (i) => {
      k = i;
      const f = shown[k];
      img.src = f.url;
      slider.value = k;
      caption.textContent = "frame " + (k + 1) + " / " + shown.length + " · " + fmtT(f.t);
      root.dataset.k = k;
      root.dataset.t = f.t;
      const svg = getSvg();
      const head = svg && svg.querySelector(".playhead");
      if (head && svg.timeAt) { head.setAttribute("x1", svg.timeAt(f.t)); head.setAttribute("x2", svg.timeAt(f.t)); head.setAttribute("visibility", "visible"); }
    };
    const stop = () => { clearInterval(timer); timer = null; btn.textContent = "▶ play"; root.dataset.playing = "false"; };
    const start = () => {
      if (k >= shown.length - 1) show(0);
      btn.textContent = "❚❚ pause";
      root.dataset.playing = "true";
      timer = setInterval(() => {
        if (!root.isConnected) return stop();
        if (k >= shown.length - 1) return stop();
        show(k + 1);
      }, 1000 / Number(speed.value));
    };
    btn.addEventListener("click", () => (timer ? stop() : start()));
    slider.addEventListener("input", () => { stop(); show(Number(slider.value)); });
    speed.addEventListener("change", () => { if (timer) { stop(); start(); } });
    const root = h("div", { class: "player", "data-playing": "false" }, img, h("div", {}, h("div", {}, btn, " ", speed), slider, h("div", {}, caption)));
    setTimeout(() => show(0));
    return root;
  }

  function assistantBlock(turn) {
    return h("div", { class: "assistant" }, turn.segments.map((sg) => h("span", { class: "seg-" + sg.kind }, sg.text)));
  }

  // The reward panel: with the run's reward config, each component's weight, weight × value and gate,
  // so the total shown is the sum of what is shown. Weights and gates come from the server
  // (viewer/rewardinfo.py: each component's registered gate, rewards/registry.py); none is written here.
  function rewardTable(ep) {
    const ex = ep.reward_explained;
    if (!ex || !ex.known) {
      const comps = Object.entries(ep.reward_components || {});
      const scale = Math.max(1e-9, ...comps.map(([, v]) => Math.abs(v || 0)));
      return h("div", {}, h("table", { class: "rewards" },
        comps.map(([name, v]) => h("tr", { "data-component": name }, h("td", {}, name), h("td", { class: "num" }, fmt(v, 3)),
          h("td", {}, h("span", { class: "bar" + (v < 0 ? " neg" : ""), style: "width:" + Math.round((Math.abs(v || 0) / scale) * 80) + "px" })))),
        h("tr", {}, h("td", {}, h("b", {}, "reward")), h("td", { class: "num reward-total" }, h("b", {}, fmt(ep.reward, 3))), h("td", {})),
        h("tr", {}, h("td", {}, "advantage"), h("td", { class: "num" }, fmt(ep.advantage, 3)), h("td", {}))),
        ex && ex.problem ? h("div", { class: "meta reward-note" }, "weights unknown: " + ex.problem) : null);
    }
    const scale = Math.max(1e-9, ...ex.rows.map((r) => Math.abs(r.contribution || 0)));
    const gateCell = (r) => {
      if (r.gate) {
        const g = r.gate;
        const state = g.open === null ? "gate: " + g.by + " missing" : g.open ? "gate open: " + g.by + " " + fmt(g.value) + " ≥ " + fmt(g.threshold) : "gated off: " + g.by + " " + fmt(g.value) + " < " + fmt(g.threshold);
        return h("td", { class: "gate " + (g.open === false ? "closed" : "open"), "data-gate": g.open === null ? "missing" : g.open ? "open" : "closed" }, state);
      }
      if (r.gates) return h("td", { class: "gate" }, "gates " + r.gates.join(", ") + (r.weight === 0 ? " (not in the total)" : ""));
      return h("td", { class: "gate" }, "");
    };
    return h("div", {}, h("table", { class: "rewards explained", "data-preset": ex.preset },
      h("tr", {}, h("th", {}, "component"), h("th", {}, "value"), h("th", {}, "weight"), h("th", {}, "w × value"), h("th", {}, ""), h("th", {}, "")),
      ex.rows.map((r) => h("tr", { "data-component": r.name, "data-weight": r.weight, "data-value": isNum(r.value) ? r.value : "", "data-contribution": isNum(r.contribution) ? r.contribution : "", class: r.weight === 0 ? "zero-weight" : null },
        h("td", {}, r.name), h("td", { class: "num" }, r.present ? fmt(r.value, 3) : "missing"), h("td", { class: "num" }, "× " + fmt(r.weight, 2)),
        h("td", { class: "num" }, fmt(r.contribution, 3)),
        h("td", {}, h("span", { class: "bar" + ((r.contribution || 0) < 0 ? " neg" : ""), style: "width:" + Math.round((Math.abs(r.contribution || 0) / scale) * 60) + "px" })), gateCell(r))),
      h("tr", {}, h("td", {}, h("b", {}, "Σ w × value")), h("td", {}), h("td", {}), h("td", { class: "num reward-sum" }, h("b", {}, fmt(ex.sum, 3))), h("td", {}), h("td", {})),
      h("tr", {}, h("td", {}, "recorded reward"), h("td", {}), h("td", {}), h("td", { class: "num reward-total" }, fmt(ep.reward, 3)), h("td", {}),
        h("td", { class: ex.matches === false ? "no" : "meta", id: "reward-check" }, ex.matches === false ? "≠ Σ by " + fmt(ep.reward - ex.sum, 4) : ex.matches ? "= Σ" : "")),
      h("tr", {}, h("td", {}, "advantage"), h("td", {}), h("td", {}), h("td", { class: "num" }, fmt(ep.advantage, 3)), h("td", {}), h("td", {}))),
      h("div", { class: "meta reward-note" }, "preset " + ex.preset + (isNum(ex.gate) ? " · format gate " + fmt(ex.gate) : "") + " · from " + ex.source));
  }

  // " · A, B gated by C ≥ 0.40": the gated components the server lists (RewardConfig.gates), grouped by the component that opens them.
  function gatesText(gates) {
    const byOpener = {};
    for (const g of gates || []) {
      const opener = g.by + " ≥ " + fmt(g.threshold);
      (byOpener[opener] = byOpener[opener] || []).push(g.component);
    }
    return Object.entries(byOpener).map(([opener, names]) => " · " + names.join(", ") + " gated by " + opener).join("");
  }

  function groupTable(ep, group) {
    if (!group || group.length < 2) return null;
    const byIndex = {};
    for (const r of group) {
      const m = /\/g(\d+)$/.exec(r.episode_id);
      const k = r.group_index !== null && r.group_index !== undefined ? r.group_index : m ? Number(m[1]) : r.index;
      (byIndex[k] = byIndex[k] || {})[r.role === "perturbed" ? "perturbed" : "origin"] = r;
    }
    const hasPert = group.some((r) => r.role === "perturbed");
    const cell = (r) => r ? h("td", { class: "link" + (r.episode_id === ep.episode_id ? " current" : ""), "data-episode": r.episode_id, onclick: () => { location.hash = "#/episode/" + ep.run + "/" + r.index; } },
      verdict(r.correct), " r=" + fmt(r.reward, 2) + " A=" + fmt(r.advantage, 2)) : h("td", { class: "na" }, "–");
    return h("table", { class: "group" }, h("tr", {}, h("th", {}, "g"), h("th", {}, "origin"), hasPert ? h("th", {}, "perturbed") : null),
      Object.keys(byIndex).sort((a, b) => a - b).map((k) => h("tr", {}, h("td", {}, k), cell(byIndex[k].origin), hasPert ? cell(byIndex[k].perturbed) : null)));
  }

  function optionList(ep) {
    if (!ep.options || !ep.options.length) return null;
    const letter = (o) => (/^\s*([A-Z])[.):]/.exec(o) || [])[1];
    const pred = (ep.prediction || "").trim().toUpperCase();
    const truth = (ep.answer || "").trim().toUpperCase();
    const picks = (l, said) => Boolean(l) && (said === l || said.startsWith(l + ".") || said.startsWith(l + ")"));
    return h("ol", { class: "options" }, ep.options.map((o) => {
      const l = letter(o);
      const cls = [picks(l, truth) ? "truth" : "", picks(l, pred) ? "chosen" : ""].filter(Boolean).join(" ");
      return h("li", { class: cls || null }, o);
    }));
  }

  // An episode panel: static header plus a part that redraws for each turn position.
  function episodePanel(ep, group, onCall) {
    const root = h("section", { class: "panel episode", "data-run": ep.run, "data-episode": ep.episode_id });
    const header = [
      h("h2", {}, (ep.run ? "[" + ep.run + "] " : "") + (ep.episode_id || "(no id)")),
      ep.training_ref ? h("div", { class: "meta" }, h("a", { class: "training-back", href: "#/training/" + ep.training_ref.run + "?step=" + ep.training_ref.step }, "← training step " + ep.training_ref.step + (ep.training_ref.kind === "probes" ? " (probe)" : "")),
        ep.training_ref.kind === "rollouts" ? [" · ", h("a", { href: "#/group/" + encodeURIComponent(ep.run) + "/" + encodeURIComponent((ep.group || {}).id || "") }, "group view"), " · ", h("a", { class: "tokens-link", href: "#/tokens/" + encodeURIComponent(ep.run) + "/" + encodeURIComponent(ep.episode_id) }, "tokens")] : null) : null,
      h("div", { class: "meta" }, [ep.policy && "policy " + ep.policy, ep.problem_type, ep.task_kind && "task " + ep.task_kind, ep.group && ep.group.role && "group " + ep.group.id + " · " + ep.group.role,
        ep.data_source, isNum(ep.duration) && "duration " + fmtT(ep.duration), "line " + ep.line].filter(Boolean).join(" · ")),
      (ep.issues || []).length ? h("ul", { class: "issues" }, ep.issues.map((m) => h("li", {}, m))) : null,
      ep.failure ? h("div", { class: "failure" }, "episode failure: " + ep.failure) : null,
      h("div", { class: "question" }, ep.question || ""), optionList(ep),
      h("div", { class: "answer-line" }, h("span", {}, "prediction: ", h("b", { class: "prediction" }, ep.prediction === null || ep.prediction === undefined ? "(no answer)" : ep.prediction)),
        h("span", {}, "ground truth: ", h("b", {}, ep.answer || "")), h("span", { class: "badge " + (ep.correct === true ? "ok" : ep.correct === false ? "no" : "") }, ep.correct === true ? "correct" : ep.correct === false ? "wrong" : "not scored"),
        h("span", {}, "accuracy " + fmt(ep.accuracy)), ep.truncated ? h("span", { class: "badge" }, "truncated") : null),
    ];
    const dynamic = h("div", { class: "dynamic" });
    root.append(...header.filter(Boolean), dynamic);
    const turns = ep.turns || [];
    const curvePoints = [{ pos: 0, coverage: 0, score: 0 }].concat((ep.evidence_curve || []).map((p) => ({ pos: turns.findIndex((t) => t.index === p.turn) + 1, coverage: p.coverage, score: p.score }))).filter((p) => p.pos >= 0);
    const allFrames = turns.flatMap((t) => t.observation.frames);
    let view = null, shownPos = 0; // the timeline's zoom window (null: the whole video)
    const render = (pos) => {
      shownPos = pos;
      const k = Math.min(pos, turns.length);
      const turn = k > 0 ? turns[k - 1] : null;
      const frames = turn ? turn.observation.frames : (ep.initial || { frames: [] }).frames;
      const onZoom = (v) => { view = v; render(shownPos); };
      const tl = timeline({ width: dynamic.clientWidth, end: ep.axis_end, clues: ep.clue_intervals, masked: ep.masked_ranges, initial: (ep.initial || {}).frames, allFrames, calls: ep.calls,
        currentTurn: turn ? turn.index : null, frameTicks: frames, keyFrames: turn && turn.call ? frames : [], view, onZoom, onCall });
      const callList = h("ul", { class: "calls" }, (ep.calls || []).map((c) => h("li", { class: c.rejected ? "rejected" : null, "data-n": c.n, "data-tool": c.tool || "" }, callLine(c, false))));
      const turnView = turn ? h("div", { class: "turn", "data-turn": turn.index },
        h("h3", {}, "assistant · turn " + turn.index + " · " + turn.action.type + (turn.dialect ? " (" + turn.dialect + ")" : "") +
          (turn.forced ? " · forced (the look-on start, not the policy's)" : "")),
        assistantBlock(turn),
        turn.repairs.length ? h("div", { class: "repairs" }, "parse repairs: " + turn.repairs.join("; ")) : null,
        turn.error ? h("div", { class: "turn-error" }, "rejected: " + turn.error) : null,
        h("h3", {}, "observation"), h("div", { class: "observation" }, turn.observation.text),
        framesBlock(frames, "turn " + turn.index), boxView((ep.calls || []).find((c) => c.turn === turn.index)), framePlayer(frames, "turn " + turn.index, () => tl),
        h("div", { class: "meta" }, "evidence after this turn: coverage " + fmt(turn.evidence.coverage) + " · precision " + fmt(turn.evidence.precision) + " · score " + fmt(turn.evidence.score) + (isNum(turn.evidence.gain) ? " · gain " + fmt(turn.evidence.gain, 3) : "")))
        : h("div", { class: "turn", "data-turn": "initial" }, h("h3", {}, "initial prompt"), h("div", { class: "observation" }, (ep.initial || {}).text || ""), framesBlock(frames, "initial"));
      dynamic.replaceChildren(
        h("h3", {}, "timeline"), zoomTools(() => view, ep.axis_end || 1, onZoom), tl,
        h("div", { class: "legend" }, h("span", {}, "green: clue"), h("span", {}, "hatched: masked"), h("span", {}, "blue ticks: initial frames"), h("span", {}, "orange ticks: frames of this turn"), h("span", {}, "span colour: evidence gain (green +, red −)"), h("span", {}, "dashed purple: duplicate · dotted cyan: fragment · red outline: rejected"), h("span", {}, "small frame with a box: a zoom at that time")),
        callList,
        h("div", { class: "side" }, turnView, h("div", {},
          h("h3", {}, "evidence over turns"), evidenceCurve(curvePoints, turns.length + 1, k),
          h("div", { class: "legend" }, h("span", { style: "color:#16a34a" }, "coverage"), h("span", { style: "color:#2563eb" }, "evidence score")),
          h("h3", {}, "reward"), rewardTable(ep),
          groupTable(ep, group) ? [h("h3", {}, "group"), groupTable(ep, group)] : null)));
    };
    return { root, render, positions: turns.length + 1 };
  }

  async function showEpisode(run, ref, params) {
    const data = await api.episode(run, ref);
    const ep = data.episode;
    let other = null;
    if (data.counterpart) {
      try { other = await api.episode(data.counterpart.run, { i: data.counterpart.index }); } catch (err) { other = null; }
    }
    let pos = Math.max(0, parseInt(params.get("turn") || "0", 10) || 0);
    const base = "#/episode/" + encodeURIComponent(run) + "/" + (ref.id !== undefined ? "id/" + encodeURIComponent(ref.id) : ref.i);
    const setPos = (p) => {
      pos = Math.max(0, Math.min(max - 1, p));
      for (const panel of panels) panel.render(pos);
      $("#turn-pos").textContent = pos === 0 ? "start (initial frames)" : "turn " + (pos - 1) + "  (" + pos + " / " + (max - 1) + ")";
      $("#turn-prev").disabled = pos <= 0;
      $("#turn-next").disabled = pos >= max - 1;
      history.replaceState(null, "", base + "?turn=" + pos);
    };
    const onCall = (turnIndex) => { const k = ep.turns.findIndex((t) => t.index === turnIndex); if (k >= 0) setPos(k + 1); };
    const panels = [episodePanel(ep, data.group, onCall)];
    if (other) panels.push(episodePanel(other.episode, other.group, null));
    const max = Math.max(...panels.map((p) => p.positions));
    const stepper = h("div", { class: "stepper" },
      h("a", { href: "#/" }, "← episodes"),
      h("button", { id: "turn-prev", onclick: () => setPos(pos - 1), title: "previous turn (←)" }, "◀ prev"),
      h("span", { class: "pos", id: "turn-pos" }),
      h("button", { id: "turn-next", onclick: () => setPos(pos + 1), title: "next turn (→)" }, "next ▶"),
      h("span", { class: "meta" }, "← / → step through turns" + (other ? "; both runs step together" : "")));
    $("#app").replaceChildren(stepper, h("div", { class: "episode-grid" + (other ? " compare" : ""), id: "episode-grid" }, panels.map((p) => p.root)));
    keyHandler = (d) => setPos(pos + d);
    setPos(pos);
  }

  // ---- training runs ----------------------------------------------------------------------------
  const COLOURS = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#4b5563"];
  const epLink = (key, index) => "#/episode/" + encodeURIComponent(key) + "/" + index;
  const problemsBlock = (problems, id) => (problems || []).length ? h("ul", { class: "issues", id }, problems.map((m) => h("li", {}, m))) : null;

  /* A line chart of one or more series over steps: {title, series: [{name, points: [[step, value]]}], current, onPick(step)} */
  function lineChart(opts) {
    const W = 340, H = 150, L = 44, R = 8, T = 20, B = 20;
    const pts = opts.series.flatMap((se) => se.points.filter((p) => isNum(p[1])));
    const steps = pts.map((p) => p[0]);
    const x0 = Math.min(...steps, opts.current ?? Infinity), x1 = Math.max(...steps, opts.current ?? -Infinity);
    let y0 = Math.min(...pts.map((p) => p[1])), y1 = Math.max(...pts.map((p) => p[1]));
    if (!pts.length) { y0 = 0; y1 = 1; }
    if (y1 - y0 < 1e-12) { if (y0 >= 0 && y0 <= 1) { y0 = 0; y1 = 1; } else { y0 -= 0.5; y1 += 0.5; } }
    const xs = (t) => L + (x1 > x0 ? (t - x0) / (x1 - x0) : 0.5) * (W - L - R);
    const ys = (v) => T + (1 - (v - y0) / (y1 - y0)) * (H - T - B);
    const dig = Math.abs(y1 - y0) < 0.01 ? 4 : 2;
    const svg = s("svg", { class: "chart", viewBox: "0 0 " + W + " " + H, "data-title": opts.title },
      s("text", { x: L, y: 12, class: "chart-title" }, opts.title),
      s("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "chart-axis" }), s("line", { x1: L, x2: L, y1: T, y2: H - B, class: "chart-axis" }),
      s("text", { x: L - 4, y: ys(y1) + 4, "text-anchor": "end" }, y1.toFixed(dig)), s("text", { x: L - 4, y: ys(y0) + 4, "text-anchor": "end" }, y0.toFixed(dig)),
      isFinite(x0) ? [s("text", { x: L, y: H - 5 }, "step " + x0), s("text", { x: W - R, y: H - 5, "text-anchor": "end" }, "step " + x1)] : null,
      isNum(opts.current) && isFinite(x0) ? s("line", { class: "chart-marker", x1: xs(opts.current), x2: xs(opts.current), y1: T, y2: H - B }) : null);
    opts.series.forEach((se, k) => {
      const colour = COLOURS[k % COLOURS.length];
      const good = se.points.filter((p) => isNum(p[1]));
      if (good.length > 1) svg.append(s("path", { class: "chart-line", stroke: colour, d: good.map((p, i) => (i ? "L" : "M") + xs(p[0]).toFixed(1) + " " + ys(p[1]).toFixed(1)).join(" ") }));
      for (const p of good) svg.append(s("circle", { class: "chart-point", cx: xs(p[0]), cy: ys(p[1]), r: 3, fill: colour, "data-series": se.name, "data-step": p[0], "data-value": p[1], onclick: () => opts.onPick && opts.onPick(p[0]) },
        s("title", {}, se.name + " at step " + p[0] + ": " + fmt(p[1], 4))));
    });
    const legend = opts.series.length > 1 ? h("div", { class: "legend" }, opts.series.map((se, k) => h("span", { style: "color:" + COLOURS[k % COLOURS.length] }, se.name))) : null;
    return h("figure", { class: "chart-box" }, svg, legend);
  }

  async function showTraining(run, params) {
    const data = await api.training(run);
    const rows = data.metrics;
    const steps = data.steps;
    const series = (name) => ({ name, points: rows.map((r) => [r.step, r[name]]) });
    const compSeries = data.series.filter((k) => k.startsWith("reward/")).map((k) => ({ name: k.slice(7), points: series(k).points }));
    // push/calls/<term>: which reward term makes GRPO favour more tool calls (+) or fewer (-)
    const pushSeries = data.series.filter((k) => k.startsWith("push/calls/")).map((k) => ({ name: k.slice(11), points: series(k).points }));
    let step = parseInt(params.get("step") || "", 10);
    if (!steps.includes(step)) step = steps.length ? steps[steps.length - 1] : null;
    const charts = h("div", { class: "charts", id: "training-charts" });
    const stepPanel = h("div", { id: "step-panel" });
    const charted = ["reward", "accuracy", "kl", "entropy", "look_on"]; // look_on: envs/metrics.py look_on_rate (steps without a counted episode have no point)
    const extra = h("select", { id: "extra-series" }, [h("option", { value: "" }, "another series…")].concat(data.series.filter((k) => !charted.includes(k) && !k.startsWith("reward/") && !k.startsWith("push/calls/")).map((k) => h("option", { value: k }, k))));
    const drawCharts = () => {
      const pick = (st) => { if (steps.includes(st)) setStep(st); };
      const list = charted.filter((k) => data.series.includes(k)).map((k) => lineChart({ title: k, series: [series(k)], current: step, onPick: pick }));
      if (compSeries.length) list.push(lineChart({ title: "reward components (unweighted means)", series: compSeries, current: step, onPick: pick }));
      if (pushSeries.length) list.push(lineChart({ title: "push on tool calls by term (+ more, - fewer)", series: pushSeries, current: step, onPick: pick }));
      if (extra.value) list.push(lineChart({ title: extra.value, series: [series(extra.value)], current: step, onPick: pick }));
      charts.replaceChildren(...(list.length ? list : [h("p", { class: "notice" }, "no metrics yet (" + data.path + "/metrics.jsonl)")]));
    };
    extra.addEventListener("change", drawCharts);
    const slider = h("input", { type: "range", id: "step-slider", min: steps[0] ?? 0, max: steps[steps.length - 1] ?? 0, step: 1, value: step ?? 0, disabled: !steps.length });
    const sliderLabel = h("span", { id: "step-label", class: "pos" });
    let seq = 0;
    const setStep = async (st) => {
      if (!steps.length) return;
      // snap to the nearest step that has rollouts
      st = steps.reduce((best, x) => (Math.abs(x - st) < Math.abs(best - st) ? x : best), steps[0]);
      step = st;
      slider.value = st;
      sliderLabel.textContent = "step " + st;
      history.replaceState(null, "", "#/training/" + run + "?step=" + st);
      drawCharts();
      const mine = ++seq;
      const sd = await api.step(run, st);
      if (mine !== seq) return;
      stepPanel.replaceChildren(stepView(sd));
    };
    slider.addEventListener("input", () => setStep(Number(slider.value)));
    const reward = data.reward;
    const rewardLine = reward ? h("div", { class: "meta", id: "training-reward" }, "reward preset " + reward.preset + ": " +
      Object.entries(reward.weights).map(([k, w]) => k + " × " + fmt(w, 2)).join(", ") + gatesText(reward.gates) + " (" + reward.source + ")") : null;
    $("#app").replaceChildren(h("section", { class: "panel", id: "training" },
      h("h2", {}, "Training run " + run + ": " + data.path),
      h("div", { class: "meta", id: "metrics-source" }, rows.length + " steps in " + (data.metrics_source || "metrics.jsonl") + " · " + steps.length + " with rollouts · " + data.probe_steps.length + " probe evaluations"),
      rewardLine, problemsBlock(data.problems, "training-problems"), charts, h("div", { class: "stepper" }, h("label", {}, "step ", slider), sliderLabel, extra)),
      stepPanel, probeGrid(run, data));
    drawCharts();
    if (step !== null) await setStep(step); else stepPanel.replaceChildren(h("p", { class: "notice" }, "no step folders under " + data.path + "/rollouts yet"));
  }

  function metricLine(m) {
    if (!m) return h("p", { class: "meta" }, "this step has no line in metrics.jsonl");
    const keys = ["reward", "accuracy", "coverage", "calls", "loss", "kl", "entropy", "grad_norm", "policy_tokens", "episodes"].filter((k) => k in m);
    return h("table", { class: "group metric-line", id: "step-metrics" }, h("tr", {}, keys.map((k) => h("th", {}, k))), h("tr", {}, keys.map((k) => h("td", { class: "num", "data-key": k }, fmt(m[k], k === "policy_tokens" || k === "episodes" ? 0 : 4)))));
  }

  function chip(key, r) {
    return h("a", { class: "chip" + (r.correct === true ? " ok-bg" : ""), href: epLink(key, r.index), "data-episode": r.episode_id, title: r.episode_id + (r.prediction ? " · answer " + r.prediction : " · no answer") },
      verdict(r.correct), " r=" + fmt(r.reward, 3) + " A=" + fmt(r.advantage, 2));
  }

  function stepView(sd) {
    const groups = sd.groups;
    return h("section", { class: "panel", id: "step-view", "data-step": sd.step },
      h("h2", {}, "Step " + sd.step), metricLine(sd.metrics), problemsBlock(sd.problems, "step-problems"),
      h("div", { class: "meta" }, (sd.grpo ? "advantages and group statistics as the update used them (grpo.json" + (sd.norm_adv_by_std === false ? ", not divided by std" : "") + ")" : "no grpo.json: group mean / std recomputed from the trajectories, advantages as the rollout recorded them") +
        (sd.tokens ? " · per-token data recorded" : "") + " · ", h("a", { href: "#/?run=" + encodeURIComponent(sd.key) }, "all episodes of this step")),
      h("table", { class: "group groups", id: "groups-table" },
        h("tr", {}, h("th", {}, "group"), h("th", {}, "question"), h("th", {}, "n"), h("th", {}, "mean"), h("th", {}, "std"), h("th", {}, "rollouts (reward, advantage)")),
        groups.map((g) => h("tr", { "data-group": g.id },
          h("td", {}, h("a", { class: "group-link", href: "#/group/" + encodeURIComponent(sd.key) + "/" + encodeURIComponent(g.id) }, g.id)),
          h("td", { class: "question" }, (g.question || "").slice(0, 90)), h("td", { class: "num" }, g.n), h("td", { class: "num" }, fmt(g.mean, 3)), h("td", { class: "num" }, fmt(g.std, 3)),
          h("td", {}, g.rollouts.map((r) => chip(sd.key, r)), g.perturbed.length ? h("span", { class: "meta" }, " + " + g.perturbed.length + " perturbed") : null)))));
  }

  function probeGrid(run, data) {
    if (!data.probe_steps.length) return h("section", { class: "panel", id: "probes" }, h("h2", {}, "Probes"), h("p", { class: "meta" }, "No probe evaluations in this run. Train with --probe-every N (and --probe-data) to evaluate the same questions greedily every N steps."));
    const from = h("select", { id: "probe-from" }, data.probe_steps.map((st, k) => h("option", { value: st, selected: k === 0 }, "step " + st)));
    const to = h("select", { id: "probe-to" }, data.probe_steps.map((st, k) => h("option", { value: st, selected: k === data.probe_steps.length - 1 }, "step " + st)));
    return h("section", { class: "panel", id: "probes" }, h("h2", {}, "Probes: the same questions across steps (greedy)"),
      h("table", { class: "group probe-grid", id: "probe-grid" },
        h("tr", {}, h("th", {}, "question"), data.probe_steps.map((st) => h("th", {}, "step " + st))),
        data.probes.map((q) => h("tr", { "data-sample": q.sample_id },
          h("td", {}, h("a", { class: "probe-link", href: "#/probe/" + run + "/" + encodeURIComponent(q.sample_id) }, q.sample_id), h("div", { class: "meta" }, (q.question || "").slice(0, 80))),
          data.probe_steps.map((st) => {
            const c = q.cells[String(st)];
            return c ? h("td", { class: "link", "data-step": st, onclick: () => { location.hash = epLink(run + "@p" + st, c.index); } }, verdict(c.correct), " " + fmt(c.reward, 3), h("div", { class: "meta" }, (c.prediction === null ? "no answer" : "answer " + c.prediction) + " · " + c.calls + " calls")) : h("td", { class: "na" }, "–");
          })))),
      h("div", { class: "stepper" }, "compare probe steps ", from, " − ", to, h("button", { id: "probe-compare", onclick: () => { location.hash = "#/compare?a=" + encodeURIComponent(run + "@p" + to.value) + "&b=" + encodeURIComponent(run + "@p" + from.value); } }, "compare (later − earlier)")));
  }

  async function showGroup(key, gid) {
    const m = /^(A|B)@s(\d+)$/.exec(key);
    if (!m) throw new Error("group view: " + key + " is not a training step (such as A@s1)");
    const sd = await api.step(m[1], Number(m[2]));
    const g = sd.groups.find((x) => x.id === gid);
    if (!g) throw new Error("step " + sd.step + " has no group " + gid);
    const rewards = g.rollouts.map((r) => r.reward).filter(isNum);
    const scale = Math.max(1e-9, ...rewards.map(Math.abs));
    const norm = (r) => (isNum(r.reward) && isNum(g.mean) && isNum(g.std) ? (r.reward - g.mean) / (g.std + 1e-6) : null);
    const row = (r) => h("tr", { "data-episode": r.episode_id, "data-reward": isNum(r.reward) ? r.reward : "", "data-advantage": isNum(r.advantage) ? r.advantage : "" },
      h("td", {}, isNum(r.group_index) ? r.group_index : "–"), h("td", {}, h("a", { href: epLink(key, r.index) }, r.episode_id)), h("td", {}, verdict(r.correct)),
      h("td", {}, r.prediction === null ? h("span", { class: "na" }, "no answer") : r.prediction),
      h("td", { class: "num" }, fmt(r.reward, 4), " ", h("span", { class: "bar" + ((r.reward || 0) < 0 ? " neg" : ""), style: "width:" + Math.round((Math.abs(r.reward || 0) / scale) * 60) + "px" })),
      h("td", { class: "num" }, fmt(norm(r), 3)), h("td", { class: "num adv" }, fmt(r.advantage, 3)),
      h("td", { class: "num" }, r.tokens.total ?? "–"), h("td", { class: "num" }, r.tokens.assistant ?? "–"), h("td", { class: "num" }, r.tokens.tool ?? "–"), h("td", { class: "num" }, r.tokens.vision ?? "–"),
      h("td", {}, r.trained ? h("a", { class: "tokens-link", href: "#/tokens/" + encodeURIComponent(key) + "/" + encodeURIComponent(r.episode_id) }, "tokens") : h("span", { class: "na" }, "not trained")));
    $("#app").replaceChildren(h("section", { class: "panel", id: "group-view", "data-group": g.id },
      h("div", { class: "meta" }, h("a", { href: "#/training/" + m[1] + "?step=" + sd.step }, "← training step " + sd.step)),
      h("h2", {}, "Group " + g.id + " · step " + sd.step), h("div", { class: "question" }, g.question || ""),
      h("div", { class: "answer-line", id: "group-stats" }, h("span", {}, "n ", h("b", {}, g.n)), h("span", {}, "mean ", h("b", { id: "group-mean" }, fmt(g.mean, 4))), h("span", {}, "std ", h("b", { id: "group-std" }, fmt(g.std, 4))),
        h("span", { class: "meta" }, "from " + g.stats_from + "; advantage A = (r − mean) / (std + 1e-6)" + (sd.norm_adv_by_std === false ? " (here without the std)" : "") + ", 0 for a group of one")),
      h("table", { class: "group", id: "group-rollouts" },
        h("tr", {}, ["g", "episode", "", "answer", "reward", "(r − mean) / std", "advantage", "tokens", "assistant", "tool", "vision", ""].map((t) => h("th", {}, t))),
        g.rollouts.map(row)),
      g.perturbed.length ? [h("h3", {}, "perturbed episodes (shape the reward, not trained)"), h("table", { class: "group" }, g.perturbed.map((r) => h("tr", {}, h("td", {}, h("a", { href: epLink(key, r.index) }, r.episode_id)), h("td", {}, verdict(r.correct)), h("td", { class: "num" }, fmt(r.reward, 3)))))] : null));
  }

  async function showTokens(key, episodeId) {
    const t = await api.tokens(key, episodeId);
    const total = t.segments.reduce((a, sg) => a + sg.n, 0) || 1;
    const counts = t.counts || {};
    const colourOf = (lp) => (isNum(lp) ? "hsl(" + Math.round(120 * Math.exp(lp)) + ", 70%, 82%)" : "#e5e7eb");
    const segView = (sg, k) => {
      const head = h("div", { class: "seg-head" }, sg.kind + " · " + sg.n + " tokens");
      if (sg.pieces) {
        const toks = sg.pieces.map((p, i) => {
          const lp = sg.logprobs ? sg.logprobs[i] : null;
          const tip = "logprob " + fmt(lp, 3) + (sg.ref_logprobs ? " · ref " + fmt(sg.ref_logprobs[i], 3) : "") + (sg.entropy ? " · entropy " + fmt(sg.entropy[i], 2) : "");
          return h("span", { class: "tok", "data-logprob": isNum(lp) ? lp : "", style: "background:" + colourOf(lp), title: tip }, p.replace(/\n/g, "↵\n"));
        });
        const lps = (sg.logprobs || []).filter(isNum);
        return h("div", { class: "segment assistant-seg", "data-kind": sg.kind, "data-n": sg.n }, head, h("div", { class: "tokens" }, toks),
          lps.length ? h("div", { class: "meta" }, "mean log-prob " + fmt(lps.reduce((a, b) => a + b, 0) / lps.length, 3) + " · min " + fmt(Math.min(...lps), 3)) : null);
      }
      const text = sg.text === undefined ? null : h("pre", { class: "seg-text" }, sg.text);
      return h("div", { class: "segment", "data-kind": sg.kind, "data-n": sg.n }, text && sg.kind === "prompt" ? h("details", {}, h("summary", {}, head), text) : [head, text]);
    };
    $("#app").replaceChildren(h("section", { class: "panel", id: "token-view", "data-episode": t.episode_id },
      h("div", { class: "meta" }, h("a", { href: "#/training/" + t.training_run + "?step=" + t.step }, "← training step " + t.step), " · ",
        h("a", { href: "#/group/" + encodeURIComponent(key) + "/" + encodeURIComponent(t.group_id) }, "group " + t.group_id), " · ", h("a", { href: epLink(key, t.index) }, "episode")),
      h("h2", {}, "Tokens of " + t.episode_id),
      h("div", { class: "answer-line" }, h("span", {}, "reward ", h("b", {}, fmt(t.reward, 4))), h("span", {}, "advantage ", h("b", { id: "token-advantage" }, fmt(t.advantage, 4))),
        h("span", {}, "group mean " + fmt(t.group_mean, 4) + " · std " + fmt(t.group_std, 4))),
      h("table", { class: "group", id: "token-counts" }, h("tr", {}, ["total", "prompt", "assistant (trained)", "tool", "tail", "vision"].map((k) => h("th", {}, k))),
        h("tr", {}, ["total", "prompt", "assistant", "tool", "tail", "vision"].map((k) => h("td", { class: "num", "data-key": k }, counts[k] ?? "–")))),
      h("h3", {}, "loss mask"),
      h("div", { class: "mask-bar", id: "mask-bar" }, t.segments.map((sg) => h("span", { class: "mask-" + sg.kind, "data-kind": sg.kind, style: "flex-grow:" + sg.n + ";flex-basis:0", title: sg.kind + ": " + sg.n + " tokens (" + Math.round((100 * sg.n) / total) + "%)" }))),
      h("div", { class: "legend" }, h("span", { class: "mask-key mask-prompt" }, "prompt (not trained)"), h("span", { class: "mask-key mask-assistant" }, "assistant: the policy's sampled tokens (mask 1)"), h("span", { class: "mask-key mask-tool" }, "tool answers + template (not trained)"), h("span", { class: "mask-key mask-tail" }, "tail")),
      t.note ? h("p", { class: "notice", id: "token-note" }, t.note) : h("div", { class: "legend" }, "token colour: probability at sampling, exp(log-prob), red 0 → green 1; hover for log-prob, reference log-prob and entropy"),
      h("h3", {}, "segments"), h("div", { id: "token-segments" }, t.segments.map(segView))));
  }

  async function showProbe(run, sample) {
    const p = await api.probe(run, sample);
    const card = (c) => {
      if (c.missing) return h("div", { class: "probe-card missing", "data-step": c.step }, h("h3", {}, "step " + c.step), h("p", { class: "meta" }, "not evaluated"));
      const holder = h("div", { class: "probe-tl" });
      holder.append(timeline({ width: 300, end: c.duration || 1, clues: c.clue_intervals, calls: c.calls, initial: [], currentTurn: null, frameTicks: [] }));
      return h("div", { class: "probe-card", "data-step": c.step, "data-correct": String(c.correct) },
        h("h3", {}, h("a", { href: epLink(c.key, c.index) }, "step " + c.step)),
        h("div", { class: "answer-line" }, verdict(c.correct), h("span", {}, "answer ", h("b", { class: "prediction" }, c.prediction === null ? "(none)" : c.prediction)), h("span", {}, "reward " + fmt(c.reward, 3))),
        h("div", { class: "meta" }, Object.entries(c.reward_components || {}).map(([k, v]) => k + " " + fmt(v, 2)).join(" · ")),
        c.problem ? h("div", { class: "issues" }, c.problem) : null, holder,
        (c.turns || []).map((text, k) => h("div", { class: "assistant probe-turn" }, h("span", { class: "meta" }, "turn " + k + ": "), text.length > 300 ? text.slice(0, 300) + "…" : text)));
    };
    $("#app").replaceChildren(h("section", { class: "panel", id: "probe-view", "data-sample": p.sample_id },
      h("div", { class: "meta" }, h("a", { href: "#/training/" + run }, "← training")),
      h("h2", {}, "Probe " + p.sample_id + " across steps"), h("div", { class: "question" }, p.question), h("div", { class: "meta" }, "ground truth: " + p.answer),
      h("div", { class: "probe-cards", id: "probe-cards" }, p.steps.map(card))));
  }

  async function showCompare(params) {
    const a = params.get("a") || "A", b = params.get("b") || "B";
    const c = await api.compare(a, b);
    const A = c.runs[a], B = c.runs[b];
    const dcell = (d, digits = 3) => h("td", { class: "num delta " + (isNum(d) && d > 1e-12 ? "pos" : isNum(d) && d < -1e-12 ? "neg" : "") }, isNum(d) ? (d > 0 ? "+" : "") + d.toFixed(digits) : "–");
    const metric = (name, key) => h("tr", { "data-metric": key }, h("td", {}, name), h("td", { class: "num" }, fmt(A[key], 3)), h("td", { class: "num" }, fmt(B[key], 3)), dcell(c.delta[key]));
    const comps = Object.keys(c.delta.components);
    const qs = c.questions.slice().sort((x, y) => Math.abs(y.d_reward ?? -1) - Math.abs(x.d_reward ?? -1));
    $("#app").replaceChildren(h("section", { class: "panel", id: "compare-view" },
      h("h2", {}, "Compare " + a + " − " + b),
      h("div", { class: "meta" }, a + ": " + c.paths[a] + " · " + b + ": " + c.paths[b] + " (origin episodes; perturbed ones left out)"),
      h("table", { class: "group", id: "compare-overall" }, h("tr", {}, h("th", {}, ""), h("th", {}, a), h("th", {}, b), h("th", {}, a + " − " + b)),
        h("tr", { "data-metric": "episodes" }, h("td", {}, "episodes / questions"), h("td", { class: "num" }, A.episodes + " / " + A.questions), h("td", { class: "num" }, B.episodes + " / " + B.questions), h("td", {})),
        metric("accuracy", "accuracy"), metric("mean reward", "reward"), metric("coverage", "coverage"), metric("tool calls", "calls"), metric("turns", "turns"), metric("answered", "answered"),
        comps.map((k) => h("tr", { "data-metric": "component:" + k }, h("td", {}, "reward/" + k), h("td", { class: "num" }, fmt(A.components[k], 3)), h("td", { class: "num" }, fmt(B.components[k], 3)), dcell(c.delta.components[k])))),
      h("p", { id: "compare-paired" }, "paired by question (" + c.paired.questions + " in both): mean Δ reward ", h("b", {}, isNum(c.paired.d_reward) ? (c.paired.d_reward > 0 ? "+" : "") + c.paired.d_reward.toFixed(3) : "–"),
        ", mean Δ accuracy " + (isNum(c.paired.d_accuracy) ? (c.paired.d_accuracy > 0 ? "+" : "") + c.paired.d_accuracy.toFixed(3) : "–") + "; " + a + " better on " + c.paired.a_better + ", " + b + " better on " + c.paired.b_better),
      h("h3", {}, "per question (largest |Δ reward| first)"),
      h("table", { class: "group", id: "compare-questions" },
        h("tr", {}, ["question", a + " acc", a + " reward", b + " acc", b + " reward", "Δ acc", "Δ reward"].map((t) => h("th", {}, t))),
        qs.map((q) => h("tr", { "data-sample": q.sample_id },
          h("td", {}, q.sample_id, h("div", { class: "meta" }, (q.question || "").slice(0, 70))),
          q.a ? [h("td", { class: "num link", onclick: () => { location.hash = epLink(a, q.a.first); } }, fmt(q.a.accuracy, 2)), h("td", { class: "num" }, fmt(q.a.reward, 3))] : [h("td", { class: "na" }, "–"), h("td", { class: "na" }, "–")],
          q.b ? [h("td", { class: "num link", onclick: () => { location.hash = epLink(b, q.b.first); } }, fmt(q.b.accuracy, 2)), h("td", { class: "num" }, fmt(q.b.reward, 3))] : [h("td", { class: "na" }, "–"), h("td", { class: "na" }, "–")],
          dcell(q.d_accuracy, 2), dcell(q.d_reward))))));
  }

  // ---- a folder of runs: pick one, or two to compare ------------------------------------------------
  async function showRuns(parent) {
    if (!parent) {
      $("#app").replaceChildren(h("p", { class: "notice" }, "The viewer was started on a run, not on a folder of runs."));
      return;
    }
    const pick = async (a, b) => {
      try {
        runsInfo = await api.select(a, b || "");
      } catch (err) { $("#runs-error").textContent = err.message; return; }
      const [ra, rb] = runsInfo.runs;
      // two training runs compare on their last steps' rollouts; evaluation runs open side by side in the list
      const target = !b ? (ra.training ? "#/training/A" : "#/") : ra.training && rb.training ? "#/compare?a=A@s" + ra.last_step + "&b=B@s" + rb.last_step : "#/";
      if (location.hash === target) route(); else location.hash = target;
    };
    const chosen = () => ({ a: (document.querySelector("input[name=run-a]:checked") || {}).value, b: (document.querySelector("input[name=run-b]:checked") || {}).value });
    const what = (r) => r.training ? "training run · " + r.steps + " steps with rollouts" + (r.probes ? " · " + r.probes + " probe steps" : "") : r.episodes + " episodes" + (r.status ? " · " + r.status : "");
    const compareBtn = h("button", { id: "runs-compare", disabled: true, onclick: () => { const c = chosen(); pick(c.a, c.b); } }, "compare A with B");
    const update = () => { const c = chosen(); compareBtn.disabled = !(c.a && c.b && c.a !== c.b); };
    const cur = parent.selected;
    $("#app").replaceChildren(h("section", { class: "panel", id: "runs-view" },
      h("h2", {}, "Runs in " + parent.path),
      h("p", { class: "meta" }, "Open one run, or mark A and B and compare them (two evaluation runs on the same samples: side by side; two training runs: the compare view of their last steps' rollouts)."),
      h("table", { class: "group", id: "runs-table" },
        h("tr", {}, ["run", "what", "A", "B", ""].map((t) => h("th", {}, t))),
        parent.runs.map((r, k) => h("tr", { "data-run": r.name },
          h("td", {}, h("b", {}, r.name)), h("td", { class: "meta" }, what(r)),
          h("td", {}, h("input", { type: "radio", name: "run-a", value: r.name, checked: cur.length ? cur[0] === r.name : k === 0, onchange: update })),
          h("td", {}, h("input", { type: "radio", name: "run-b", value: r.name, checked: cur[1] === r.name, onchange: update })),
          h("td", {}, h("button", { class: "primary run-open", onclick: () => pick(r.name) }, "open"))))),
      h("div", { class: "stepper" }, compareBtn, h("span", { class: "no", id: "runs-error" }))));
    update();
  }

  // ---- play mode --------------------------------------------------------------------------------
  async function showPlay() {
    if (api.static) {
      $("#app").replaceChildren(h("p", { class: "notice" }, "Play mode needs the viewer server (videoseek view RUN --data samples.jsonl)."));
      return;
    }
    if (!runsInfo.play.available) {
      $("#app").replaceChildren(h("p", { class: "notice", id: "play-unavailable" }, "Play mode is unavailable: " + runsInfo.play.reason));
      return;
    }
    const { samples, path } = await api.playSamples();
    const chooser = h("select", { id: "play-sample" }, samples.map((smp) => h("option", { value: smp.id }, smp.id + " — " + smp.question.slice(0, 80))));
    const area = h("div", { id: "play-area" });
    $("#app").replaceChildren(h("section", { class: "panel" }, h("h2", {}, "Play: act as the agent"),
      h("p", { class: "meta" }, samples.length + " samples from " + path + ". Call the env's tools: drag on the timeline to fill a tool's start and end (or its time), drag a box on a frame to fill a tool's box and time, or type the arguments; answer when ready. The episode is saved as a trajectory (policy \"human\")."),
      h("div", { class: "stepper" }, chooser, h("button", { class: "primary", id: "play-start", onclick: () => startPlay(chooser.value, area) }, "start episode"))), area);
  }

  // A form for one of the env's tools (an OpenAI function schema of info["tools"]): an input per
  // parameter, read back as the call's arguments. Gestures fill parameters by their names.
  function toolForm(schema, onCall) {
    const fn = schema.function || schema;
    const params = fn.parameters || {};
    const required = params.required || [];
    const inputs = {};
    const fields = Object.entries(params.properties || {}).map(([name, p]) => {
      const attrs = { name, "data-tool": fn.name, "data-param": name };
      const el = p.type === "number" || p.type === "integer" ? h("input", Object.assign(attrs, { type: "number", step: p.type === "integer" ? 1 : "any" }))
        : p.type === "boolean" ? h("input", Object.assign(attrs, { type: "checkbox" }))
        : h("input", Object.assign(attrs, { type: "text", class: p.type === "array" ? "arg-list" : "arg-text",
          placeholder: p.type === "array" ? ((p.items || {}).type === "number" ? "numbers, comma-separated" : "a JSON list") : p.type === "string" ? "" : "JSON" }));
      inputs[name] = { el, p };
      return h("label", { title: p.description || "" }, name + (required.includes(name) ? "" : " (optional)"), el);
    });
    // The arguments as typed; an empty field is left out (the env names a missing required one).
    const read = () => {
      const args = {};
      for (const [name, { el, p }] of Object.entries(inputs)) {
        if (p.type === "boolean") { args[name] = el.checked; continue; }
        const v = el.value.trim();
        if (v === "") continue;
        if (p.type === "number" || p.type === "integer") args[name] = Number(v);
        else if (p.type === "string") args[name] = v;
        else if (p.type === "array" && (p.items || {}).type === "number" && !v.startsWith("[")) args[name] = v.split(/[\s,]+/).filter(Boolean).map(Number);
        else {
          try { args[name] = JSON.parse(v); } catch (err) { throw new Error(fn.name + " argument " + name + ": not JSON (" + v.slice(0, 40) + ")"); }
        }
      }
      return args;
    };
    const button = h("button", { class: "primary play-call", "data-tool": fn.name, title: fn.description || "", onclick: () => onCall(fn.name, read) }, fn.name);
    return {
      name: fn.name, button, has: (name) => name in inputs,
      set(name, value) { if (inputs[name]) inputs[name].el.value = value; },
      root: h("div", { class: "play-row play-tool", "data-tool": fn.name }, fields, button),
    };
  }

  async function startPlay(sampleId, area) {
    let st;
    try { st = await api.playStart(sampleId); } catch (err) { area.replaceChildren(h("div", { class: "error-banner", id: "play-error" }, err.message)); return; }
    // coverage, evidence score, each span's gain and each box's IoU come from the answer key: the
    // server sends them only when the episode has ended, and the page shows them from then on
    const state = { sel: null, calls: [], turns: [], evidence: null, showClues: false, done: false, allFrames: [] };
    const thinkIn = h("input", { type: "text", id: "play-think", placeholder: "optional reasoning, sent as <think>" });
    const answerIn = h("input", { type: "text", id: "play-answer", placeholder: st.options ? "option letter" : "answer" });
    const tools = st.tools || [];
    const first = tools.length ? (tools[0].function || tools[0]).name : null;
    const rawIn = h("textarea", { id: "play-raw", rows: 2, cols: 60, placeholder: first ? "<tool_call>{\"name\": \"" + first + "\", \"arguments\": {...}}</tool_call>" : "<answer>...</answer>" });
    const tlHolder = h("div", { id: "play-timeline" });
    const status = h("div", { class: "meta", id: "play-status" });
    const log = h("div", { id: "play-log" });
    const message = h("div", { id: "play-message" });
    const showError = (text) => message.replaceChildren(h("div", { class: "error-banner", id: "play-error" }, text));
    const controls = [];
    const send = async (action) => {
      if (state.done) return;
      controls.forEach((c) => (c.disabled = true));
      let out;
      try { out = await api.playStep(st.session, action); } catch (err) { showError(err.message); controls.forEach((c) => (c.disabled = false)); return; }
      message.replaceChildren();
      thinkIn.value = ""; // each turn's reasoning is its own
      state.turns.push(out);
      state.allFrames = state.allFrames.concat(out.frames);
      state.calls = out.calls || state.calls; // every call so far, drawn as the episode page draws them
      const call = state.calls.find((c) => c.turn === out.turn);
      const fullFrames = !(call && !call.rejected && call.box); // a region's frame is not a whole frame to draw a box on
      log.append(h("div", { class: "play-turn", "data-turn": out.turn }, h("div", { class: "meta" }, "turn " + out.turn + " · " + (out.action.name || out.action.type)),
        h("div", { class: "assistant" }, out.assistant), out.repairs.length ? h("div", { class: "repairs" }, "parse repairs: " + out.repairs.join("; ")) : null,
        out.error ? h("div", { class: "turn-error" }, "rejected: " + out.error) : null, h("div", { class: "observation" }, out.text),
        out.frames.length ? framesBlock(out.frames, "turn " + out.turn, fullFrames ? onBox : null) : null, boxView(call)));
      if (out.terminated || out.truncated) {
        state.done = true;
        state.evidence = out.evidence;
        st.clue_intervals = out.clue_intervals || st.clue_intervals; state.cluesFetched = true;
        const saved = out.saved || {};
        message.replaceChildren(h("section", { class: "panel", id: "play-result" }, h("h2", {}, out.terminated ? "Answered" : "Turn budget spent"),
          h("div", { class: "answer-line" }, h("span", {}, "your answer: ", h("b", {}, out.prediction === null ? "(none)" : out.prediction)), h("span", {}, "ground truth: ", h("b", {}, out.answer)),
            h("span", { class: "badge " + (out.correct ? "ok" : "no"), id: "play-verdict" }, out.correct ? "correct" : "wrong"), h("span", {}, "reward ", h("b", { id: "play-reward" }, fmt(out.reward, 3)))),
          rewardTable({ reward_components: out.reward_components, reward: out.reward, advantage: null }),
          h("ul", { class: "calls", id: "play-calls" }, state.calls.map((c) => h("li", { class: c.rejected ? "rejected" : null, "data-n": c.n }, callLine(c, false)))),
          saved.ok ? h("p", {}, "Saved to " + saved.path + " · ", h("a", { id: "play-open-saved", href: "#/episode/play/id/" + encodeURIComponent(saved.episode_id) }, "open the saved episode"))
            : h("div", { class: "error-banner" }, saved.error || "not saved")));
        runsInfo = null; // the play run has grown
      } else {
        controls.forEach((c) => (c.disabled = false));
      }
      drawTl(); drawStatus();
    };
    const onCall = (name, read) => {
      let args;
      try { args = read(); } catch (err) { showError(err.message); return; }
      send({ type: "tool_call", name, arguments: args, think: thinkIn.value });
    };
    const forms = tools.map((schema) => toolForm(schema, onCall));
    controls.push(...forms.map((f) => f.button));
    // the gestures fill the tools' parameters by name: a timeline drag gives start and end (a tool
    // with a time but no span gets the drag's middle), a box dragged on a frame gives box and time
    const onDrag = (a, b) => {
      state.sel = [a, b];
      for (const f of forms) {
        if (f.has("start") && f.has("end")) { f.set("start", a.toFixed(1)); f.set("end", b.toFixed(1)); } else if (f.has("time") && !f.has("box")) f.set("time", ((a + b) / 2).toFixed(2));
      }
    };
    const boxForms = forms.filter((f) => f.has("box") && f.has("time"));
    const onBox = boxForms.length ? (box, frame) => { for (const f of boxForms) { f.set("box", box.join(", ")); f.set("time", frame.t); } } : null;
    // the clue intervals are the answer key: fetched only when the player asks to see them (the saved episode records it) or at the end
    st.clue_intervals = [];
    const clues = h("input", { type: "checkbox", id: "play-show-clues", disabled: !st.has_clues, onchange: async () => {
      state.showClues = clues.checked;
      if (clues.checked && !state.cluesFetched) {
        try { st.clue_intervals = (await api.playClues(st.session)).clue_intervals; state.cluesFetched = true; } catch (err) { showError(err.message); }
      }
      drawTl();
    } });
    const tlZoom = h("div", { id: "play-zoom" });
    const drawTl = () => tlZoom.replaceChildren(zoomTools(() => state.view, st.duration, (v) => { state.view = v; drawTl(); })) || tlHolder.replaceChildren(timeline({
      width: tlHolder.clientWidth, end: st.duration, clues: st.clue_intervals, showClues: state.showClues, initial: st.frames, allFrames: state.allFrames, calls: state.calls, currentTurn: null,
      selection: state.sel, frameTicks: [], hideGain: !state.done, view: state.view, onZoom: (v) => { state.view = v; drawTl(); }, onDrag: state.done ? null : onDrag,
    }));
    const drawStatus = () => {
      status.textContent = "turn " + state.turns.length + " of at most " + st.max_turns +
        (state.evidence ? " · coverage " + fmt(state.evidence.coverage) + " · evidence score " + fmt(state.evidence.score) : " · coverage and evidence score are shown once you answer");
    };
    const answerBtn = h("button", { class: "primary", id: "play-answer-btn", onclick: () => send({ type: "answer", text: answerIn.value, think: thinkIn.value }) }, "answer");
    const rawBtn = h("button", { id: "play-raw-btn", onclick: () => send({ type: "text", text: rawIn.value }) }, "send raw text");
    controls.push(answerBtn, rawBtn);
    const optionButtons = (st.options || []).map((o) => { const b = h("button", { class: "option", onclick: () => { answerIn.value = (/^\s*([A-Z])/.exec(o) || [, o])[1]; } }, o); controls.push(b); return b; });
    area.replaceChildren(h("section", { class: "panel", id: "play-episode", "data-session": st.session },
      h("h2", {}, st.sample_id + " · " + st.problem_type), h("div", { class: "question" }, st.question), (st.options || []).length ? h("ol", { class: "options" }, st.options.map((o) => h("li", {}, o))) : null,
      h("h3", {}, "initial frames" + (onBox ? " (drag a box on a frame to zoom there)" : "")), framesBlock(st.frames, "initial", onBox),
      h("h3", {}, "timeline (drag to select a span)"), tlZoom, tlHolder, h("label", { class: "meta" }, clues, " show clue intervals"), status,
      h("div", { class: "play-row" }, h("label", {}, "reasoning (optional)", thinkIn)),
      h("h3", {}, tools.length ? "tools" : "no tools in this env: answer from the frames"), h("div", { class: "play-tools", id: "play-tools" }, forms.map((f) => f.root)),
      h("div", { class: "play-row" }, h("label", {}, "answer", answerIn), optionButtons, answerBtn),
      h("details", {}, h("summary", {}, "raw assistant text"), rawIn, rawBtn), message, h("h3", {}, "turns"), log));
    drawTl(); drawStatus();
  }

  route();
})();
