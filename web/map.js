// The live map: the worker's rides from /v1/live (Server-Sent Events, at most one update per ride a second),
// drawn with Debian's Leaflet on a canvas so that 10,000 rides stay responsive. No build step, no framework.
"use strict";

const PHASES = ["received", "confirmed", "approachingPickup", "pickup", "ongoing", "completed"];
const COLOURS = {
  received: "#7a8793", confirmed: "#2f6fdb", approachingPickup: "#e58a00",
  pickup: "#8e3fd1", ongoing: "#1b9e4b", completed: "#30363d",
};
const TIMELINE_LIMIT = 50;
const LIST_LIMIT = 300;
const ENDPOINTS_UP_TO = 300; // pickups and drop-offs of every ride below this many rides; else of the selected one

const rides = new Map(); // ride id -> { summary, marker, timeline }
let selected = null;
let listDirty = true;
let clockSkew = 0; // server time minus page time, from each event

// MARK: Map

const map = L.map("map", { preferCanvas: true, worldCopyJump: true, zoomControl: true }).setView([52.52, 13.405], 12);
const renderer = L.canvas({ padding: 0.2 });
L.control.scale({ imperial: false }).addTo(map);
const endpoints = L.layerGroup().addTo(map);
const selection = L.layerGroup().addTo(map);
let fitted = false;

// A vehicle: an arrow turned to its course (a dot without one), drawn by the canvas renderer.
const VehicleMarker = L.CircleMarker.extend({
  options: { course: null, radius: 8, renderer },
  setCourse(course) { this.options.course = course; this.redraw(); return this; },
  _updatePath() { this._renderer._updateVehicle(this); },
});
L.Canvas.include({
  _updateVehicle(layer) {
    if (!this._drawing || layer._empty()) return;
    const p = layer._point, ctx = this._ctx, r = Math.max(Math.round(layer._radius), 1);
    const course = layer.options.course;
    ctx.beginPath();
    if (course === null || course === undefined) {
      ctx.arc(p.x, p.y, r * 0.75, 0, Math.PI * 2, false);
    } else {
      const a = (course * Math.PI) / 180;
      const at = (dx, dy) => [p.x + dx * Math.cos(a) - dy * Math.sin(a), p.y + dx * Math.sin(a) + dy * Math.cos(a)];
      const points = [at(0, -r * 1.3), at(r * 0.8, r), at(0, r * 0.45), at(-r * 0.8, r)];
      ctx.moveTo(...points[0]);
      for (const point of points.slice(1)) ctx.lineTo(...point);
      ctx.closePath();
    }
    this._fillStroke(ctx, layer);
  },
});

function styleFor(summary) {
  const colour = COLOURS[summary.phase] || "#000";
  return summary.stale
    ? { color: "#555", weight: 1.5, dashArray: "3 3", fillColor: colour, fillOpacity: 0.35 }
    : { color: "#fff", weight: 1.5, dashArray: null, fillColor: colour, fillOpacity: 0.95 };
}

function position(summary) {
  if (summary.location) return [summary.location.latitude, summary.location.longitude];
  return [summary.pickup.latitude, summary.pickup.longitude]; // no fix yet: where it is going
}

// Streets from an extract (http.streets, make run's Helsinki): drawn under everything, in their own pane, for a map
// that has no tiles offline. With them the view starts on the streets, not on the catalog's areas.
map.createPane("streets").style.zIndex = 250;
let streetsShown = false;
let streetsDrawn = 0;

fetch("/map-config.json").then((r) => r.json()).then((config) => {
  if (config.streets) drawStreets(config.streets, config.streetsAttribution);
  if (!config.tileURL) {
    if (!config.streets) offlineNote("no basemap configured (http.tileURL)");
    return;
  }
  let failed = 0;
  L.tileLayer(config.tileURL, { maxZoom: 19, attribution: config.tileAttribution })
    .on("tileerror", () => {
      if (++failed === 4 && !config.streets) offlineNote("basemap tiles unreachable: areas, rides and scale only");
    })
    .addTo(map);
}).catch(() => offlineNote("no map configuration"));

function drawStreets(url, attribution) {
  fetch(url).then((r) => r.json()).then((streets) => {
    const major = new Set(["motorway", "trunk", "primary", "secondary", "tertiary"]);
    const layer = L.geoJSON(streets, {
      pane: "streets",
      interactive: false,
      style: (feature) => ({
        color: "#b9c0c8", weight: major.has((feature.properties || {}).highway) ? 4 : 2, opacity: 0.9,
      }),
    }).addTo(map);
    // Escaped: Leaflet puts attributions into innerHTML.
    if (attribution) map.attributionControl.addAttribution(textNode(attribution).innerHTML);
    streetsShown = true;
    streetsDrawn = layer.getLayers().length;
    if (!fitted && rides.size === 0) map.fitBounds(layer.getBounds());
  }).catch(() => offlineNote("the streets could not be read"));
}

fetch("/v1/areas").then((r) => r.json()).then((areas) => {
  if (!areas.features || areas.features.length === 0) return;
  const layer = L.geoJSON(areas, {
    renderer,
    style: { color: "#2f6fdb", weight: 1.5, fillOpacity: 0.05 },
    // A text node, not a string: Leaflet puts strings into innerHTML, and area names come from the catalog.
    onEachFeature: (feature, l) => l.bindTooltip(textNode(`${feature.properties.name} (${feature.properties.currencyCode})`)),
  }).addTo(map);
  layer.bringToBack();
  if (!fitted && !streetsShown && rides.size === 0) { map.fitBounds(layer.getBounds()); }
}).catch(() => {});

function textNode(text) {
  const span = document.createElement("span");
  span.textContent = text;
  return span;
}

function offlineNote(text) {
  const note = document.createElement("div");
  note.className = "offline-note";
  note.textContent = text;
  document.getElementById("map").appendChild(note);
}

// MARK: Live updates

function connect() {
  const status = document.getElementById("connection");
  const source = new EventSource("/v1/live");
  source.addEventListener("fleet", (message) => {
    status.textContent = "live";
    status.className = "pill live";
    apply(JSON.parse(message.data));
  });
  source.onerror = () => { status.textContent = "reconnecting…"; status.className = "pill down"; };
}

function apply(event) {
  const started = performance.now();
  applyEvent(event);
  const took = performance.now() - started;
  window.rideMap.lastApplyMs = took;
  window.rideMap.maxApplyMs = Math.max(window.rideMap.maxApplyMs, took);
}

function applyEvent(event) {
  clockSkew = Date.parse(event.time) - Date.now();
  if (event.full) {
    const present = new Set(event.rides.map((s) => s.rideIdentifier));
    for (const id of [...rides.keys()]) if (!present.has(id)) remove(id);
  }
  for (const summary of event.rides) upsert(summary, event.time);
  for (const id of event.removed) remove(id);
  header(event);
  if (!fitted && rides.size > 0) {
    fitted = true;
    map.fitBounds(L.latLngBounds([...rides.values()].map((r) => position(r.summary))).pad(0.2), { maxZoom: 15 });
  }
  drawEndpoints();
  listDirty = true;
  window.rideMap.events += 1;
}

function upsert(summary, time) {
  let ride = rides.get(summary.rideIdentifier);
  if (!ride) {
    const marker = new VehicleMarker(position(summary), styleFor(summary)).addTo(map);
    marker.on("click", () => select(summary.rideIdentifier));
    ride = { summary, marker, timeline: [] };
    rides.set(summary.rideIdentifier, ride);
  } else {
    ride.marker.setLatLng(position(summary));
    ride.marker.setStyle(styleFor(summary));
  }
  const last = ride.timeline[ride.timeline.length - 1];
  if (!last || last.sequence !== summary.sequence || last.phase !== summary.phase) {
    ride.timeline.push({ time, phase: summary.phase, sequence: summary.sequence, eta: etaOf(summary), stale: summary.stale });
    if (ride.timeline.length > TIMELINE_LIMIT) ride.timeline.shift();
  }
  ride.marker.setCourse(summary.location ? summary.location.course : null);
  ride.summary = summary;
  if (selected === summary.rideIdentifier) showPanel(false);
}

function remove(id) {
  const ride = rides.get(id);
  if (!ride) return;
  ride.marker.remove();
  rides.delete(id);
  if (selected === id) closePanel();
}

function header(event) {
  const workers = event.workers;
  document.getElementById("ride-count").textContent = rides.size;
  document.getElementById("worker-count").textContent = workers.members.length;
  document.getElementById("workers").textContent = workers.members.join(", ");
  document.getElementById("dead-letters").textContent = Math.round(event.rejectedPerMinute);
}

function drawEndpoints() {
  endpoints.clearLayers();
  if (rides.size > ENDPOINTS_UP_TO) return;
  for (const ride of rides.values()) {
    const s = ride.summary;
    if (s.phase === "completed") continue;
    const colour = COLOURS[s.phase];
    L.circleMarker([s.pickup.latitude, s.pickup.longitude], { renderer, radius: 3, color: colour, weight: 1, fillOpacity: 0.2 }).addTo(endpoints);
    L.circleMarker([s.dropOff.latitude, s.dropOff.longitude], { renderer, radius: 3, color: colour, weight: 1, fillOpacity: 0.8, fillColor: "#fff" }).addTo(endpoints);
  }
}

// MARK: Side list

function etaOf(s) {
  const before = ["received", "confirmed", "approachingPickup"].includes(s.phase);
  const date = before ? s.estimatedPickupDate : s.estimatedDropOffDate;
  return date ? Date.parse(date) : null;
}

// An estimate with its range (issue 31): "2 min 5 s, at the latest 2 min 50 s".
function withLatest(date, latest) {
  const text = seconds(date ? Date.parse(date) : null);
  return date && latest ? `${text}, at the latest ${seconds(Date.parse(latest))}` : text;
}

function seconds(date) {
  if (date === null || date === undefined) return "–";
  const s = Math.round((date - (Date.now() + clockSkew)) / 1000);
  return s < 60 ? `${Math.max(0, s)} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

function renderList() {
  if (!listDirty) return;
  listDirty = false;
  const query = document.getElementById("search").value.trim().toLowerCase();
  const phase = document.getElementById("phase").value;
  const sort = document.getElementById("sort").value;
  let chosen = [...rides.values()].map((r) => r.summary).filter((s) =>
    (!phase || s.phase === phase) &&
    (!query || s.rideIdentifier.toLowerCase().includes(query) || (s.vehicleId || "").toLowerCase().includes(query)));
  const by = {
    eta: (a, b) => (etaOf(a) ?? Infinity) - (etaOf(b) ?? Infinity),
    age: (a, b) => Date.parse(a.startedAt) - Date.parse(b.startedAt),
    id: (a, b) => a.rideIdentifier.localeCompare(b.rideIdentifier),
  }[sort];
  chosen.sort(by);
  document.getElementById("list-count").textContent =
    `${chosen.length} of ${rides.size} rides` + (chosen.length > LIST_LIMIT ? `, the first ${LIST_LIMIT} shown` : "");
  const list = document.getElementById("list");
  const items = chosen.slice(0, LIST_LIMIT).map((s) => {
    const li = document.createElement("li");
    li.dataset.ride = s.rideIdentifier;
    if (s.stale) li.classList.add("stale");
    if (s.rideIdentifier === selected) li.classList.add("selected");
    const name = document.createElement("span");
    name.textContent = s.rideIdentifier;
    const badge = document.createElement("span");
    badge.className = "phase";
    badge.style.background = COLOURS[s.phase];
    badge.textContent = s.phase + (s.completion ? ` (${s.completion})` : "");
    const sub = document.createElement("span");
    sub.className = "sub";
    sub.textContent = `${s.vehicleId || "no vehicle"} · ${s.rideOption} · ETA ${seconds(etaOf(s))}` + (s.stale ? " · stale" : "");
    li.append(name, badge, sub);
    li.addEventListener("click", () => select(s.rideIdentifier, true));
    return li;
  });
  list.replaceChildren(...items);
}

for (const id of ["search", "phase", "sort"]) {
  document.getElementById(id).addEventListener("input", () => { listDirty = true; renderList(); });
}

// MARK: The ride's panel

let panelFetched = 0;

function select(id, pan) {
  selected = id;
  const ride = rides.get(id);
  if (ride && pan) map.panTo(ride.marker.getLatLng());
  listDirty = true;
  showPanel(true);
}

function closePanel() {
  selected = null;
  selection.clearLayers();
  document.getElementById("panel").hidden = true;
  listDirty = true;
}
document.getElementById("panel-close").addEventListener("click", closePanel);

function showPanel(fetchNow) {
  const ride = rides.get(selected);
  if (!ride) return;
  const panel = document.getElementById("panel");
  panel.hidden = false;
  document.getElementById("panel-title").textContent = ride.summary.rideIdentifier;
  const s = ride.summary;
  selection.clearLayers();
  const here = position(s);
  L.polyline([here, [s.pickup.latitude, s.pickup.longitude], [s.dropOff.latitude, s.dropOff.longitude]],
    { renderer, color: COLOURS[s.phase], weight: 2, dashArray: "4 4" }).addTo(selection);
  L.circleMarker([s.pickup.latitude, s.pickup.longitude], { renderer, radius: 6, color: COLOURS[s.phase] }).bindTooltip(textNode("pickup")).addTo(selection);
  L.circleMarker([s.dropOff.latitude, s.dropOff.longitude], { renderer, radius: 6, color: COLOURS[s.phase], fillColor: "#fff", fillOpacity: 1 }).bindTooltip(textNode("drop-off")).addTo(selection);
  const timeline = document.getElementById("panel-timeline");
  timeline.replaceChildren(...ride.timeline.slice().reverse().map((t) => {
    const li = document.createElement("li");
    li.textContent = `${new Date(t.time).toLocaleTimeString()} · #${t.sequence} · ${t.phase}` + (t.stale ? " · stale" : "");
    return li;
  }));
  // The full status (driver, option, price) from the read API, at most once a second.
  if (fetchNow || Date.now() - panelFetched > 1000) {
    panelFetched = Date.now();
    fetch(`/v1/rides/${encodeURIComponent(selected)}`).then((r) => r.ok ? r.json() : null).then((status) => {
      if (status && status.rideIdentifier === selected) fillStatus(status);
    }).catch(() => {});
  }
}

function fillStatus(status) {
  const option = status.rideOption || {};
  const price = status.completionStatus && status.completionStatus.paymentAmount
    ? `${status.completionStatus.paymentAmount.amount} ${status.completionStatus.paymentAmount.currencyCode} paid`
    : option.priceRange ? `${option.priceRange.minimumPrice}–${option.priceRange.maximumPrice} ${option.priceRange.currencyCode}` : "–";
  const rows = [
    ["phase", status.phase + (status.completionStatus ? ` (${completionText(status.completionStatus)})` : "")],
    ["sequence", status.sequence],
    ["vehicle", [status.vehicle.registrationPlate, status.vehicle.manufacturer, status.vehicle.model].filter(Boolean).join(" · ") || "–"],
    ["driver", status.driver ? [status.driver.displayName, status.driver.rating && `★ ${status.driver.rating}`].filter(Boolean).join(" ") : "–"],
    ["option", option.name + (option.usesMeteredFare === false ? " (fixed price)" : "")],
    ["price", price],
    ["pickup in", withLatest(status.estimatedPickupDate, status.estimatedPickupDateLatest)],
    ["drop-off in", withLatest(status.estimatedDropOffDate, status.estimatedDropOffDateLatest)],
    ["issued", new Date(status.issuedAt).toLocaleTimeString()],
    ["stale", status.stale ? "yes" : "no"],
  ];
  document.getElementById("panel-status").replaceChildren(...rows.flatMap(([k, v]) => {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v;
    dd.dataset.field = k;
    return [dt, dd];
  }));
}

function completionText(c) {
  if (c.missedPickup) return "missed pickup";
  if (c.canceled) return `canceled${c.canceledBy ? " by " + c.canceledBy : ""}`;
  return "completed";
}

// MARK: Legend, hooks for tests, start

document.getElementById("legend").replaceChildren(...PHASES.map((p) => {
  const span = document.createElement("span");
  const dot = document.createElement("i");
  dot.style.background = COLOURS[p];
  span.append(dot, p);
  return span;
}));

// What the browser test reads: the markers on the map, each ride's position and colour.
window.rideMap = {
  events: 0,
  lastApplyMs: 0, // how long the page took over the last event, and the longest so far (responsiveness)
  maxApplyMs: 0,
  markerCount() { let n = 0; map.eachLayer((l) => { if (l instanceof VehicleMarker) n += 1; }); return n; },
  position(id) { const r = rides.get(id); return r ? [r.marker.getLatLng().lat, r.marker.getLatLng().lng] : null; },
  colour(id) { const r = rides.get(id); return r ? r.marker.options.fillColor : null; },
  phase(id) { const r = rides.get(id); return r ? r.summary.phase : null; },
  select(id) { select(id, true); },
  streets() { return streetsDrawn; },
  colours: COLOURS,
};

setInterval(renderList, 1000);
connect();
