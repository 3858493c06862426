/*
 * Support console: the inbox and the conversation page, live over /ws/console/. No build step, like the widget.
 * Every piece of shopper, model and agent text goes into the page as a DOM text node (never as HTML).
 * Actions are CSRF-protected POSTs to the console's views; the socket only watches and sends typing notices.
 */
(function () {
  "use strict";

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
            if (html !== null) root.innerHTML = html;
          });
      }, 250);
    };
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

    var render = function () {
      statusBadge.textContent = labels[state.status] || state.status;
      root.setAttribute("data-status", state.status);
      root.querySelector("[data-action=take]").disabled = state.mine;
      root.querySelector("[data-action=hand-back]").disabled = state.status !== "agent";
      root.querySelector("[data-action=close]").disabled = state.status === "closed";
      root.querySelector("[data-action=reopen]").disabled = state.status !== "closed";
      replyText.disabled = !state.mine;
      replyForm.querySelector("button").disabled = !state.mine;
      replyText.placeholder = state.mine ? "Reply to the shopper (Enter sends)" : "Take over to reply…";
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
        var list = el("ul", "cards");
        (frame.items || []).forEach(function (item) {
          list.appendChild(el("li", null, (item.title || item.sku || "") + " · " + (item.price || "") + " " + (item.currency || "")));
        });
        answers[frame.message_id].appendChild(list);
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
    };

    root.querySelectorAll("[data-action]").forEach(function (button) {
      button.addEventListener("click", function () {
        errorBox.textContent = "";
        post(location.pathname + button.getAttribute("data-action")).then(function (result) {
          if (!result.ok) { errorBox.textContent = result.error || "failed"; return; }
          var activity = document.getElementById("activity");
          activity.appendChild(el("li", null, new Date().toLocaleTimeString() + " · you · " + button.textContent));
          state.status = result.status;
          state.mine = result.status === "agent" && result.assigned_to === me;
          assignee.textContent = result.assigned_to ? "with " + result.assigned_to : "";
          render();
          if (state.mine) replyText.focus();
        });
      });
    });

    var sendReply = function () {
      var text = replyText.value.trim();
      if (!text) return;
      post(replyForm.action, { text: text }).then(function (result) {
        if (!result.ok) { errorBox.textContent = result.error || "failed"; return; }
        replyText.value = "";
      });
    };
    replyForm.addEventListener("submit", function (event) { event.preventDefault(); sendReply(); });
    replyText.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); sendReply(); }
    });
    replyText.addEventListener("input", function () { send({ type: "typing", conversation: conversation }); });
    var canned = document.getElementById("canned");
    if (canned) {
      canned.addEventListener("change", function () {
        if (canned.value) replyText.value = canned.value;
        canned.value = "";
        replyText.focus();
      });
    }

    var noteForm = document.getElementById("note-form");
    noteForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var box = noteForm.querySelector("textarea");
      post(noteForm.action, { text: box.value }).then(function (result) {
        if (!result.ok) { errorBox.textContent = result.error || "failed"; return; }
        var item = el("li");
        item.appendChild(el("strong", null, result.note.author));
        item.appendChild(el("div", null, result.note.text));
        document.getElementById("notes").appendChild(item);
        box.value = "";
      });
    });

    var labelForm = document.getElementById("label-form");
    var setLabel = function (name, on) { return post(labelForm.action, { name: name, on: on ? "1" : "0" }); };
    labelForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var input = labelForm.querySelector("input[name=name]");
      var name = input.value.trim();
      if (!name) return;
      setLabel(name, true).then(function (result) {
        if (!result.ok) return;
        var item = el("li");
        var label = el("label");
        var box = el("input");
        box.type = "checkbox";
        box.checked = true;
        box.setAttribute("data-label", name);
        label.appendChild(box);
        label.appendChild(document.createTextNode(" " + name));
        item.appendChild(label);
        document.getElementById("labels").appendChild(item);
        input.value = "";
      });
    });
    document.getElementById("labels").addEventListener("change", function (event) {
      var name = event.target.getAttribute("data-label");
      if (name) setLabel(name, event.target.checked);
    });

    render();
    scroll();
  }

  connect();
})();
