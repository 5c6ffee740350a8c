// Hourglass market page: loads the daemon's public JSON endpoints once, then
// follows the market as it changes through Server-Sent Events
// (/api/v1/stream), and draws the forward curve, a depth ladder, recent
// trades and the index fixings. No external assets, no framework.
"use strict";

const FIXINGS_MS = 30000; // fixings change once a day: fetched, not streamed
const LADDER_LEVELS = 10; // per side: the ladder and the trades both fit in a 1400x900 window
const TRADES_SHOWN = 20; // the newest, as many as a market event carries
const state = { instruments: [], fixings: [], selected: null, book: null, ok: false };

const $ = (sel) => document.querySelector(sel);

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

// Ticks to USD per GPU-hour: a tick is tick_size micro-USD per GPU-hour.
function usd(ticks, inst) {
  if (ticks === null || ticks === undefined || ticks === 0) return null;
  const tick = inst && inst.tick_size ? inst.tick_size : 1000;
  return (ticks * tick) / 1e6;
}
const fmt = (v) => (v === null || v === undefined ? "\u2013" : v.toFixed(3));
const microToUsd = (m) => (m === null || m === undefined ? null : m / 1e6);

function setStatus(ok, text) {
  const el = $("#status");
  el.textContent = text;
  el.className = "status " + (ok ? "ok" : "bad");
}

function monthOf(symbol) {
  const m = /(\d{4})-(\d{2})$/.exec(symbol || "");
  return m ? m[1] + "-" + m[2] : symbol;
}

function renderCurveTable() {
  const tbody = $("#curve-table tbody");
  tbody.textContent = "";
  for (const i of state.instruments) {
    const tr = document.createElement("tr");
    const cells = [
      i.symbol,
      fmt(usd(i.dsp, i)),
      i.bid ? fmt(usd(i.bid.price, i)) + " \u00d7 " + i.bid.qty : "\u2013",
      i.ask ? fmt(usd(i.ask.price, i)) + " \u00d7 " + i.ask.qty : "\u2013",
      fmt(usd(i.last_price, i)),
      String(i.volume || 0),
      String(i.trades || 0),
      i.halted ? "halted" : i.listed === false ? "delisted" : "trading",
    ];
    for (const c of cells) {
      const td = document.createElement("td");
      td.textContent = c;
      tr.appendChild(td);
    }
    tbody.appendChild(tr);
  }
}

// A price axis on round values: the step is 1, 2 or 5 times a power of ten
// (never below a tick, 0.001 USD), chosen so that about `want` intervals
// cover [min, max] with some margin; the axis runs from a multiple of the
// step to a multiple of the step. Labels carry the step's decimals (at
// least cents).
function niceAxis(min, max, want) {
  const span = Math.max(max - min, 0.02);
  const raw = (span * 1.3) / want;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  let step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw * 0.999);
  step = Math.max(step, 0.001);
  // Work in thousandths so the values are exact multiples of the step.
  const k = Math.round(step * 1000);
  const lo = Math.floor((min - span * 0.1) * 1000 / k) * k;
  const hi = Math.ceil((max + span * 0.1) * 1000 / k) * k;
  const ticks = [];
  for (let t = lo; t <= hi; t += k) ticks.push(t / 1000);
  const decimals = Math.max(2, Math.min(3, -Math.floor(Math.log10(step) + 1e-9)));
  return { lo: lo / 1000, hi: hi / 1000, ticks, decimals };
}

function drawCurve() {
  const cv = $("#curve");
  const dpr = window.devicePixelRatio || 1;
  const w = cv.clientWidth || 960, h = cv.clientHeight || 200;
  cv.width = w * dpr;
  cv.height = h * dpr;
  const g = cv.getContext("2d");
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  const css = getComputedStyle(document.documentElement);
  const col = (n) => css.getPropertyValue(n).trim();
  const ins = state.instruments;
  const pad = { l: 56, r: 16, t: 14, b: 34 };
  const idx = state.fixings.filter((f) => f.value_micro_usd > 0);
  const vals = [];
  for (const i of ins) {
    for (const v of [usd(i.dsp, i), i.bid && usd(i.bid.price, i), i.ask && usd(i.ask.price, i),
                     usd(i.last_price, i)])
      if (v) vals.push(v);
  }
  for (const f of idx) vals.push(microToUsd(f.value_micro_usd));
  g.fillStyle = col("--dim");
  g.font = "12px system-ui, sans-serif";
  if (ins.length === 0 || vals.length === 0) {
    g.fillText("No prices yet.", pad.l, h / 2);
    return;
  }
  const ax = niceAxis(Math.min(...vals), Math.max(...vals), 5);
  const lo = ax.lo, hi = ax.hi;
  cv.dataset.ticks = ax.ticks.map((v) => v.toFixed(ax.decimals)).join(" ");
  const n = ins.length + (idx.length ? 1 : 0);
  const x = (k) => pad.l + ((k + 0.5) * (w - pad.l - pad.r)) / n;
  const y = (v) => pad.t + ((hi - v) * (h - pad.t - pad.b)) / (hi - lo);
  // grid and axis labels
  g.strokeStyle = col("--line");
  g.lineWidth = 1;
  for (const v of ax.ticks) {
    g.beginPath();
    g.moveTo(pad.l, y(v));
    g.lineTo(w - pad.r, y(v));
    g.stroke();
    g.fillText(v.toFixed(ax.decimals), 6, y(v) + 4);
  }
  // index history: the latest fixings as a band on the left ("spot")
  if (idx.length) {
    const pts = idx.slice(-30);
    const slot = (w - pad.l - pad.r) / n; /* the index gets the first slot */
    const x0 = pad.l + 6, x1 = pad.l + slot - 10;
    g.strokeStyle = col("--idx");
    g.lineWidth = 2;
    g.beginPath();
    pts.forEach((f, k) => {
      const px = x0 + ((x1 - x0) * k) / Math.max(pts.length - 1, 1);
      const py = y(microToUsd(f.value_micro_usd));
      if (k === 0) g.moveTo(px, py);
      else g.lineTo(px, py);
    });
    g.stroke();
    g.fillStyle = col("--dim");
    g.fillText(pts[pts.length - 1].index || "index", x0, h - 12); // e.g. "IGX B200.A"
  }
  const off = idx.length ? 1 : 0;
  ins.forEach((i, k) => {
    const px = x(k + off);
    const bid = i.bid && usd(i.bid.price, i), ask = i.ask && usd(i.ask.price, i);
    if (bid && ask) {
      g.strokeStyle = col("--dim");
      g.lineWidth = 6;
      g.globalAlpha = 0.35;
      g.beginPath();
      g.moveTo(px, y(ask));
      g.lineTo(px, y(bid));
      g.stroke();
      g.globalAlpha = 1;
    }
    if (bid) { g.fillStyle = col("--bid"); g.fillRect(px - 7, y(bid) - 1, 14, 3); }
    if (ask) { g.fillStyle = col("--ask"); g.fillRect(px - 7, y(ask) - 1, 14, 3); }
    const last = usd(i.last_price, i);
    if (last) {
      g.fillStyle = col("--last");
      g.beginPath();
      g.arc(px + 10, y(last), 3, 0, 2 * Math.PI);
      g.fill();
    }
    const dsp = usd(i.dsp, i);
    if (dsp) {
      g.fillStyle = col("--dsp");
      g.beginPath();
      g.arc(px, y(dsp), 4.5, 0, 2 * Math.PI);
      g.fill();
    }
    g.fillStyle = col("--dim");
    g.textAlign = "center";
    g.fillText(monthOf(i.symbol), px, h - 12);
    g.textAlign = "left";
  });
  // settlement curve line through the DSPs
  g.strokeStyle = col("--dsp");
  g.lineWidth = 1.5;
  g.beginPath();
  let started = false;
  ins.forEach((i, k) => {
    const dsp = usd(i.dsp, i) || (i.bid && i.ask ? (usd(i.bid.price, i) + usd(i.ask.price, i)) / 2 : null);
    if (!dsp) return;
    if (!started) { g.moveTo(x(k + off), y(dsp)); started = true; }
    else g.lineTo(x(k + off), y(dsp));
  });
  g.stroke();
}

function renderContracts() {
  const sel = $("#contract");
  const want = state.instruments.map((i) => String(i.id)).join(",");
  if (sel.dataset.ids !== want) {
    sel.textContent = "";
    for (const i of state.instruments) {
      const o = document.createElement("option");
      o.value = String(i.id);
      o.textContent = i.symbol;
      sel.appendChild(o);
    }
    sel.dataset.ids = want;
  }
  if (state.selected === null && state.instruments.length) {
    // The contract named in the address (?contract=SYMBOL), else the most
    // traded one, else the front month.
    const named = new URLSearchParams(location.search).get("contract");
    const hit = state.instruments.find((i) => i.symbol === named);
    let best = hit || state.instruments[0];
    if (!hit)
      for (const i of state.instruments) if ((i.volume || 0) > (best.volume || 0)) best = i;
    state.selected = best.id;
  }
  if (state.selected !== null) sel.value = String(state.selected);
}

function renderLadder(book, inst) {
  const tbody = $("#ladder tbody");
  tbody.textContent = "";
  const asks = (book.asks || []).slice(0, LADDER_LEVELS).reverse();
  const bids = (book.bids || []).slice(0, LADDER_LEVELS);
  const row = (bidQty, price, askQty, cls) => {
    const tr = document.createElement("tr");
    if (cls) tr.className = cls;
    const a = document.createElement("td"); a.className = "bid"; a.textContent = bidQty;
    const b = document.createElement("td"); b.textContent = price;
    const c = document.createElement("td"); c.className = "ask"; c.textContent = askQty;
    tr.append(a, b, c);
    tbody.appendChild(tr);
  };
  for (const [p, q] of asks) row("", fmt(usd(p, inst)), String(q));
  if (bids.length && book.asks && book.asks.length) {
    const spread = usd(book.asks[0][0] - bids[0][0], inst);
    row("", "spread " + fmt(spread), "", "spread");
  }
  for (const [p, q] of bids) row(String(q), fmt(usd(p, inst)), "");
  if (!asks.length && !bids.length) row("", "empty book", "", "spread");
}

function renderTrades(tr, inst) {
  const tbody = $("#trades tbody");
  tbody.textContent = "";
  // The endpoint lists trades newest first: show the newest, newest on top.
  for (const t of (tr.trades || []).slice(0, TRADES_SHOWN)) {
    const row = document.createElement("tr");
    const when = t.ts ? new Date(t.ts / 1e6).toISOString().slice(11, 19) : "";
    for (const [v, cls] of [[when, ""], [fmt(usd(t.price, inst)), ""], [String(t.qty), ""],
                            [t.aggressor, t.aggressor]]) {
      const td = document.createElement("td");
      td.textContent = v;
      if (cls) td.className = cls;
      row.appendChild(td);
    }
    tbody.appendChild(row);
  }
}

function renderFixings(fx) {
  const tbody = $("#fixings tbody");
  tbody.textContent = "";
  const list = fx.fixings || [];
  $("#fixings-note").textContent = fx.available === false
    ? "No index fixings published yet." : list.length ? "" : "No fixings yet.";
  for (const f of list.slice(-15).reverse()) {
    const tr = document.createElement("tr");
    const excl = f.exclusions
      ? Object.entries(f.exclusions).filter(([, n]) => n > 0).map(([k, n]) => k + " " + n).join(", ")
      : "";
    for (const v of [f.index || "", f.day || "", fmt(microToUsd(f.value_micro_usd)),
                     String(f.tier ?? ""), f.status || "",
                     f.providers ? String(f.providers) : "\u2013",
                     f.hours ? String(f.hours) : "\u2013", excl || "\u2013", f.source || "computed"]) {
      const td = document.createElement("td");
      td.textContent = v;
      tr.appendChild(td);
    }
    // Computed fixings link the receipt the exchange keeps; external values
    // have none.
    const td = document.createElement("td");
    if (f.receipt) {
      const a = document.createElement("a");
      a.href = f.receipt;
      a.textContent = "receipt";
      td.appendChild(a);
    } else {
      td.textContent = "\u2013";
    }
    tr.appendChild(td);
    tbody.appendChild(tr);
  }
}

function renderMarket() {
  renderCurveTable();
  renderContracts();
  drawCurve();
}

function renderSelected() {
  const inst = state.instruments.find((i) => i.id === state.selected);
  if (state.book) renderLadder(state.book, inst);
  if (state.book) renderTrades(state.book, inst);
}

function live() {
  setStatus(true, "live \u00b7 " + new Date().toISOString().slice(11, 19) + " UTC");
  document.body.dataset.ready = "1";
}

// The whole picture from the JSON endpoints: at start, on a new contract,
// and after the stream reconnects.
async function load() {
  try {
    const [ins, fx] = await Promise.all([getJSON("/api/v1/instruments"),
                                         getJSON("/api/v1/fixings")]);
    state.instruments = (ins.instruments || []).filter((i) => i.listed !== false);
    state.fixings = fx.fixings || [];
    renderMarket();
    renderFixings(fx);
    if (state.selected !== null) {
      const [book, tr] = await Promise.all([
        getJSON("/api/v1/book?instrument=" + state.selected),
        getJSON("/api/v1/trades?instrument=" + state.selected)]);
      book.trades = tr.trades;
      state.book = book;
      renderSelected();
    }
    live();
  } catch (e) {
    setStatus(false, "disconnected: " + e.message);
  }
}

async function loadFixings() {
  try {
    const fx = await getJSON("/api/v1/fixings");
    state.fixings = fx.fixings || [];
    drawCurve();
    renderFixings(fx);
  } catch (e) {
    setStatus(false, "disconnected: " + e.message);
  }
}

// One "market" event: every instrument, and the book and newest trades of
// those that changed.
function onMarket(ev) {
  const m = JSON.parse(ev.data);
  state.instruments = (m.instruments || []).filter((i) => i.listed !== false);
  renderMarket();
  const book = (m.books || []).find((b) => b.instrument === state.selected);
  if (book) {
    state.book = book;
    renderSelected();
  }
  live();
}

function follow() {
  const es = new EventSource("/api/v1/stream");
  es.addEventListener("market", onMarket);
  es.addEventListener("open", load); // anything missed while away
  es.addEventListener("error", () => setStatus(false, "disconnected: reconnecting"));
}

$("#contract").addEventListener("change", (e) => {
  state.selected = Number(e.target.value);
  state.book = null;
  const i = state.instruments.find((x) => x.id === state.selected);
  if (i) history.replaceState(null, "", "?contract=" + encodeURIComponent(i.symbol));
  load();
});
window.addEventListener("resize", drawCurve);
follow();
setInterval(loadFixings, FIXINGS_MS);
