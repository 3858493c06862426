/*
 * Support console: the inbox and the conversation page, live over /ws/console/. No build step, like the widget.
 * Every piece of shopper, model and agent text goes into the page as a DOM text node (never as HTML).
 * Actions are CSRF-protected POSTs to the console's views; the socket only watches and sends typing notices.
 */
(function () {
  "use strict";

  // Label colours: the CSP allows no style attributes in the markup, so they are set here (CSSOM is allowed).
  function paintLabels(scope) {
    (scope || document).querySelectorAll("[data-color]").forEach(function (chip) {
      var color = chip.getAttribute("data-color");
      if (/^#[0-9a-fA-F]{6}$/.test(color)) chip.style.setProperty("--label-color", color);
    });
  }
  paintLabels();

  var root = document.querySelector("[data-console]");
  if (!root) return;
  var mode = root.getAttribute("data-console");
  var live = document.getElementById("console-live");

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.appendChild(document.createTextNode(String(text)));
    return node;
  }

  function csrfToken() {
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    if (match) return decodeURIComponent(match[1]);
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function post(url, data) {
    var body = new URLSearchParams(data || {});
    return fetch(url, {
      method: "POST", body: body, credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken(), "X-Requested-With": "fetch" },
    }).then(function (response) {
      return response.json().catch(function () { return { ok: false, error: "HTTP " + response.status }; });
    });
  }

  // --- the socket ---------------------------------------------------------------------------------------------

  var ws = null;
  var attempts = 0;
  var handlers = {};

  function send(frame) {
    if (ws && ws.readyState === 1) ws.send(JSON.stringify(frame));
  }

  function connect() {
    var url = (location.protocol === "https:" ? "wss:" : "ws:") + "//" + location.host + "/ws/console/";
    var socket = new WebSocket(url);
    ws = socket;
    socket.onmessage = function (event) {
      var frame;
      try { frame = JSON.parse(event.data); } catch (e) { return; }
      if (frame.type === "hello") { attempts = 0; live.textContent = "live"; }
      (handlers[frame.type] || function () {})(frame);
    };
    socket.onclose = function (event) {
      if (ws !== socket) return;
      ws = null;
      if (event.code === 4403) { live.textContent = "not allowed"; return; }
      var delay = Math.min(30000, 500 * Math.pow(2, attempts++)) * (0.5 + Math.random() / 2);
      live.textContent = "offline, reconnecting";
      setTimeout(connect, delay);
    };
  }

  // --- inbox ----------------------------------------------------------------------------------------------------

  var baseTitle = document.title;
  var alerts = 0;

  function beep() {
    try {
      var Ctx = window.AudioContext || window.webkitAudioContext;
      var ctx = new Ctx();
      var osc = ctx.createOscillator();
      var gain = ctx.createGain();
      osc.frequency.value = 880;
      gain.gain.value = 0.08;
      osc.connect(gain);
      gain.connect(ctx.destination);
      osc.start();
      osc.stop(ctx.currentTime + 0.18);
      osc.onended = function () { ctx.close(); };
    } catch (e) { /* no audio: the title badge still shows it */ }
  }

  function alertHandoff() {
    alerts += 1;
    document.title = "(" + alerts + ") " + baseTitle;
    beep();
  }

  function clearAlerts() {
    if (document.visibilityState === "visible" && document.hasFocus()) {
      alerts = 0;
      document.title = baseTitle;
    }
  }
  window.addEventListener("focus", clearAlerts);
  document.addEventListener("visibilitychange", clearAlerts);

  // --- notifications (the bell): a conversation assigned to me, live on my own channel ---------------------

  var bellCount = document.getElementById("bell-count");
  var bellList = document.getElementById("bell-list");
  var setBell = function (unread) {
    if (!bellCount) return;
    bellCount.textContent = String(unread);
    bellCount.setAttribute("data-unread", String(unread));
    bellCount.hidden = !unread;
  };
  handlers.notification = function (frame) {
    if (!bellList) return;
    var empty = document.getElementById("bell-empty");
    if (empty) empty.remove();
    var item = el("li", "unread-notification");
    var link = el("a", null, frame.text);
    link.href = frame.url;
    item.appendChild(link);
    bellList.insertBefore(item, bellList.firstChild);
    setBell(frame.unread);
    alertHandoff();
  };
  var bellRead = document.getElementById("bell-read");
  if (bellRead) {
    bellRead.addEventListener("submit", function (event) {
      event.preventDefault();
      post(bellRead.action).then(function (result) {
        if (!result.ok) return;
        setBell(0);
        bellList.querySelectorAll(".unread-notification").forEach(function (li) { li.classList.remove("unread-notification"); });
      });
    });
  }

  // --- keyboard shortcuts (never while typing in a field) ------------------------------------------------

  var shortcuts = {};
  var dialog = document.getElementById("shortcuts");
  var showShortcuts = function () { if (dialog && !dialog.open) dialog.showModal(); };
  shortcuts["?"] = showShortcuts;
  document.querySelectorAll("[data-shortcuts]").forEach(function (b) { b.addEventListener("click", showShortcuts); });
  var typingInField = function (target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  };
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing || typingInField(event.target)) return;
    if (dialog && dialog.open) return;
    var run = shortcuts[event.key];
    if (run) { event.preventDefault(); run(event); }
  });
  // j/k walk the inbox's order, kept by the inbox page, from a conversation too.
  var ORDER_KEY = "console:order";
  var savedOrder = function () {
    try { return JSON.parse(sessionStorage.getItem(ORDER_KEY) || "[]"); } catch (e) { return []; }
  };

  if (mode === "inbox") {
    var refreshTimer = null;
    var refresh = function () {
      clearTimeout(refreshTimer);
      refreshTimer = setTimeout(function () {
        var params = new URLSearchParams(location.search);
        params.set("partial", "1");
        fetch(location.pathname + "?" + params.toString(), { credentials: "same-origin" })
          .then(function (r) { return r.ok ? r.text() : null; })
          .then(function (html) {
            // Server-rendered by Django's template engine (escaped there), the same markup as the first load.
            if (html !== null) { root.innerHTML = html; paintLabels(root); saveOrder(); selected = -1; }
          });
      }, 250);
    };
    var selected = -1;
    var rows = function () { return Array.prototype.slice.call(root.querySelectorAll(".inbox-item")); };
    var select = function (index) {
      var all = rows();
      if (!all.length) return;
      selected = Math.max(0, Math.min(all.length - 1, index));
      all.forEach(function (row, i) { row.classList.toggle("selected", i === selected); });
      all[selected].querySelector("a").focus();
    };
    var saveOrder = function () {
      sessionStorage.setItem(ORDER_KEY, JSON.stringify(rows().map(function (row) {
        return row.getAttribute("data-conversation");
      })));
    };
    saveOrder();
    shortcuts.j = function () { select(selected + 1); };
    shortcuts.k = function () { select(selected - 1); };
    handlers.hello = refresh; // after a reconnect, catch up on what was missed
    handlers.inbox = function (frame) {
      if (frame.kind === "handoff") alertHandoff();
      refresh();
    };
    // Wait times tick: refresh once a minute even without events.
    setInterval(refresh, 60000);

    var exportForm = document.getElementById("export-form");
    if (exportForm) {
      exportForm.addEventListener("submit", function (event) {
        event.preventDefault();
        var bar = document.getElementById("export-progress");
        var status = document.getElementById("export-status");
        bar.hidden = false;
        status.textContent = "starting…";
        post(exportForm.action, new FormData(exportForm)).then(function (result) {
          if (!result.ok) { status.textContent = result.error || "failed"; return; }
          var poll = function () {
            fetch(result.progress_url, { credentials: "same-origin" }).then(function (r) { return r.json(); })
              .then(function (p) {
                bar.value = p.progress;
                if (p.status === "done") {
                  status.textContent = "";
                  var link = el("a", null, "Download (" + p.total + " conversations)");
                  link.href = p.download_url;
                  status.appendChild(link);
                } else if (p.status === "failed") {
                  status.textContent = "failed: " + p.error;
                } else {
                  status.textContent = p.done + " / " + (p.total || "?");
                  setTimeout(poll, 700);
                }
              });
          };
          poll();
        });
      });
    }
  }

  // --- one conversation -------------------------------------------------------------------------------------

  if (mode === "conversation") {
    var conversation = root.getAttribute("data-conversation");
    var me = root.getAttribute("data-me");
    var state = { status: root.getAttribute("data-status"), mine: root.getAttribute("data-mine") === "1" };
    var log = document.getElementById("log");
    var typing = document.getElementById("typing");
    var statusBadge = document.getElementById("conv-status");
    var assignee = document.getElementById("conv-assignee");
    var errorBox = document.getElementById("action-error");
    var replyForm = document.getElementById("reply-form");
    var replyText = document.getElementById("reply-text");
    var activityList = document.getElementById("activity");
    var notesList = document.getElementById("notes");
    var answers = {};
    var typingTimer = null;
    var labels = { bot: "Bot", handoff: "Handoff", agent: "Agent", closed: "Closed" };

    var scroll = function () { log.scrollTop = log.scrollHeight; };

    var bubble = function (role, who, text) {
      var node = el("div", "msg msg-" + role);
      node.appendChild(el("span", "who", who));
      node.appendChild(el("div", "text", text));
      log.appendChild(node);
      scroll();
      return node;
    };

    var httpUrl = function (raw) {
      try {
        var url = new URL(String(raw || ""), location.href);
        if ((url.protocol === "http:" || url.protocol === "https:") && /^https?:\/\//i.test(raw)) return url.href;
      } catch (e) { /* not a URL */ }
      return null;
    };

    // The cards the shopper saw: title (a link to the product), price from the catalog, image.
    var cards = function (items) {
      var list = el("ul", "cards");
      (items || []).forEach(function (item) {
        var card = el("li", "card");
        var image = httpUrl(item.image);
        if (image) {
          var img = el("img");
          img.src = image;
          img.alt = "";
          card.appendChild(img);
        }
        var body = el("span", "card-body");
        var link = httpUrl(item.url);
        var title = el(link ? "a" : "span", null, item.title || item.sku || "");
        if (link) { title.href = link; title.target = "_blank"; title.rel = "noopener noreferrer"; }
        body.appendChild(title);
        if (item.price) body.appendChild(el("span", "price", item.price + " " + (item.currency || "")));
        card.appendChild(body);
        list.appendChild(card);
      });
      return list;
    };

    // The policy quotes the shopper saw under the answer.
    var quotes = function (items) {
      var box = el("div", "quotes");
      (items || []).forEach(function (item) {
        var quote = el("blockquote");
        quote.appendChild(el("cite", null, item.title || ""));
        quote.appendChild(document.createTextNode(item.text || ""));
        box.appendChild(quote);
      });
      return box;
    };

    var render = function () {
      statusBadge.textContent = labels[state.status] || state.status;
      root.setAttribute("data-status", state.status);
      root.setAttribute("data-mine", state.mine ? "1" : "0");
      root.querySelector("[data-action=take]").disabled = state.mine;
      root.querySelector("[data-action=hand-back]").disabled = state.status !== "agent";
      root.querySelector("[data-action=close]").disabled = state.status === "closed";
      root.querySelector("[data-action=reopen]").disabled = state.status !== "closed";
      replyText.disabled = !state.mine;
      replyForm.querySelector("button").disabled = !state.mine;
      replyText.placeholder = state.mine ? "Reply to the shopper (Enter sends, / for canned replies)" : "Take over to reply…";
    };

    var showTyping = function (text) {
      typing.textContent = text;
      typing.hidden = false;
      clearTimeout(typingTimer);
      typingTimer = setTimeout(function () { typing.hidden = true; }, 3000);
    };

    var system = function (text) {
      log.appendChild(el("p", "system", text));
      scroll();
    };

    var addActivity = function (text) {
      activityList.appendChild(el("li", null, new Date().toLocaleTimeString() + " · " + text));
    };

    var addNote = function (note) {
      if (note.id && notesList.querySelector('[data-note="' + note.id + '"]')) return; // mine, already shown
      var item = el("li");
      if (note.id) item.setAttribute("data-note", String(note.id));
      item.appendChild(el("strong", null, note.author));
      item.appendChild(el("div", null, note.text));
      notesList.appendChild(item);
    };

    handlers.hello = function () { send({ type: "watch", conversation: conversation }); };
    handlers.frame = function (event) {
      if (event.conversation && event.conversation !== conversation) return;
      var frame = event.frame;
      if (frame.type === "message") {
        typing.hidden = true;
        bubble("user", frame.held ? "Shopper (to you)" : "Shopper", frame.text);
      } else if (frame.type === "start") {
        var node = bubble("assistant", "Assistant", "");
        node.setAttribute("aria-busy", "true");
        node.setAttribute("data-message-id", frame.message_id);
        answers[frame.message_id] = node;
      } else if (frame.type === "products" && answers[frame.message_id]) {
        answers[frame.message_id].appendChild(cards(frame.items));
      } else if (frame.type === "sources" && answers[frame.message_id]) {
        answers[frame.message_id].appendChild(quotes(frame.items));
      } else if (frame.type === "token" && answers[frame.message_id]) {
        answers[frame.message_id].querySelector(".text").appendChild(document.createTextNode(frame.text));
        scroll();
      } else if (frame.type === "end" && answers[frame.message_id]) {
        if (typeof frame.text === "string") answers[frame.message_id].querySelector(".text").textContent = frame.text;
        answers[frame.message_id].removeAttribute("aria-busy");
        delete answers[frame.message_id];
      }
    };
    handlers.agent_message = function (frame) { bubble("agent", frame.agent || "Agent", frame.text); };
    handlers.shopper_typing = function () { showTyping("Shopper is typing…"); };
    handlers.agent_typing = function (frame) { showTyping((frame.agent || "An agent") + " is typing…"); };
    handlers.agent_joined = function (frame) {
      state.status = "agent";
      state.mine = frame.agent === me;
      assignee.textContent = "with " + frame.agent;
      system(frame.agent + " took over");
      render();
    };
    handlers.agent_left = function (frame) {
      if (state.status === "agent") state.status = "bot";
      state.mine = false;
      assignee.textContent = "";
      system(frame.agent + " left; the assistant answers again");
      render();
    };
    handlers.inbox = function (frame) {
      if (frame.conversation !== conversation) return;
      if (frame.kind === "closed") { state.status = "closed"; state.mine = false; render(); }
      else if (frame.kind === "handoff") { state.status = "handoff"; render(); alertHandoff(); }
      else if (frame.kind === "handed_back" && state.status === "closed") { state.status = "bot"; render(); }
      else if (frame.kind === "message") post(location.pathname + "read");
      else if (frame.kind === "order_request") addActivity("Shopper · " + (frame.text || "order request"));
    };
    // What any agent (this one in another tab included) did to this conversation, live.
    handlers.activity = function (frame) {
      if (frame.conversation !== conversation) return;
      addActivity(frame.by + " · " + frame.text);
      if (frame.note) addNote(frame.note);
      if (frame.label) {
        root.querySelectorAll("#labels input[data-label]").forEach(function (box) {
          if (box.getAttribute("data-label") === frame.label.name) box.checked = frame.label.on;
        });
      }
      if (frame.assigned_to) {
        state.status = "agent";
        state.mine = frame.assigned_to === me;
        assignee.textContent = "with " + frame.assigned_to;
        render();
      }
    };

    root.querySelectorAll("[data-action]").forEach(function (button) {
      button.addEventListener("click", function () {
        errorBox.textContent = "";
        post(location.pathname + button.getAttribute("data-action")).then(function (result) {
          if (!result.ok) { errorBox.textContent = result.error || "failed"; return; }
          // The activity line comes back live, as it does to every agent watching.
          state.status = result.status;
          state.mine = result.status === "agent" && result.assigned_to === me;
          assignee.textContent = result.assigned_to ? "with " + result.assigned_to : "";
          render();
          if (state.mine) replyText.focus();
        });
      });
    });

    var assignForm = document.getElementById("assign-form");
    assignForm.addEventListener("submit", function (event) {
      event.preventDefault();
      errorBox.textContent = "";
      post(assignForm.action, { assignee: assignForm.querySelector("select").value }).then(function (result) {
        if (!result.ok) { errorBox.textContent = result.error || "failed"; return; }
        state.status = result.status;
        state.mine = result.status === "agent" && result.assigned_to === me;
        assignee.textContent = result.assigned_to ? "with " + result.assigned_to : "";
        render();
      });
    });

    // --- the reply box and its "/" picker of canned replies ------------------------------------------------

    var cannedData = document.getElementById("canned-data");
    var canned = cannedData ? JSON.parse(cannedData.textContent) : [];
    var picker = document.getElementById("canned-picker");
    var pick = { items: [], index: 0, used: null };
    var placeholderData = document.getElementById("placeholder-data");
    var placeholders = placeholderData ? JSON.parse(placeholderData.textContent) : { values: {}, meaning: {} };
    // {first_name}-style placeholders, filled with what the server knows (placeholders.values_for); one it cannot
    // fill stays in the box, and the agent is told which and why. The server checks again when sending.
    var fill = function (text) {
      var missing = [];
      var filled = text.replace(/\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}/g, function (all, key) {
        var value = placeholders.values[key];
        if (value) return value;
        if (missing.indexOf(key) < 0) missing.push(key);
        return all;
      });
      return { text: filled, missing: missing };
    };
    var explainMissing = function (missing) {
      return "Replace " + missing.map(function (key) {
        var meaning = placeholders.meaning[key];
        return "{" + key + "} (" + (meaning ? meaning + " is not known in this conversation"
          : "not a placeholder the console fills") + ")";
      }).join("; ") + " before sending.";
    };
    var closePicker = function () { picker.hidden = true; pick.items = []; };
    var drawPicker = function () {
      while (picker.firstChild) picker.removeChild(picker.firstChild);
      pick.items.forEach(function (item, i) {
        var option = el("li", i === pick.index ? "active" : null);
        option.setAttribute("role", "option");
        option.setAttribute("aria-selected", i === pick.index ? "true" : "false");
        option.appendChild(el("strong", null, "/" + item.shortcut));
        option.appendChild(el("span", null, " " + item.text));
        option.addEventListener("mousedown", function (event) { event.preventDefault(); choose(i); });
        picker.appendChild(option);
      });
      picker.hidden = !pick.items.length;
    };
    var choose = function (i) {
      var item = pick.items[i];
      if (!item) return;
      var filled = fill(item.text);
      replyText.value = filled.text;
      pick.used = item.id;
      closePicker();
      errorBox.textContent = filled.missing.length ? explainMissing(filled.missing) : "";
      replyText.focus();
      if (filled.missing.length) {
        // Select the first unknown placeholder, so that typing replaces it.
        var at = filled.text.indexOf("{" + filled.missing[0]);
        var end = filled.text.indexOf("}", at) + 1;
        if (at >= 0 && end > at) replyText.setSelectionRange(at, end);
      }
    };
    var updatePicker = function () {
      var match = /^\/([-\w]*)$/.exec(replyText.value);
      if (!match) { closePicker(); return; }
      var query = match[1].toLowerCase();
      pick.items = canned.filter(function (c) { return c.shortcut.indexOf(query) === 0; })
        .concat(canned.filter(function (c) { return query && c.shortcut.indexOf(query) > 0; }));
      pick.index = 0;
      drawPicker();
    };

    var sendReply = function () {
      var text = replyText.value.trim();
      if (!text) return;
      var data = { text: text };
      if (pick.used) data.canned = String(pick.used);
      post(replyForm.action, data).then(function (result) {
        if (!result.ok) { errorBox.textContent = result.error || "failed"; return; }
        errorBox.textContent = "";
        // What the agent typed while it was on its way (the next reply) stays.
        if (replyText.value.trim() === text) { replyText.value = ""; pick.used = null; }
      });
    };
    replyForm.addEventListener("submit", function (event) { event.preventDefault(); sendReply(); });
    replyText.addEventListener("keydown", function (event) {
      if (!picker.hidden && pick.items.length) {
        if (event.key === "ArrowDown" || event.key === "ArrowUp") {
          event.preventDefault();
          var step = event.key === "ArrowDown" ? 1 : -1;
          pick.index = (pick.index + step + pick.items.length) % pick.items.length;
          drawPicker();
          return;
        }
        if (event.key === "Enter" || event.key === "Tab") { event.preventDefault(); choose(pick.index); return; }
        if (event.key === "Escape") { event.preventDefault(); closePicker(); return; }
      }
      if (event.key === "Escape") { replyText.blur(); return; }
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); sendReply(); }
    });
    replyText.addEventListener("input", function () {
      if (!replyText.value) pick.used = null;
      updatePicker();
      send({ type: "typing", conversation: conversation });
    });
    replyText.addEventListener("blur", function () { setTimeout(closePicker, 150); });

    var noteForm = document.getElementById("note-form");
    noteForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var box = noteForm.querySelector("textarea");
      post(noteForm.action, { text: box.value }).then(function (result) {
        if (!result.ok) { errorBox.textContent = result.error || "failed"; return; }
        addNote(result.note);
        box.value = "";
      });
    });

    var labelForm = document.getElementById("label-form");
    document.getElementById("labels").addEventListener("change", function (event) {
      var name = event.target.getAttribute("data-label");
      if (!name) return;
      post(labelForm.action, { name: name, on: event.target.checked ? "1" : "0" }).then(function (result) {
        if (!result.ok) { errorBox.textContent = result.error || "failed"; event.target.checked = !event.target.checked; }
      });
    });

    // Shortcuts of this page.
    var go = function (step) {
      var order = savedOrder();
      var at = order.indexOf(conversation);
      var next = order[at + step];
      if (at >= 0 && next) location.href = "/console/c/" + next + "/";
    };
    shortcuts.j = function () { go(1); };
    shortcuts.k = function () { go(-1); };
    shortcuts.r = function () { if (!replyText.disabled) replyText.focus(); };
    shortcuts.n = function () { noteForm.querySelector("textarea").focus(); };
    shortcuts.t = function () { root.querySelector("[data-action=take]").click(); };
    shortcuts.e = function () { root.querySelector("[data-action=close]").click(); };
    shortcuts.u = function () { location.href = "/console/"; };

    render();
    scroll();
  }

  // --- order requests: a shopper's new request, live (the page is a list of forms: it is not redrawn under
  // an agent typing a note, it says there is more) ----------------------------------------------------------------

  if (mode === "order-requests") {
    var more = document.getElementById("new-requests");
    handlers.inbox = function (frame) {
      if (frame.kind !== "order_request" || !more) return;
      more.hidden = false;
      alertHandoff();
    };
  }

  connect();
})();
