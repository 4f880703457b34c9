"use strict";
(function () {
  const base = location.pathname;
  const $ = (id) => document.getElementById(id);
  const svgNS = "http://www.w3.org/2000/svg";
  const W = 176, H = 80, GX = 44, GY = 26;
  let runId = null, topo = null, layout = "builtin", svgAt = 0, svgFinal = false, last = null;

  function esc(s) { return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c])); }
  function dur(ns) {
    if (!ns) return "0";
    const s = ns / 1e9;
    if (s >= 60) return (s / 60).toFixed(1) + " min";
    if (s >= 1) return s.toFixed(2) + " s";
    if (s >= 1e-3) return (s * 1e3).toFixed(1) + " ms";
    return (s * 1e6).toFixed(0) + " µs";
  }
  function num(n) { return (n || 0).toLocaleString("en-US"); }
  function busy(t) { return (t.Copies || []).filter((c) => c.State === "executing").length; }
  // workers names a remote task's workers with the inputs each ran.
  function workers(t) {
    return (t.Workers || []).map((w) => `${w.Host ? w.Worker + "@" + w.Host : w.Worker} ×${num(w.Items)}`).join(", ") || "no input yet";
  }
  function el(tag, attrs, parent) {
    const e = document.createElementNS(svgNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  async function getJSON(q) {
    const r = await fetch(base + "?format=" + q, { cache: "no-store" });
    if (!r.ok) throw new Error(q + ": " + r.status);
    return r.json();
  }

  async function loadTopology() {
    topo = await getJSON("topology");
    $("layoutbox").hidden = !topo.dot;
    layout = topo.dot && $("layout").value !== "builtin" ? "dot" : "builtin";
    svgAt = 0; svgFinal = false;
    drawGraph();
  }

  function drawGraph() {
    const g = $("graph");
    g.innerHTML = "";
    if (layout === "dot") { loadSVG(true); return; }
    const svg = el("svg", { id: "builtin" }, g);
    const pos = {};
    let mw = 0, mh = 0;
    for (const n of topo.nodes) {
      const x = 24 + n.layer * (W + GX), y = 34 + n.row * (H + GY);
      pos[n.id] = { x, y, n };
      mw = Math.max(mw, x + W + 24); mh = Math.max(mh, y + H + 24);
    }
    // Clusters: every enclosing graph or pipeline clone, outermost first.
    const clusters = {};
    for (const n of topo.nodes) {
      for (let d = 1; d <= n.path.length; d++) {
        const key = n.path.slice(0, d).join("/");
        const c = clusters[key] || (clusters[key] = { label: n.path[d - 1], depth: d, x0: 1e9, y0: 1e9, x1: 0, y1: 0, inner: 0 });
        const p = pos[n.id];
        c.x0 = Math.min(c.x0, p.x); c.y0 = Math.min(c.y0, p.y);
        c.x1 = Math.max(c.x1, p.x + W); c.y1 = Math.max(c.y1, p.y + H);
        c.inner = Math.max(c.inner, n.path.length - d);
      }
    }
    for (const key of Object.keys(clusters).sort((a, b) => clusters[a].depth - clusters[b].depth)) {
      const c = clusters[key], pad = 8 + 8 * c.inner;
      el("rect", { class: "cl", x: c.x0 - pad, y: c.y0 - pad - 12, width: c.x1 - c.x0 + 2 * pad, height: c.y1 - c.y0 + 2 * pad + 12, rx: 8 }, svg);
      const t = el("text", { class: "cll", x: c.x0 - pad + 6, y: c.y0 - pad - 1 }, svg);
      t.textContent = c.label;
    }
    el("defs", {}, svg).innerHTML =
      '<marker id="ah" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0L10,5L0,10z" fill="#7a8194"/></marker>';
    for (const e of topo.edges) {
      const a = pos[e.from], b = pos[e.to];
      if (!a || !b) continue;
      let d;
      if (b.x > a.x) {
        const x0 = a.x + W, y0 = a.y + H / 2, x1 = b.x, y1 = b.y + H / 2, m = (x0 + x1) / 2;
        d = `M${x0},${y0} C${m},${y0} ${m},${y1} ${x1},${y1}`;
      } else {
        const x0 = a.x + W / 2, y0 = a.y + H, x1 = b.x + W / 2, y1 = b.y + H, lo = Math.max(y0, y1) + GY * 0.8;
        d = `M${x0},${y0} C${x0},${lo} ${x1},${lo} ${x1},${y1}`;
        mh = Math.max(mh, lo + 10);
      }
      const p = el("path", { class: "e" + (e.memory ? " m" : "") + (e.back ? " b" : ""), d, "marker-end": "url(#ah)" }, svg);
      el("title", {}, p).textContent = e.memory ? "memory" : (e.rule ? "rule " + e.rule + ": " : "") + e.type;
    }
    for (const n of topo.nodes) {
      const p = pos[n.id];
      const kind = { bookkeeper: "bk", input: "io", output: "io", route: "route", merge: "route", memory: "mem" }[n.kind] || "task";
      const small = kind === "io" || kind === "route", h = small ? 40 : H;
      const gr = el("g", { class: "n " + kind, id: "n-" + n.id, transform: `translate(${p.x},${p.y + (H - h) / 2})` }, svg);
      el("rect", { width: W, height: h, rx: kind === "mem" ? 14 : 6 }, gr);
      const t = el("text", { class: "t", x: 8, y: 17 }, gr);
      t.textContent = n.kind === "bookkeeper" ? "⧉ " + n.label : n.kind === "memory" ? "pool " + n.label : n.label;
      for (let i = 0; i < 4; i++) el("text", { class: "s l" + i, x: 8, y: 34 + i * 14 }, gr);
      if (kind === "mem") {
        el("rect", { class: "pbg", x: 8, y: 40, width: W - 16, height: 10, rx: 5, fill: "#eee" }, gr);
        el("rect", { class: "pfg", x: 8, y: 40, width: 0, height: 10, rx: 5, fill: "#e07b39" }, gr);
      }
      if (kind === "io" || kind === "route") gr.querySelector(".l0").textContent = n.kind;
    }
    svg.setAttribute("width", mw); svg.setAttribute("height", mh);
    svg.setAttribute("viewBox", `0 0 ${mw} ${mh}`);
  }

  async function loadSVG(force) {
    if (svgFinal && !force) return;
    const now = Date.now();
    if (!force && now - svgAt < 1000) return;
    svgAt = now;
    try {
      const r = await fetch(base + "?format=svg", { cache: "no-store" });
      if (!r.ok) throw new Error(await r.text());
      const text = await r.text();
      if (layout !== "dot") return;
      $("graph").innerHTML = text.slice(text.indexOf("<svg"));
      if (last && last.done) svgFinal = true;
      if (last) updateGraph(last);
    } catch (e) {
      layout = "builtin"; $("layout").value = "builtin"; drawGraph();
    }
  }

  function setLines(g, lines) {
    for (let i = 0; i < 4; i++) { const t = g.querySelector(".l" + i); if (t) t.textContent = lines[i] || ""; }
  }

  function updateGraph(v) {
    const st = v.stats, tasks = st.Tasks || [], pools = st.Pools || [];
    if (layout === "dot") {
      const byId = {};
      for (const n of topo.nodes) byId[n.id] = n;
      for (const g of document.querySelectorAll("#graph g.node")) {
        const n = byId[(g.querySelector("title") || {}).textContent];
        const t = n && n.task >= 0 ? tasks[n.task] : null;
        g.classList.toggle("busy", !!t && busy(t) > 0);
      }
      return;
    }
    for (const n of topo.nodes) {
      const g = document.getElementById("n-" + n.id);
      if (!g) continue;
      if (n.task >= 0 && tasks[n.task]) {
        const t = tasks[n.task], c = (t.Copies || []).length, b = busy(t);
        g.classList.toggle("busy", b > 0);
        setLines(g, [
          `in ${num(t.ItemsIn)} · out ${num(t.ItemsOut)}`,
          `queue ${t.Queue} (max ${t.MaxQueue}) · busy ${b}/${c}`,
          `compute ${dur(t.Compute)} · wait ${dur(t.Wait)}`,
          t.Remote ? "remote: " + workers(t) : t.MemoryWait ? `memory wait ${dur(t.MemoryWait)}` : (n.rules && n.rules.length ? "rules: " + n.rules.join(", ") : ""),
        ]);
      } else if (n.pool >= 0 && pools[n.pool]) {
        const p = pools[n.pool];
        const fg = g.querySelector(".pfg");
        if (fg) fg.setAttribute("width", p.Capacity ? (W - 16) * p.InUse / p.Capacity : 0);
        setLines(g, [`${p.InUse} of ${p.Capacity} out`, "", `peak ${p.Peak} · ${num(p.Waits)} waits`]);
      }
    }
  }

  function updateTasks(st) {
    const tb = $("tasks").tBodies[0], tasks = st.Tasks || [];
    while (tb.rows.length > tasks.length) tb.deleteRow(-1);
    tasks.forEach((t, i) => {
      let r = tb.rows[i];
      if (!r) {
        r = tb.insertRow();
        r.innerHTML = '<td class="name"></td><td class="kind"></td><td class="busy"></td><td class="in"></td><td class="out"></td><td class="queue"></td><td class="compute"></td><td class="wait"></td><td class="mwait"></td>';
      }
      const b = busy(t), c = (t.Copies || []).length;
      r.dataset.name = t.Name;
      r.className = b > 0 ? "busy" : "";
      const cells = r.cells;
      cells[0].textContent = t.Name; cells[0].title = t.Name;
      cells[1].textContent = t.Remote ? t.Kind + " (remote)" : t.Kind;
      cells[1].title = t.Remote ? "workers: " + workers(t) : "";
      cells[2].textContent = `${b}/${c}`;
      cells[3].textContent = num(t.ItemsIn);
      cells[4].textContent = num(t.ItemsOut);
      cells[5].textContent = `${t.Queue} (${t.MaxQueue})`;
      cells[6].textContent = dur(t.Compute);
      cells[7].textContent = dur(t.Wait);
      cells[8].textContent = dur(t.MemoryWait);
    });
  }

  function updatePools(st) {
    const pools = st.Pools || [], box = $("pools");
    if (!pools.length) { box.innerHTML = '<div class="none">no memory pools</div>'; return; }
    if (box.children.length !== pools.length || box.querySelector(".none")) {
      box.innerHTML = pools.map(() => '<div class="pool"><div class="lbl"><span class="pn"></span><span class="pv"></span></div><div class="bar"><div></div></div></div>').join("");
    }
    pools.forEach((p, i) => {
      const d = box.children[i];
      d.dataset.name = p.Name;
      d.querySelector(".pn").textContent = p.Name + (p.Pipeline ? ` [${p.Pipeline}]` : "");
      d.querySelector(".pv").textContent = `${p.InUse} / ${p.Capacity} out · peak ${p.Peak} · ${num(p.Waits)} waits`;
      d.querySelector(".bar > div").style.width = (p.Capacity ? 100 * p.InUse / p.Capacity : 0) + "%";
    });
  }

  function updateTimeline(v) {
    const cv = $("tl"), hint = $("timehint");
    if (!v.trace) {
      hint.textContent = "";
      cv.hidden = true;
      if (!$("notrace")) {
        const d = document.createElement("div");
        d.id = "notrace"; d.className = "none";
        d.textContent = "No timeline: start the run with graph.WithTrace() for the timeline.";
        $("timeline").appendChild(d);
      }
      return;
    }
    const nt = $("notrace"); if (nt) nt.remove();
    cv.hidden = false;
    hint.textContent = "last 5 s · blue: execute, orange: memory wait";
    const tracks = v.tracks || [], rowH = 16, left = 170, top = 18;
    const dpr = window.devicePixelRatio || 1, w = cv.parentElement.clientWidth || 800, h = top + rowH * tracks.length + 4;
    if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(h * dpr)) {
      cv.width = Math.round(w * dpr); cv.height = Math.round(h * dpr);
      cv.style.height = h + "px";
    }
    const c = cv.getContext("2d");
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.clearRect(0, 0, w, h);
    const t1 = Math.max(v.now, 1e6), t0 = Math.max(0, t1 - 5e6), win = t1 - t0, sx = (w - left - 8) / win;
    c.font = "11px system-ui, sans-serif";
    c.fillStyle = "#6b7385"; c.strokeStyle = "#eef0f4";
    for (let s = Math.ceil(t0 / 1e6); s * 1e6 <= t1; s++) {
      const x = left + (s * 1e6 - t0) * sx;
      if (x < left) continue;
      c.beginPath(); c.moveTo(x, top - 4); c.lineTo(x, h); c.stroke();
      c.fillText(s + " s", x + 2, 11);
    }
    tracks.forEach((tr, i) => {
      const y = top + i * rowH;
      c.fillStyle = i % 2 ? "#fafbfc" : "#ffffff";
      c.fillRect(left, y, w - left, rowH);
      c.fillStyle = "#1d2330";
      const label = `${tr.task} #${tr.thread}`;
      c.fillText(label.length > 26 ? "…" + label.slice(-25) : label, 4, y + 12);
      for (const [s, d, k] of tr.slices) {
        const x0 = left + Math.max(s - t0, 0) * sx, x1 = left + (s + d - t0) * sx;
        if (x1 < left) continue;
        c.fillStyle = k ? "#e07b39" : "#2f6fde";
        c.fillRect(x0, y + 3, Math.max(x1 - x0, 1), rowH - 6);
      }
    });
  }

  function update(v) {
    last = v;
    const st = v.stats;
    $("name").textContent = st.Graph;
    document.title = "htgs · " + st.Graph;
    const stalled = !!v.stall;
    const pill = $("status");
    pill.textContent = v.done ? "done" : stalled ? "stalled" : "running";
    pill.className = "pill " + (v.done ? "done" : stalled ? "stalled" : "running");
    $("summary").textContent = `${dur(st.Elapsed)} · sent ${num(st.Sent)} · outputs ${num(st.Outputs)}` + (st.Cyclic ? ` · pending ${num(st.Pending)}` : "");
    $("stall").hidden = !stalled;
    if (stalled) { $("stallidle").textContent = `for ${v.idle.toFixed(1)} s`; $("stalltext").textContent = v.stall; }
    updateTasks(st);
    updatePools(st);
    updateGraph(v);
    updateTimeline(v);
    if (layout === "dot") loadSVG(false);
    document.body.dataset.state = v.done ? "done" : "running";
  }

  async function tick() {
    let wait = 200;
    try {
      const v = await getJSON("live");
      if (v.run !== runId) { runId = v.run; await loadTopology(); }
      update(v);
      if (v.done) wait = 1000;
    } catch (e) {
      $("status").textContent = "disconnected"; $("status").className = "pill";
      wait = 1000;
    }
    setTimeout(tick, wait);
  }

  $("layout").addEventListener("change", () => { layout = $("layout").value; svgFinal = false; drawGraph(); if (last) updateGraph(last); });
  tick();
})();
