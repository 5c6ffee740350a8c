// Hourglass market page: follows the market through Server-Sent Events
// (/api/v1/stream?book=<contract>: a snapshot, then changes), reads the
// fixings and the price history from the public JSON endpoints, and draws
// one forward curve per product, the index history, the selected contract's
// candles and settlements, a depth ladder, recent trades and the contracts
// table. No external assets, no framework.
"use strict";

const FIXINGS_MS = 30000; // fixings change once a day: fetched, not streamed
const HISTORY_MS = 10000; // candles: fetched again every few seconds
const LADDER_LEVELS = 10; // per side: the ladder and the trades both fit in a 1400x900 window
const TRADES_SHOWN = 20; // the newest, as many as the stream keeps
const state = { all: [], instruments: [], fixings: [], selected: null, book: null, es: null,
                interval: "1m", candles: [], settlements: [] };

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
      i.bid ? fmt(usd(i.bid[0], i)) + " \u00d7 " + i.bid[1] : "\u2013",
      i.ask ? fmt(usd(i.ask[0], i)) + " \u00d7 " + i.ask[1] : "\u2013",
      fmt(usd(i.last_price, i)),
      i.change === undefined ? "\u2013" : (i.change > 0 ? "+" : "") + fmt(i.change * (i.tick_size || 1000) / 1e6),
      i.change_pct === undefined ? "\u2013" : (i.change_pct > 0 ? "+" : "") + i.change_pct.toFixed(2) + "%",
      i.high ? fmt(usd(i.high, i)) : "\u2013",
      i.low ? fmt(usd(i.low, i)) : "\u2013",
      String(i.day_volume || 0),
      String(i.open_interest || 0),
      i.last_trading_day || "\u2013",
      i.halted ? "halted" : i.listed === false ? "delisted" : "trading",
    ];
    cells.forEach((c, k) => {
      const td = document.createElement("td");
      td.textContent = c;
      if ((k === 5 || k === 6) && i.change) td.className = i.change > 0 ? "up" : "down";
      tr.appendChild(td);
    });
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

// A canvas sized to its box at the device's pixel ratio; its 2D context
// and size in CSS pixels.
function canvas2d(cv) {
  const dpr = window.devicePixelRatio || 1;
  const w = cv.clientWidth || 960, h = cv.clientHeight || 200;
  cv.width = w * dpr;
  cv.height = h * dpr;
  const g = cv.getContext("2d");
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  g.font = "12px system-ui, sans-serif";
  return { g, w, h };
}
const css = (n) => getComputedStyle(document.documentElement).getPropertyValue(n).trim();

// Horizontal grid and price labels of axis ax over [pad.t, h - pad.b].
function priceGrid(c, ax, pad, y) {
  const { g, w } = c;
  g.strokeStyle = css("--line");
  g.fillStyle = css("--dim");
  g.lineWidth = 1;
  for (const v of ax.ticks) {
    g.beginPath();
    g.moveTo(pad.l, y(v));
    g.lineTo(w - pad.r, y(v));
    g.stroke();
    g.fillText(v.toFixed(ax.decimals), 6, y(v) + 4);
  }
}

// The product of a contract: its symbol without the month (B200.A).
const productOf = (symbol) => (symbol || "").replace(/\.\d{4}-\d{2}$/, "");

// One forward curve per product, each on its own price axis: settlement,
// bid/ask, last trade per month.
function drawCurves() {
  const box = $("#curves");
  const products = [...new Set(state.instruments.map((i) => productOf(i.symbol)))];
  const want = products.join(",");
  if (box.dataset.products !== want) {
    box.textContent = "";
    for (const p of products) {
      const cv = document.createElement("canvas");
      cv.className = "curve";
      cv.dataset.product = p;
      cv.setAttribute("aria-label", "forward curve " + p);
      box.appendChild(cv);
    }
    if (!products.length) {
      const cv = document.createElement("canvas");
      cv.className = "curve";
      box.appendChild(cv);
    }
    box.dataset.products = want;
  }
  box.querySelectorAll("canvas").forEach((cv) =>
    drawCurve(cv, state.instruments.filter((i) => productOf(i.symbol) === cv.dataset.product),
              cv.dataset.product));
}

function drawCurve(cv, ins, product) {
  const c = canvas2d(cv), { g, w, h } = c;
  const pad = { l: 56, r: 16, t: 14, b: 34 };
  const vals = [];
  for (const i of ins)
    for (const v of [usd(i.dsp, i), i.bid && usd(i.bid[0], i), i.ask && usd(i.ask[0], i),
                     usd(i.last_price, i)])
      if (v) vals.push(v);
  g.fillStyle = css("--dim");
  if (ins.length === 0 || vals.length === 0) {
    g.fillText("No prices yet.", pad.l, h / 2);
    return;
  }
  const ax = niceAxis(Math.min(...vals), Math.max(...vals), 5);
  const lo = ax.lo, hi = ax.hi;
  cv.dataset.ticks = ax.ticks.map((v) => v.toFixed(ax.decimals)).join(" ");
  const x = (k) => pad.l + ((k + 0.5) * (w - pad.l - pad.r)) / ins.length;
  const y = (v) => pad.t + ((hi - v) * (h - pad.t - pad.b)) / (hi - lo);
  priceGrid(c, ax, pad, y);
  g.fillStyle = css("--fg");
  g.fillText(product, pad.l + 4, pad.t + 2);
  ins.forEach((i, k) => {
    const px = x(k);
    const bid = i.bid && usd(i.bid[0], i), ask = i.ask && usd(i.ask[0], i);
    if (bid && ask) {
      g.strokeStyle = css("--dim");
      g.lineWidth = 6;
      g.globalAlpha = 0.35;
      g.beginPath();
      g.moveTo(px, y(ask));
      g.lineTo(px, y(bid));
      g.stroke();
      g.globalAlpha = 1;
    }
    if (bid) { g.fillStyle = css("--bid"); g.fillRect(px - 7, y(bid) - 1, 14, 3); }
    if (ask) { g.fillStyle = css("--ask"); g.fillRect(px - 7, y(ask) - 1, 14, 3); }
    const last = usd(i.last_price, i);
    if (last) {
      g.fillStyle = css("--last");
      g.beginPath();
      g.arc(px + 10, y(last), 3, 0, 2 * Math.PI);
      g.fill();
    }
    const dsp = usd(i.dsp, i);
    if (dsp) {
      g.fillStyle = css("--dsp");
      g.beginPath();
      g.arc(px, y(dsp), 4.5, 0, 2 * Math.PI);
      g.fill();
    }
    g.fillStyle = css("--dim");
    g.textAlign = "center";
    g.fillText(monthOf(i.symbol), px, h - 12);
    g.textAlign = "left";
  });
  // settlement curve line through the DSPs
  g.strokeStyle = css("--dsp");
  g.lineWidth = 1.5;
  g.beginPath();
  let started = false;
  ins.forEach((i, k) => {
    const dsp = usd(i.dsp, i) || (i.bid && i.ask ? (usd(i.bid[0], i) + usd(i.ask[0], i)) / 2 : null);
    if (!dsp) return;
    if (!started) { g.moveTo(x(k), y(dsp)); started = true; }
    else g.lineTo(x(k), y(dsp));
  });
  g.stroke();
}

// Time labels of a time axis from t0 to t1 (ms): about `want` of them.
function timeTicks(t0, t1, want, days) {
  const steps = days ? [864e5, 2 * 864e5, 7 * 864e5, 14 * 864e5, 30 * 864e5]
                     : [6e4, 3e5, 9e5, 36e5, 4 * 36e5, 864e5, 7 * 864e5];
  const step = steps.find((s) => (t1 - t0) / s <= want) || steps[steps.length - 1];
  const out = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
  return out;
}

// A line chart of series [{t: ms, v: USD}] on a time axis (x) and a price
// axis (y), a point every span ms at most. Series: [{pts, color, dots,
// dash}] or [{pts of {t, open, high, low, close}, candles: true}].
function drawTimeChart(cv, series, days, span, empty) {
  const c = canvas2d(cv), { g, w, h } = c;
  const pad = { l: 56, r: 16, t: 14, b: 30 };
  const all = series.flatMap((s) => s.pts);
  cv.dataset.points = String(all.length);
  g.fillStyle = css("--dim");
  if (all.length === 0) {
    g.fillText(empty, pad.l, h / 2);
    return;
  }
  const vs = all.flatMap((p) => [p.v, p.hi, p.lo].filter((v) => v !== undefined));
  const ax = niceAxis(Math.min(...vs), Math.max(...vs), 4);
  let t0 = Math.min(...all.map((p) => p.t)), t1 = Math.max(...all.map((p) => p.t));
  t0 -= span / 2;
  t1 += span / 2;
  const x = (t) => pad.l + ((t - t0) * (w - pad.l - pad.r)) / (t1 - t0);
  const y = (v) => pad.t + ((ax.hi - v) * (h - pad.t - pad.b)) / (ax.hi - ax.lo);
  priceGrid(c, ax, pad, y);
  g.fillStyle = css("--dim");
  g.textAlign = "center";
  for (const t of timeTicks(t0, t1, 6, days)) {
    const iso = new Date(t).toISOString();
    g.fillText(days ? iso.slice(5, 10) : iso.slice(11, 16), x(t), h - 10);
  }
  g.textAlign = "left";
  const bw = Math.max(2, Math.min(10, ((w - pad.l - pad.r) * span) / (t1 - t0) * 0.6));
  for (const s of series) {
    if (s.candles) {
      for (const p of s.pts) {
        g.strokeStyle = g.fillStyle = p.close >= p.open ? css("--bid") : css("--ask");
        g.lineWidth = 1;
        g.beginPath();
        g.moveTo(x(p.t), y(p.hi));
        g.lineTo(x(p.t), y(p.lo));
        g.stroke();
        const top = y(Math.max(p.open, p.close)), bot = y(Math.min(p.open, p.close));
        g.fillRect(x(p.t) - bw / 2, top, bw, Math.max(1, bot - top));
      }
      continue;
    }
    g.strokeStyle = g.fillStyle = s.color;
    g.lineWidth = s.dash ? 1.5 : 2;
    g.setLineDash(s.dash ? [5, 4] : []);
    g.beginPath();
    s.pts.forEach((p, k) => (k ? g.lineTo(x(p.t), y(p.v)) : g.moveTo(x(p.t), y(p.v))));
    g.stroke();
    g.setLineDash([]);
    if (s.dots) for (const p of s.pts) { g.beginPath(); g.arc(x(p.t), y(p.v), 3.5, 0, 2 * Math.PI); g.fill(); }
  }
}

const dayMs = (d) => Date.parse(d + "T00:00:00Z");

// The index history: one line per index on a time axis of days.
function drawIndex() {
  const byIndex = new Map();
  for (const f of state.fixings.filter((f) => f.value_micro_usd > 0)) {
    if (!byIndex.has(f.index)) byIndex.set(f.index, []);
    byIndex.get(f.index).push({ t: dayMs(f.day), v: microToUsd(f.value_micro_usd) });
  }
  const colors = [css("--idx"), css("--last"), css("--dsp")];
  drawTimeChart($("#index"), [...byIndex.values()].map((pts, k) => ({ pts, color: colors[k % 3], dots: false })),
                true, 864e5, "No index fixings yet.");
  $("#index-names").textContent = [...byIndex.keys()].join(", ");
}

// The selected contract's candles and its settlement prices.
function drawHistory() {
  const inst = state.instruments.find((i) => i.id === state.selected);
  const cd = state.candles.map((c) => ({ t: c.t * 1000, open: usd(c.open, inst), close: usd(c.close, inst),
                                         hi: usd(c.high, inst), lo: usd(c.low, inst), v: usd(c.close, inst) }));
  const st = state.settlements.map((s) => ({ t: dayMs(s.day) + 16 * 36e5, v: usd(s.price, inst) }));
  const days = state.interval === "1d";
  // Intraday: the last settlement as a level across the candles.
  const span = { "1m": 6e4, "1h": 36e5, "1d": 864e5 }[state.interval];
  const last = st.length ? st[st.length - 1].v : null;
  const level = !days && last && cd.length
    ? [{ t: cd[0].t - span / 2, v: last }, { t: cd[cd.length - 1].t + span / 2, v: last }] : [];
  drawTimeChart($("#history"), [{ pts: cd, candles: true },
                                { pts: days ? st : level, color: css("--dsp"), dots: days, dash: !days }],
                days, span, "No trades yet.");
  $("#settlements").textContent = st.length
    ? "settlements: " + state.settlements.slice(-5).map((s) => s.day.slice(5) + " " + fmt(usd(s.price, inst))).join(" \u00b7 ")
    : "no settlement yet";
}

function drawAll() {
  drawCurves();
  drawIndex();
  drawHistory();
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
  drawCurves();
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

// change and change_pct follow from last_price and dsp: the stream's
// deltas do not carry them.
function derive(i) {
  if (i.dsp > 0 && i.last_price > 0) {
    i.change = i.last_price - i.dsp;
    i.change_pct = Math.trunc((i.change * 10000) / i.dsp) / 100;
  } else {
    delete i.change;
    delete i.change_pct;
  }
}

const listed = (list) => list.filter((i) => i.listed !== false);

// The stream's first event: the whole market, and the selected book.
function onSnapshot(ev) {
  const m = JSON.parse(ev.data);
  state.all = m.instruments || [];
  state.instruments = listed(state.all);
  state.book = m.book;
  renderMarket();
  renderSelected();
  live();
}

// The fields of the instruments that changed (null: gone).
function onDelta(ev) {
  const m = JSON.parse(ev.data);
  for (const d of m.instruments || []) {
    let i = state.all.find((x) => x.id === d.id);
    if (!i) state.all.push((i = { id: d.id }));
    for (const [k, v] of Object.entries(d)) {
      if (v === null) delete i[k];
      else i[k] = v;
    }
    derive(i);
  }
  state.instruments = listed(state.all);
  renderMarket();
  live();
}

// A side's levels with changes applied ([price, 0]: gone), best first.
function applyLevels(side, changes, bids) {
  const m = new Map(side);
  for (const [p, q] of changes) (q > 0 ? m.set(p, q) : m.delete(p));
  return [...m.entries()].sort((a, b) => (bids ? b[0] - a[0] : a[0] - b[0]));
}

// The selected book's changed levels and new trades.
function onBook(ev) {
  const m = JSON.parse(ev.data);
  const b = state.book;
  if (!b || b.instrument !== m.instrument) return;
  b.bids = m.bids_full || applyLevels(b.bids, m.bids || [], true);
  b.asks = m.asks_full || applyLevels(b.asks, m.asks || [], false);
  b.trades = (m.trades || []).concat(b.trades || []).slice(0, TRADES_SHOWN);
  renderSelected();
  live();
}

// The stream of the selected contract's book (a new one on a change of
// contract; the browser reconnects it after an error, with a new snapshot).
function follow() {
  if (state.es) state.es.close();
  const q = state.selected !== null ? "?book=" + state.selected : "";
  const es = new EventSource("/api/v1/stream" + q);
  es.addEventListener("snapshot", onSnapshot);
  es.addEventListener("delta", onDelta);
  es.addEventListener("book", onBook);
  es.addEventListener("error", () => setStatus(false, "disconnected: reconnecting"));
  state.es = es;
}

async function loadFixings() {
  try {
    const fx = await getJSON("/api/v1/fixings");
    state.fixings = fx.fixings || [];
    drawIndex();
    renderFixings(fx);
  } catch (e) {
    setStatus(false, "disconnected: " + e.message);
  }
}

// The clearing panel: the insurance fund and what went through it, as
// /api/v1/clearing publishes it (micro-USD; aggregates, no accounts).
function renderClearing(g) {
  const money = (m) => (m / 1e6).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 }) + " USD";
  const rows = [
    ["insurance fund", money(g.insurance_fund_micro_usd)],
    ["fund deposits", money(g.fund_deposits_micro_usd)],
    ["liquidation fees received", money(g.liquidation_fees_micro_usd)],
    ["paid for bankruptcies", money(g.fund_used_micro_usd)],
    ["socialized losses", money(g.socialized_micro_usd)],
    ["bankruptcies", String(g.bankruptcies)],
    ["accounts called / liquidating", g.accounts_called + " / " + g.accounts_liquidating],
    ["liquidation fills (since start)", String(g.liquidation_fills)],
  ];
  const tb = $("#clearing tbody");
  tb.textContent = "";
  for (const [k, v] of rows) {
    const tr = document.createElement("tr");
    const a = document.createElement("td");
    const b = document.createElement("td");
    a.textContent = k;
    b.textContent = v;
    tr.append(a, b);
    tb.append(tr);
  }
}

async function loadClearing() {
  try {
    renderClearing(await getJSON("/api/v1/clearing"));
  } catch (e) {
    setStatus(false, "disconnected: " + e.message);
  }
}

async function loadHistory() {
  if (state.selected === null) return;
  try {
    const q = "?instrument=" + state.selected;
    const [cd, st] = await Promise.all([getJSON("/api/v1/candles" + q + "&interval=" + state.interval),
                                        getJSON("/api/v1/settlements" + q)]);
    state.candles = cd.candles || [];
    state.settlements = st.settlements || [];
    drawHistory();
  } catch (e) {
    setStatus(false, "disconnected: " + e.message);
  }
}

// Start: the instruments to pick the contract (named in the address, else
// the most traded), then the stream of its book.
async function start() {
  try {
    const ins = await getJSON("/api/v1/instruments");
    state.all = ins.instruments || [];
    state.instruments = listed(state.all);
    renderContracts();
  } catch (e) {
    setStatus(false, "disconnected: " + e.message);
    setTimeout(start, 1000);
    return;
  }
  follow();
  loadFixings();
  loadClearing();
  loadHistory();
}

$("#contract").addEventListener("change", (e) => {
  state.selected = Number(e.target.value);
  state.book = null;
  const i = state.instruments.find((x) => x.id === state.selected);
  if (i) history.replaceState(null, "", "?contract=" + encodeURIComponent(i.symbol));
  follow();
  loadHistory();
});
$("#interval").addEventListener("change", (e) => {
  state.interval = e.target.value;
  loadHistory();
});
window.addEventListener("resize", drawAll);
start();
setInterval(loadFixings, FIXINGS_MS);
setInterval(loadClearing, HISTORY_MS);
setInterval(loadHistory, HISTORY_MS);
