// The page of a share link (issue 30): one ride, from /share/{token}/status and the event stream
// /share/{token}/live (the token travels in the path: an EventSource sends no headers). Nothing else of the
// fleet is asked for or shown.
(function () {
  "use strict";
  const base = window.location.pathname.replace(/\/+$/, "");
  const phaseNames = {
    received: "Booked", confirmed: "Driver assigned", approachingPickup: "Driver approaching",
    pickup: "At the pickup", ongoing: "On the way", completed: "Arrived",
  };
  const colours = {
    received: "#7b8794", confirmed: "#3867d6", approachingPickup: "#f7b731",
    pickup: "#fa8231", ongoing: "#20bf6b", completed: "#4b6584",
  };
  const map = L.map("map", { zoomControl: true }).setView([52.52, 13.405], 13);
  L.control.scale().addTo(map);
  let vehicle = null, pickup = null, dropOff = null, framed = false, ended = false;

  // Without a basemap the markers float on grey: say so on the map, as the fleet map does.
  function offlineNote(value) {
    const note = document.createElement("div");
    note.className = "offline-note";
    note.id = "offline-note";
    note.textContent = value;
    document.getElementById("map").appendChild(note);
  }

  fetch("/map-config.json").then((r) => r.json()).then((config) => {
    // Streets from an extract (http.streets), under the markers, where there are no tiles.
    if (config.streets) {
      map.createPane("streets").style.zIndex = 250;
      fetch(config.streets).then((r) => r.json()).then((streets) => {
        L.geoJSON(streets, { pane: "streets", interactive: false, style: { color: "#b9c0c8", weight: 3 } }).addTo(map);
        const span = document.createElement("span");
        span.textContent = config.streetsAttribution || "";
        if (span.textContent) map.attributionControl.addAttribution(span.innerHTML);
      }).catch(() => {});
    }
    if (!config.tileURL) {
      offlineNote(config.streets ? "no basemap here: the streets, the car, the pickup and the drop-off"
        : "no basemap here: the car, the pickup and the drop-off only");
      return;
    }
    let failed = 0;
    L.tileLayer(config.tileURL, { attribution: config.tileAttribution, maxZoom: 19, referrerPolicy: "no-referrer" })
      .on("tileerror", () => { if (++failed === 4) offlineNote("basemap tiles unreachable: the car, the pickup and the drop-off only"); })
      .addTo(map);
  }).catch(() => offlineNote("no map configuration"));

  function text(id, value) { document.getElementById(id).textContent = value; }

  function time(value) {
    if (!value) return null;
    const date = new Date(value);
    return isNaN(date) ? null : date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  function place(marker, location, options) {
    if (!location) return marker;
    const at = [location.latitude, location.longitude];
    if (marker) { marker.setLatLng(at); return marker; }
    return L.circleMarker(at, options).addTo(map);
  }

  function show(status) {
    const phase = status.phase;
    text("panel-title", phaseNames[phase] || phase);
    text("share-phase", phaseNames[phase] || phase);
    const riding = phase === "ongoing" || phase === "pickup";
    const eta = riding ? time(status.estimatedDropOffDate) : time(status.estimatedPickupDate);
    // Issue 31's range: the latest time nine arrivals in ten come by.
    const latest = riding ? time(status.estimatedDropOffDateLatest) : time(status.estimatedPickupDateLatest);
    text("share-eta", eta ? (riding ? "arrives about " : "pickup about ") + eta + (latest ? `, by ${latest} at the latest` : "") : "");
    const rows = [];
    const car = status.vehicle || {};
    const name = [car.manufacturer, car.model].filter(Boolean).join(" ");
    if (name) rows.push(["Vehicle", name]);
    if (car.registrationPlate) rows.push(["Plate", car.registrationPlate]);
    if (status.driver && status.driver.displayName) rows.push(["Driver", status.driver.displayName]);
    if (status.stale) rows.push(["Position", "not updated lately"]);
    if (status.completionStatus) rows.push(["Completed", status.completionStatus.completed ? "yes" : "no"]);
    const list = document.getElementById("panel-status");
    list.replaceChildren(...rows.flatMap(([term, value]) => {
      const dt = document.createElement("dt"); dt.textContent = term;
      const dd = document.createElement("dd"); dd.textContent = value;
      return [dt, dd];
    }));
    pickup = place(pickup, status.pickupLocation, { radius: 7, color: "#1d2329", fillColor: "#fff", fillOpacity: 1 });
    dropOff = place(dropOff, status.dropOffLocation, { radius: 7, color: "#1d2329", fillColor: "#1d2329", fillOpacity: 1 });
    const colour = colours[phase] || "#333";
    vehicle = place(vehicle, car.location, { radius: 9, color: colour, fillColor: colour, fillOpacity: 0.9 });
    if (vehicle) vehicle.setStyle({ color: colour, fillColor: colour, dashArray: status.stale ? "4" : null });
    document.body.dataset.ride = status.rideIdentifier;
    document.body.dataset.phase = phase;
    if (!framed) {
      const points = [status.pickupLocation, status.dropOffLocation, car.location].filter(Boolean)
        .map((p) => [p.latitude, p.longitude]);
      if (points.length) { map.fitBounds(points, { padding: [40, 40], maxZoom: 16 }); framed = true; }
    }
  }

  function refused(answer) {
    const reason = answer && answer.reason;
    const message = reason === "expiredToken" ? "This share link has expired."
      : reason === "unknownRide" ? "This ride is not on the way yet, or has ended."
      : "This share link does not work" + (reason ? " (" + reason + ")." : ".");
    text("panel-title", message);
    text("connection", "closed");
    document.getElementById("connection").className = "pill down";
    document.body.dataset.refused = reason || "error";
  }

  fetch(base + "/status", { referrerPolicy: "no-referrer", cache: "no-store" })
    .then((r) => r.json().then((body) => ({ ok: r.ok, body })))
    .then(({ ok, body }) => { if (ok) show(body); else if (body.reason !== "unknownRide") refused(body); })
    .catch(() => {});

  // For tests and the curious: what the page shows, read back.
  window.sharedRide = {
    position: () => vehicle && [vehicle.getLatLng().lat, vehicle.getLatLng().lng],
    markers: () => [vehicle, pickup, dropOff].filter(Boolean).length,
  };

  const events = new EventSource(base + "/live");
  events.addEventListener("open", () => {
    text("connection", "live");
    document.getElementById("connection").className = "pill live";
  });
  events.addEventListener("status", (event) => { if (!ended) show(JSON.parse(event.data)); });
  events.addEventListener("ended", () => {
    ended = true;
    events.close();  // the ride is over: nothing more will come, and the worker closes the stream too
    text("panel-title", "This ride has ended.");
    document.body.dataset.phase = "ended";
  });
  events.addEventListener("error", () => {
    if (ended) { events.close(); return; }
    // A refused link (401, 403) closes the stream for good: ask once more why, for the page.
    if (events.readyState === EventSource.CLOSED) {
      fetch(base + "/status", { referrerPolicy: "no-referrer", cache: "no-store" })
        .then((r) => r.json()).then(refused).catch(() => refused(null));
    } else {
      text("connection", "reconnecting…");
      document.getElementById("connection").className = "pill down";
    }
  });
})();
