// orchd console: follows a delegation's events live and sends its
// controls without reloading. The page works without it.
(function () {
  "use strict";
  var tree = document.getElementById("tree");
  if (!tree) return;
  var id = tree.dataset.id;
  var last = Number(tree.dataset.last) || 0;
  var events = document.getElementById("events");
  var receipts = document.getElementById("receipts");
  var stateEl = document.getElementById("state");
  var live = document.getElementById("live");
  var outcome = document.getElementById("outcome");

  function stateName(s) {
    return s ? s.replace(/^TASK_STATE_/, "").toLowerCase().replace(/_/g, " ") : "unknown";
  }
  function texts(parts) {
    return (parts || []).filter(function (p) { return typeof p.text === "string"; })
      .map(function (p) { return p.text; }).join(" ");
  }
  function content(ev) {
    if (ev.error) return ev.error;
    if (ev.artifact) return texts(ev.artifact.parts);
    if (ev.containment) {
      var c = ev.containment;
      return "agent " + c.agent + " contained by " + c.by + " at " + c.at +
        " (running work " + (c.cancel ? "canceled" : "interrupted") + "): " + c.reason;
    }
    return ev.message ? texts(ev.message.parts) : "";
  }
  function cell(row, text) {
    var td = document.createElement("td");
    td.textContent = text;
    row.appendChild(td);
    return td;
  }
  function hops(r) {
    return (r.hops || []).map(function (h) { return h.agent + " #" + h.seq; }).join(" → ");
  }
  function setState(s) {
    var name = stateName(s);
    stateEl.textContent = name;
    stateEl.className = "state s-" + name.replace(/ /g, "-");
    document.querySelectorAll("#hops li:not([data-lineage]) .state").forEach(function (el) {
      el.textContent = name;
      el.className = "state s-" + name.replace(/ /g, "-");
    });
  }
  function add(ev) {
    if (ev.seq <= last) return;
    last = ev.seq;
    var row = document.createElement("tr");
    row.dataset.seq = ev.seq;
    row.dataset.shownAt = Date.now();
    row.className = "new";
    cell(row, String(ev.seq));
    var t = document.createElement("time");
    t.dateTime = ev.at;
    t.textContent = new Date(ev.at).toISOString();
    cell(row, "").appendChild(t);
    cell(row, ev.kind);
    cell(row, stateName(ev.state));
    cell(row, content(ev));
    events.appendChild(row);
    if (ev.state) setState(ev.state);
    if (ev.lineage) lineage(ev.lineage);
    if (/COMPLETED|FAILED|CANCELED|REJECTED/.test(ev.state || "")) {
      tree.dispatchEvent(new Event("console:ended"));
    }
    if (ev.receipt) {
      var li = document.createElement("li");
      li.dataset.seq = ev.seq;
      li.textContent = ev.receipt.control + " " + ev.receipt.messageId + ": " + hops(ev.receipt) +
        (ev.receipt.duplicate ? " (duplicate)" : "");
      receipts.appendChild(li);
      below(ev.receipt.hops || [], ev.state);
    }
  }
  function span(cls, text) {
    var el = document.createElement("span");
    el.className = cls;
    el.textContent = text;
    return el;
  }
  // lineage shows the hops below this orchd's agent as the lineage the
  // agent (an orchd) reported names them: each one's agent, state, task
  // and timings, down to the leaf. It replaces what was shown below.
  function lineage(l) {
    var list = document.getElementById("hops");
    var items = [].slice.call(list.children);
    var self = items.findIndex(function (li) { return li.dataset.role === "this orchd"; });
    if (self < 0) return;
    items.slice(self + 2).forEach(function (li) { li.remove(); });
    var hs = l.hops || [];
    hs.forEach(function (h, i) {
      var li = document.createElement("li");
      li.dataset.depth = String(self + 2 + i);
      li.dataset.role = i < hs.length - 1 || l.truncated ? "orchd below" : "agent below";
      li.dataset.lineage = "";
      var name = document.createElement("strong");
      name.textContent = h.agentName && h.agentName !== h.agent ? h.agentName + " (" + h.agent + ")" : h.agent;
      var st = stateName(h.state);
      li.append(span("role", li.dataset.role), " ", name, " ", span("state s-" + st.replace(/ /g, "-"), st));
      if (h.taskId) {
        var task = span("muted", " task ");
        var code = document.createElement("code");
        code.textContent = h.taskId;
        task.appendChild(code);
        li.append(" ", task);
      }
      if (h.createdAt) {
        var ms = Date.parse(h.updatedAt) - Date.parse(h.createdAt);
        li.append(" ", span("muted", "delegated " + h.createdAt + ", last change " + (ms / 1000).toFixed(3) + "s later"));
      }
      var from = document.createElement("small");
      from.className = "muted";
      from.textContent = "known from the lineage " + (h.name || h.orchd) + " reported";
      li.append(document.createElement("br"), from);
      list.appendChild(li);
    });
    if (l.truncated) {
      var cut = document.createElement("li");
      cut.dataset.lineage = "";
      cut.dataset.role = "hops not shown";
      cut.append(span("role", "hops not shown"), " ", "…");
      list.appendChild(cut);
    }
    var note = document.getElementById("below-unknown");
    if (note) note.hidden = true;
  }
  // below adds the hops a receipt names that the chain does not show
  // yet: a receipt lists this orchd, its agent, then each hop below.
  function below(named, state) {
    var list = document.getElementById("hops");
    var items = [].slice.call(list.children);
    var self = items.findIndex(function (li) { return li.dataset.role === "this orchd"; });
    if (self < 0) return;
    for (var i = items.length - self; i < named.length; i++) {
      var li = document.createElement("li");
      li.dataset.depth = String(self + i);
      li.dataset.role = "agent below";
      var role = document.createElement("span");
      role.className = "role";
      role.textContent = "agent below";
      var name = document.createElement("strong");
      name.textContent = named[i].agent;
      var st = document.createElement("span");
      st.className = "state s-" + stateName(state).replace(/ /g, "-");
      st.textContent = stateName(state);
      var from = document.createElement("small");
      from.className = "muted";
      from.textContent = "known from the latest steering receipt";
      li.append(role, " ", name, " ", st, document.createElement("br"), from);
      list.appendChild(li);
    }
    var note = document.getElementById("below-unknown");
    if (note && named.length > 2) note.hidden = true;
  }

  // follow reads the events after the last one shown; after a dropped
  // stream it opens a new one from there, so nothing is read twice.
  // A stream that fails to open again and again (the daemon is gone, or
  // the delegation is no longer readable) is retried less and less often.
  var src = null, ended = false, retry = 2000;
  function follow() {
    src = new EventSource("/ui/delegations/" + encodeURIComponent(id) + "/events?after=" + last);
    var onEvent = function (m) {
      try { add(JSON.parse(m.data)); } catch (e) { /* a malformed event is skipped */ }
    };
    ["state", "message", "artifact", "steer", "interrupt"].forEach(function (k) { src.addEventListener(k, onEvent); });
    src.onmessage = onEvent;
    src.onopen = function () { retry = 2000; live.textContent = "following live"; };
    src.onerror = function () {
      src.close();
      if (ended) return;
      live.textContent = "reconnecting…";
      setTimeout(follow, retry);
      retry = Math.min(retry * 2, 30000);
    };
  }
  tree.addEventListener("console:ended", function () {
    ended = true;
    if (src) src.close();
    live.textContent = "ended";
  });
  if (!("ended" in tree.dataset) && window.EventSource) follow();

  function show(text, bad) {
    var p = document.createElement("p");
    p.className = bad ? "refused" : "ok";
    p.textContent = text;
    outcome.replaceChildren(p);
  }
  document.querySelectorAll("form[data-control]").forEach(function (form) {
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var button = form.querySelector("button");
      button.disabled = true;
      fetch(form.action, {
        method: "POST",
        headers: { "Accept": "application/json" },
        body: new URLSearchParams(new FormData(form)),
        credentials: "same-origin"
      }).then(function (res) {
        return res.json().catch(function () { return { error: "HTTP " + res.status }; });
      }).then(function (a) {
        if (a.error) {
          // The console's refusal, or the gate's (the API's error shape).
          var why = typeof a.error === "string" ? a.error : a.error.message;
          show((a.action || "control") + " refused: " + why, true);
          return;
        }
        var text = a.action + " done";
        if (a.receipt) text += ": receipt " + hops(a.receipt);
        if (a.state) text += "; state " + a.state;
        show(text, false);
        form.reset();
      }).catch(function (err) {
        show("could not reach the daemon: " + err, true);
      }).finally(function () { button.disabled = false; });
    });
  });
})();
