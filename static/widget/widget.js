/*
 * Shop Assistant chat widget. No build step; a store embeds it with one tag:
 *
 *   <script src="https://assistant.example.com/static/widget/widget.js" data-store="demo" async></script>
 *
 * Optional attributes: data-title (panel heading before the store name arrives), data-open="true" (start open).
 * The server it talks to is the one the script came from (protocol: docs/chat-protocol.md).
 *
 * Security: model and agent text is never parsed as HTML. The markdown renderer below builds DOM nodes and puts
 * every piece of text in as a text node (which the browser escapes), so "<img onerror=...>" shows as those
 * characters. Links are made only for http(s) URLs; product cards take prices and stock from the server's
 * catalog rows, never from model text.
 */
(function () {
  "use strict";

  var script = document.currentScript || document.querySelector('script[src*="widget/widget.js"][data-store]');
  if (!script || window.ShopAssistant) return;

  var scriptUrl = new URL(script.src, document.baseURI);
  var store = script.getAttribute("data-store") || "";
  var wsBase = (scriptUrl.protocol === "https:" ? "wss:" : "ws:") + "//" + scriptUrl.host + "/ws/chat/";
  var cssUrl = new URL("widget.css", scriptUrl).href;
  var storageKey = "shop-assistant:" + scriptUrl.host + ":" + store;
  var openKey = storageKey + ":open";
  var outboxKey = storageKey + ":outbox";

  var CLOSE_NO_STORE = 4404;
  var MAX_BACKOFF_MS = 30000;
  var TYPING_NOTICE_MS = 2000;
  var MAX_OUTBOX = 20; // messages waiting to be sent: enough for a long time offline, small in localStorage

  // ---------------------------------------------------------------------------------------------------------
  // Safe markdown: a small subset (paragraphs, line breaks, bulleted and numbered lists, **bold**, *italics*,
  // [links](https://...), bare https:// addresses), built as DOM nodes. Nothing here ever assigns HTML.
  // ---------------------------------------------------------------------------------------------------------

  // A bare address (the order replies' tracking link) is a link too; the sentence's punctuation after it is not
  // part of it ("tracking: https://..., expected Dec 6."), and matching it whole keeps its underscores literal.
  var INLINE = /\*\*([^*\n]+?)\*\*|__([^_\n]+?)__|\*([^*\s][^*\n]*?)\*|\b_([^_\s][^_\n]*?)_\b|\[([^\]\n]+)\]\(([^()\s]+)\)|(https?:\/\/[^\s<>"]*[^\s<>".,;:!?'")\]])/i;

  function safeHttpUrl(raw) {
    try {
      var url = new URL(raw, document.baseURI);
      if ((url.protocol === "http:" || url.protocol === "https:") && /^https?:\/\//i.test(raw)) return url.href;
    } catch (e) { /* not a URL */ }
    return null;
  }

  function appendInline(parent, text) {
    while (text) {
      var match = INLINE.exec(text);
      if (!match) {
        parent.appendChild(document.createTextNode(text));
        return;
      }
      if (match.index > 0) parent.appendChild(document.createTextNode(text.slice(0, match.index)));
      if (match[1] !== undefined || match[2] !== undefined) {
        var strong = document.createElement("strong");
        appendInline(strong, match[1] !== undefined ? match[1] : match[2]);
        parent.appendChild(strong);
      } else if (match[3] !== undefined || match[4] !== undefined) {
        var em = document.createElement("em");
        appendInline(em, match[3] !== undefined ? match[3] : match[4]);
        parent.appendChild(em);
      } else {
        var bare = match[7] !== undefined;
        var href = safeHttpUrl(bare ? match[7] : match[6]);
        if (href) {
          var a = document.createElement("a");
          a.href = href;
          a.target = "_blank";
          a.rel = "noopener noreferrer nofollow";
          a.appendChild(document.createTextNode(bare ? match[7] : match[5]));
          parent.appendChild(a);
        } else {
          parent.appendChild(document.createTextNode(match[0])); // not http(s): leave it as the text it was
        }
      }
      text = text.slice(match.index + match[0].length);
    }
  }

  var BULLET = /^\s*[-*+]\s+(.*)$/;
  var NUMBERED = /^\s*\d{1,3}[.)]\s+(.*)$/;

  function renderMarkdown(source) {
    var fragment = document.createDocumentFragment();
    var lines = String(source).replace(/\r\n?/g, "\n").split("\n");
    var paragraph = null;
    var list = null;
    var listKind = null;
    lines.forEach(function (line) {
      var bullet = BULLET.exec(line);
      var numbered = bullet ? null : NUMBERED.exec(line);
      if (bullet || numbered) {
        var kind = bullet ? "ul" : "ol";
        if (!list || listKind !== kind) {
          list = document.createElement(kind);
          listKind = kind;
          fragment.appendChild(list);
        }
        var li = document.createElement("li");
        appendInline(li, (bullet || numbered)[1]);
        list.appendChild(li);
        paragraph = null;
        return;
      }
      if (!line.trim()) {
        paragraph = null;
        list = null;
        return;
      }
      list = null;
      if (!paragraph) {
        paragraph = document.createElement("p");
        fragment.appendChild(paragraph);
      } else {
        paragraph.appendChild(document.createElement("br"));
      }
      appendInline(paragraph, line);
    });
    return fragment;
  }

  // ---------------------------------------------------------------------------------------------------------
  // DOM helpers
  // ---------------------------------------------------------------------------------------------------------

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      var value = attrs[name];
      if (value === null || value === undefined || value === false) return;
      if (name === "text") node.textContent = value;
      else if (name === "className") node.className = value;
      else node.setAttribute(name, value === true ? "" : String(value));
    });
    (children || []).forEach(function (child) { if (child) node.appendChild(child); });
    return node;
  }

  // The catalog's amount and currency code ("69.00 USD"), as the answer's own sentences, the storefront and the
  // console write them: a card that says "$69.00" under a sentence that says "69.00 USD" reads as two prices.
  function formatPrice(price, currency) {
    var amount = Number(price);
    if (price === null || price === undefined || price === "" || !isFinite(amount)) return "";
    return amount.toFixed(2) + (currency ? " " + currency : "");
  }

  function cardImage(src) {
    var img = el("img", { className: "sa-card-image", src: src, alt: "", loading: "lazy", width: 64, height: 64 });
    // A broken image becomes the plain placeholder box instead of the browser's broken-image icon.
    img.addEventListener("error", function () { img.removeAttribute("src"); img.classList.add("sa-broken"); });
    return img;
  }

  // messageId: the answer the cards belong to, so that opening one is reported (`card_click`) for the store's
  // analytics; the link opens whatever happens to the report.
  function productCards(items, messageId) {
    var list = el("ul", { className: "sa-cards", "aria-label": "Products" });
    (items || []).forEach(function (item) {
      var href = item.url ? safeHttpUrl(item.url) : null;
      // The shop's own pictures may be paths on this assistant's site ("/static/demo/..."), not the page's.
      var imageUrl = /^\/(?!\/)/.test(item.image || "") ? new URL(item.image, scriptUrl).href : item.image;
      var image = imageUrl ? safeHttpUrl(imageUrl) : null;
      var title = href
        ? el("a", { href: href, target: "_blank", rel: "noopener noreferrer", text: item.title || item.sku || "" })
        : el("span", { text: item.title || item.sku || "" });
      if (href && messageId && item.sku) {
        title.addEventListener("click", function () {
          sendFrame({ type: "card_click", message_id: messageId, sku: String(item.sku) });
        });
      }
      list.appendChild(el("li", { className: "sa-card" }, [
        image ? cardImage(image) : null,
        el("div", { className: "sa-card-body" }, [
          el("p", { className: "sa-card-title" }, [title]),
          el("p", { className: "sa-card-meta" }, [
            el("span", { className: "sa-card-price", text: formatPrice(item.price, item.currency) }),
            el("span", {
              className: "sa-stock " + (item.in_stock ? "sa-in" : "sa-out"),
              text: item.in_stock ? "In stock" : "Out of stock",
            }),
          ]),
        ]),
      ]));
    });
    return list;
  }

  // The store document's own sentences that answer a policy question: shown word for word under the answer,
  // so the figure the shopper asked for is on screen whatever the model wrote.
  function sourceQuotes(items) {
    var box = el("div", { className: "sa-sources", "aria-label": "From the store's policies" });
    (items || []).forEach(function (item) {
      box.appendChild(el("figure", { className: "sa-source" }, [
        el("blockquote", { className: "sa-quote", text: item.text || "" }),
        el("figcaption", { className: "sa-source-title", text: item.title || "" }),
      ]));
    });
    return box;
  }

  // ---------------------------------------------------------------------------------------------------------
  // The widget
  // ---------------------------------------------------------------------------------------------------------

  var host = el("div", { id: "shop-assistant-widget" });
  var root = host.attachShadow ? host.attachShadow({ mode: "open" }) : host;
  root.appendChild(el("link", { rel: "stylesheet", href: cssUrl }));

  // The launcher counts the messages a person of the store wrote while the panel was closed (cleared on open).
  var unreadBadge = el("span", { className: "sa-badge", hidden: true, "aria-hidden": "true" });
  var launcher = el("button", {
    type: "button", className: "sa-launcher", "aria-expanded": "false", "aria-controls": "sa-panel",
  }, [document.createTextNode("Chat with us"), unreadBadge]);
  var title = el("h2", { className: "sa-title", id: "sa-title", text: script.getAttribute("data-title") || "Shop assistant" });
  var status = el("p", { className: "sa-status", id: "sa-status", role: "status", text: "" });
  var closeButton = el("button", { type: "button", className: "sa-close", "aria-label": "Close chat", text: "\u00d7" });
  // "End chat" (docs/chat-protocol.md, `end`): the shopper resolves the conversation, after a confirm step, as an
  // agent's resolve does; then the rating card and "Start a new chat". Shown once there is a conversation to end.
  var endButton = el("button", { type: "button", className: "sa-end", hidden: true, text: "End chat" });
  var confirmYes = el("button", { type: "button", className: "sa-confirm-end", text: "End chat" });
  var confirmNo = el("button", { type: "button", className: "sa-confirm-cancel", text: "Keep chatting" });
  var confirmBar = el("div", { className: "sa-confirm", role: "alertdialog", "aria-labelledby": "sa-confirm-text", hidden: true }, [
    el("p", { id: "sa-confirm-text", className: "sa-confirm-text", text: "End this chat? You can rate it, and start a new one any time." }),
    el("div", { className: "sa-confirm-actions" }, [confirmYes, confirmNo]),
  ]);
  var log = el("div", {
    className: "sa-log", role: "log", "aria-live": "polite", "aria-relevant": "additions", "aria-label": "Conversation",
    tabindex: "0",
  });
  var typingLabel = el("span", { className: "sa-visually-hidden", text: "Assistant is typing" });
  var typing = el("div", { className: "sa-typing", hidden: true }, [
    el("span", { className: "sa-dots", "aria-hidden": "true" }, [el("span"), el("span"), el("span")]),
    typingLabel,
  ]);
  var errorBox = el("p", { className: "sa-error", role: "alert", hidden: true });
  var input = el("textarea", {
    id: "sa-input", className: "sa-input", rows: "2", maxlength: "2000", autocomplete: "off",
    placeholder: "Ask about products, sizes, shipping\u2026", "aria-describedby": "sa-hint",
  });
  var label = el("label", { className: "sa-visually-hidden", for: "sa-input", text: "Your message" });
  var hint = el("p", { id: "sa-hint", className: "sa-visually-hidden", text: "Enter sends, Shift+Enter adds a line, Escape closes the chat." });
  var sendButton = el("button", { type: "submit", className: "sa-send", text: "Send" });
  var stopButton = el("button", { type: "button", className: "sa-stop", hidden: true, text: "Stop" });
  var form = el("form", { className: "sa-form" }, [label, hint, input, sendButton, stopButton]);
  var panel = el("section", {
    id: "sa-panel", className: "sa-panel", role: "dialog", "aria-labelledby": "sa-title", "aria-describedby": "sa-status",
    hidden: true,
  }, [
    el("header", { className: "sa-header" }, [
      el("div", { className: "sa-heading" }, [title, status]),
      el("div", { className: "sa-header-actions" }, [endButton, closeButton]),
    ]),
    confirmBar, log, typing, errorBox, form,
  ]);
  root.appendChild(launcher);
  root.appendChild(panel);

  var ws = null;
  var attempts = 0;
  var reconnectTimer = null;
  var stopped = false; // true after a close that must not be retried (unknown store)
  var generating = null; // {id, bubble, text, frame} of the answer being streamed
  var pendingUser = null; // the user bubble whose answer has not started yet
  var lastTypingNotice = 0;
  var renderQueued = false;
  var agentName = null; // a person from the store has the conversation (agent_joined .. agent_left)
  var agentTypingTimer = null;
  var suggestionsBox = null; // the store's sample questions, until the shopper says something
  var emailBox = null; // the out-of-hours email offer
  var csatBox = null; // the rating card after an agent resolved the conversation
  var ended = false; // the conversation was resolved (until the shopper writes again)
  var unread = 0; // agent messages that came while the panel was closed
  var pageTitle = null; // the page's own title while the tab's title says there are unread messages
  var PHONE = window.matchMedia ? window.matchMedia("(max-width: 480px)") : null;
  var savedOverflow = null; // the page's own overflow values while the full-screen panel locks its scroll
  // The outbox (docs/chat-protocol.md, "Exactly once"): the shopper's messages, each with its client id, kept in
  // localStorage from the moment they are sent until the server has them (`ack`) and their answer has started,
  // and sent again, in order, after a reconnect or a reload. The server stores a message once per client id.
  var outbox = loadOutbox(); // [{id, text}], oldest first
  var inflight = null; // the client id sent on this socket and not acknowledged yet
  var answering = null; // the client id acknowledged whose answer has not started yet (it stays in the outbox)
  var readyHere = false; // this socket had its `ready`: messages may go
  var retryTimer = null;

  function loadSaved() {
    try { return JSON.parse(localStorage.getItem(storageKey) || "null") || {}; } catch (e) { return {}; }
  }
  function save(data) {
    try { localStorage.setItem(storageKey, JSON.stringify(data)); } catch (e) { /* private mode: no resume */ }
  }

  function loadOutbox() {
    try {
      var entries = JSON.parse(localStorage.getItem(outboxKey) || "[]");
      return Array.isArray(entries) ? entries.filter(function (e) { return e && typeof e.id === "string" && typeof e.text === "string"; }) : [];
    } catch (e) { return []; }
  }
  function saveOutbox() {
    try { localStorage.setItem(outboxKey, JSON.stringify(outbox)); } catch (e) { /* private mode: kept for this page only */ }
  }
  function dropFromOutbox(id) {
    outbox = outbox.filter(function (entry) { return entry.id !== id; });
    saveOutbox();
  }

  // A v4 UUID: crypto.randomUUID where the page is a secure context, else from crypto.getRandomValues.
  function newClientId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    var hex = Array.prototype.map.call(bytes, function (b) { return (b + 0x100).toString(16).slice(1); }).join("");
    return hex.slice(0, 8) + "-" + hex.slice(8, 12) + "-" + hex.slice(12, 16) + "-" + hex.slice(16, 20) + "-" + hex.slice(20);
  }

  function bubbleFor(id) {
    return log.querySelector('.sa-user[data-client-id="' + String(id).replace(/[^0-9a-f-]/gi, "") + '"]');
  }

  // A message not acknowledged yet: "Sending…" while it is on its way, "Not sent yet…" while offline. Never
  // "failed" for a message the outbox will send again.
  var PENDING_TEXT = { sending: "Sending\u2026", queued: "Not sent yet \u2013 it will be sent when the chat reconnects" };
  function setPending(bubble, state) {
    if (!bubble) return;
    var note = bubble.querySelector(".sa-pending-note");
    bubble.classList.toggle("sa-pending", !!state);
    if (!state) { if (note) note.remove(); return; }
    if (!note) {
      note = el("p", { className: "sa-note sa-pending-note" });
      bubble.appendChild(note);
    }
    note.textContent = PENDING_TEXT[state];
  }

  // The oldest message of the outbox goes out when this socket is ready and nothing else is on its way.
  function flush() {
    clearTimeout(retryTimer);
    if (!readyHere || inflight || answering || generating || pendingUser || !outbox.length) return;
    var entry = outbox[0];
    if (!sendFrame({ type: "message", text: entry.text, client_id: entry.id })) return;
    inflight = entry.id;
    var bubble = bubbleFor(entry.id);
    setPending(bubble, "sending");
    if (!agentName) { // a person answers in their own time: nothing to wait for
      pendingUser = bubble;
      typing.hidden = false;
      setGenerating(true);
    }
  }

  // The message's answer started, or none follows: it has left the outbox for good.
  function delivered(id) {
    if (answering === id) answering = null;
    dropFromOutbox(id);
  }

  function setStatus(text) { status.textContent = text; }

  function showError(message) {
    errorBox.textContent = message;
    errorBox.hidden = !message;
  }

  function scrollToEnd() { log.scrollTop = log.scrollHeight; }

  var STATUS_TEXT = { handoff: "A person has been asked to join", closed: "Conversation ended" };

  function statusFor(conversationStatus) { return STATUS_TEXT[conversationStatus] || "Online"; }

  // Thumbs on an assistant answer (`rate`): pressing the pressed one again takes the rating back (value 0).
  // The buttons show the server's answer (`rated`), so a rating that was not stored is not shown as stored.
  // Thumb icons as SVG built node by node (Feather's thumbs-up/down, MIT): no emoji font needed on the page.
  var THUMB_UP = "M14 9V5a3 3 0 0 0-3-3l-4 9v11h11.28a2 2 0 0 0 2-1.7l1.38-9a2 2 0 0 0-2-2.3zM7 22H4a2 2 0 0 1-2-2v-7a2 2 0 0 1 2-2h3";
  var THUMB_DOWN = "M10 15v4a3 3 0 0 0 3 3l4-9V2H5.72a2 2 0 0 0-2 1.7l-1.38 9a2 2 0 0 0 2 2.3zm7-13h2.67A2.31 2.31 0 0 1 22 4v7a2.31 2.31 0 0 1-2.33 2H17";
  function icon(pathData) {
    var ns = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("width", "14");
    svg.setAttribute("height", "14");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    var path = document.createElementNS(ns, "path");
    path.setAttribute("d", pathData);
    svg.appendChild(path);
    return svg;
  }

  function addRating(bubble, messageId, value) {
    var up = el("button", { type: "button", className: "sa-thumb sa-up", "aria-label": "Helpful", "aria-pressed": value === 1 ? "true" : "false" }, [icon(THUMB_UP)]);
    var down = el("button", { type: "button", className: "sa-thumb sa-down", "aria-label": "Not helpful", "aria-pressed": value === -1 ? "true" : "false" }, [icon(THUMB_DOWN)]);
    function rate(button, wanted) {
      var pressed = button.getAttribute("aria-pressed") === "true";
      sendFrame({ type: "rate", message_id: messageId, value: pressed ? 0 : wanted });
    }
    up.addEventListener("click", function () { rate(up, 1); });
    down.addEventListener("click", function () { rate(down, -1); });
    bubble.appendChild(el("div", { className: "sa-rating", role: "group", "aria-label": "Was this answer helpful?" }, [up, down]));
  }

  function showRated(messageId, value) {
    var bubble = log.querySelector('[data-message-id="' + String(messageId).replace(/[^0-9a-f-]/gi, "") + '"]');
    if (!bubble) return;
    var up = bubble.querySelector(".sa-up");
    var down = bubble.querySelector(".sa-down");
    if (up) up.setAttribute("aria-pressed", value === 1 ? "true" : "false");
    if (down) down.setAttribute("aria-pressed", value === -1 ? "true" : "false");
  }

  function hideSuggestions() {
    if (suggestionsBox) suggestionsBox.remove();
    suggestionsBox = null;
  }

  // The store's sample questions as buttons; a click asks it.
  function addSuggestions(questions) {
    hideSuggestions();
    if (!questions || !questions.length) return;
    suggestionsBox = el("div", { className: "sa-suggestions", role: "group", "aria-label": "Suggested questions" });
    questions.forEach(function (question) {
      var button = el("button", { type: "button", className: "sa-suggestion", text: String(question) });
      button.addEventListener("click", function () {
        if (generating || pendingUser) return;
        input.value = String(question);
        submit();
      });
      suggestionsBox.appendChild(button);
    });
    log.appendChild(suggestionsBox);
  }

  // Nobody is there to take the chat: say when they are back and offer to take an email (`email`).
  function addEmailOffer(back) {
    if (emailBox) emailBox.remove();
    var field = el("input", { type: "email", className: "sa-email-input", id: "sa-email", autocomplete: "email", required: true, maxlength: "254", placeholder: "you@example.com" });
    var emailForm = el("form", { className: "sa-email", "aria-label": "Leave your email" }, [
      el("label", { for: "sa-email", className: "sa-email-label", text: "Our team is back at " + back + ". Leave your email and we'll answer you there if you've gone:" }),
      el("div", { className: "sa-email-row" }, [field, el("button", { type: "submit", className: "sa-email-save", text: "Save" })]),
    ]);
    emailForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var email = field.value.trim();
      if (!email) { field.focus(); return; }
      if (!sendFrame({ type: "email", email: email })) showError("Not connected \u2013 try again in a moment.");
    });
    emailBox = emailForm;
    log.appendChild(emailForm);
    scrollToEnd();
  }

  // The conversation was resolved: a 1-5 rating and an optional comment (`csat`).
  function addCsat(done) {
    var previous = csatBox && csatBox.parentNode ? csatBox : null; // the card being answered: thanks in its place
    if (done) {
      csatBox = el("p", { className: "sa-notice sa-csat-thanks", text: "Thanks for rating this conversation (" + done.rating + " of 5)." });
      if (previous) previous.replaceWith(csatBox);
      else log.appendChild(csatBox);
      scrollToEnd();
      return;
    }
    if (previous) previous.remove();
    var chosen = 0;
    var stars = el("div", { className: "sa-stars", role: "radiogroup", "aria-label": "Your rating, 1 to 5" });
    var buttons = [];
    [1, 2, 3, 4, 5].forEach(function (n) {
      var star = el("button", { type: "button", role: "radio", className: "sa-star", "aria-checked": "false", "aria-label": n + " of 5", text: "\u2605" });
      star.addEventListener("click", function () {
        chosen = n;
        buttons.forEach(function (b, i) {
          b.setAttribute("aria-checked", i + 1 === n ? "true" : "false");
          b.classList.toggle("sa-on", i < n);
        });
        send.disabled = false;
      });
      buttons.push(star);
      stars.appendChild(star);
    });
    var comment = el("textarea", { className: "sa-csat-comment", id: "sa-csat-comment", rows: "2", maxlength: "2000", placeholder: "Anything to add? (optional)" });
    var send = el("button", { type: "submit", className: "sa-csat-send", text: "Send rating", disabled: true });
    var card = el("form", { className: "sa-csat", "aria-label": "Rate this conversation" }, [
      el("p", { className: "sa-csat-title", text: "How was this conversation?" }),
      stars,
      el("label", { for: "sa-csat-comment", className: "sa-visually-hidden", text: "Comment" }),
      comment,
      send,
    ]);
    card.addEventListener("submit", function (event) {
      event.preventDefault();
      if (!chosen) return;
      sendFrame({ type: "csat", rating: chosen, comment: comment.value.trim() });
    });
    csatBox = card;
    log.appendChild(card);
    scrollToEnd();
  }

  function endConversation(csat) {
    ended = true;
    if (emailBox) { emailBox.remove(); emailBox = null; }
    agentName = null;
    setStatus("Conversation ended");
    addNotice("Conversation ended");
    addCsat(csat);
    showEndButton(false);
    var again = el("button", { type: "button", className: "sa-new-chat", text: "Start a new chat" });
    again.addEventListener("click", newChat);
    log.appendChild(el("p", { className: "sa-new-chat-row" }, [again]));
    scrollToEnd();
  }

  function showEndButton(on) { endButton.hidden = !on || ended; }

  function hideConfirm() {
    var had = !confirmBar.hidden;
    confirmBar.hidden = true;
    if (had && (root.activeElement === confirmYes || root.activeElement === confirmNo)) endButton.focus();
  }

  // The ended conversation stays as it is (rated or not); the next one is a new conversation: the widget forgets
  // the old one's token and connects without it (docs/chat-protocol.md, "Ending a chat").
  function newChat() {
    save({});
    ended = false;
    readyHere = false;
    inflight = answering = null;
    if (ws) {
      var old = ws;
      ws = null;
      old.onclose = null;
      old.close();
    }
    attempts = 0;
    connect();
    input.focus();
  }

  // When a message was said, in the shopper's local time: the server's time for history items (`at`), the
  // moment it arrived for live ones. Hours and minutes today, the date before them on other days.
  function timeOf(at) {
    var when = at ? new Date(at) : new Date();
    if (isNaN(when.getTime())) when = new Date();
    var today = when.toDateString() === new Date().toDateString();
    var label = today
      ? when.toLocaleTimeString([], { hour: "numeric", minute: "2-digit" })
      : when.toLocaleString([], { month: "short", day: "numeric", hour: "numeric", minute: "2-digit" });
    return el("time", { className: "sa-time", datetime: when.toISOString(), title: when.toLocaleString(), text: label });
  }

  function addBubble(role, text, extra) {
    var body = el("div", { className: "sa-text" });
    body.appendChild(role === "user" ? document.createTextNode(text) : renderMarkdown(text));
    var bubble = el("div", { className: "sa-msg sa-" + role }, [
      role === "agent" ? el("p", { className: "sa-agent-name", text: (extra && extra.agent) || "Agent" }) : null,
      el("span", { className: "sa-visually-hidden", text: role === "user" ? "You said:" : role === "agent" ? "Agent said:" : "Assistant said:" }),
      body,
      timeOf(extra && extra.at),
    ]);
    log.appendChild(bubble);
    var messageId = extra && extra.message_id;
    if (messageId) bubble.setAttribute("data-message-id", messageId);
    if (role === "user" && extra && extra.client_id) bubble.setAttribute("data-client-id", extra.client_id);
    if (extra && extra.products && extra.products.length) bubble.appendChild(productCards(extra.products, messageId));
    if (extra && extra.quotes && extra.quotes.length) bubble.appendChild(sourceQuotes(extra.quotes));
    if (role === "assistant" && messageId && text && !(extra && extra.interrupted)) {
      addRating(bubble, messageId, extra.rating);
    }
    scrollToEnd();
    return bubble;
  }

  // The store's greeting (owner text from the studio): the first bubble, put in as a text node, so markup in it
  // shows as the characters it is. Not part of the conversation: the server neither stores nor replays it.
  function addGreeting(text) {
    log.appendChild(el("div", { className: "sa-msg sa-greeting" }, [
      el("span", { className: "sa-visually-hidden", text: "Assistant said:" }),
      el("div", { className: "sa-text", text: text }),
    ]));
  }

  function addNotice(text) {
    log.appendChild(el("p", { className: "sa-notice", text: text }));
    scrollToEnd();
  }

  // An answer its server's failure cut (docs/chat-protocol.md, `ready`): the notice, as text, and a button that
  // sends the question again.
  function addInterrupted(bubble, notice, question) {
    bubble.classList.add("sa-interrupted");
    var note = el("p", { className: "sa-note", text: notice || "The answer was interrupted. Ask again?" });
    if (question) {
      var again = el("button", { type: "button", className: "sa-again", text: "Ask again" });
      again.addEventListener("click", function () {
        if (generating || pendingUser) return;
        input.value = question;
        submit();
      });
      note.appendChild(document.createTextNode(" "));
      note.appendChild(again);
    }
    bubble.appendChild(note);
  }

  function setGenerating(on) {
    stopButton.hidden = !on;
    sendButton.hidden = on;
    if (!on) typing.hidden = true;
  }

  function renderGenerating() {
    renderQueued = false;
    if (!generating) return;
    var body = generating.bubble.querySelector(".sa-text");
    body.textContent = "";
    body.appendChild(renderMarkdown(generating.text));
    scrollToEnd();
  }

  function queueRender() {
    if (renderQueued) return;
    renderQueued = true;
    (window.requestAnimationFrame || setTimeout)(renderGenerating);
  }

  function finishGenerating(note, rateable) {
    if (!generating) return;
    renderGenerating();
    generating.bubble.removeAttribute("aria-busy");
    if (note) generating.bubble.appendChild(el("p", { className: "sa-note", text: note }));
    if (rateable && generating.text) addRating(generating.bubble, generating.id, null);
    generating = null;
    setGenerating(false);
    scrollToEnd(); // the note and the thumbs came after the last text
  }

  function handle(frame) {
    switch (frame.type) {
      case "ready":
        attempts = 0;
        // `said`: the conversation has messages, so later page loads connect with the panel closed (`mount`).
        save({ token: frame.resume_token, conversation: frame.conversation, said: (frame.history || []).length > 0 });
        if (frame.store && frame.store.name) title.textContent = frame.store.name;
        setStatus(statusFor(frame.status));
        ended = frame.status === "closed";
        hideConfirm();
        showError("");
        generating = null;
        pendingUser = null;
        agentName = null; // an agent_joined frame follows when a person has the conversation
        setGenerating(false);
        log.textContent = "";
        suggestionsBox = emailBox = csatBox = null;
        if (frame.store && typeof frame.store.greeting === "string" && frame.store.greeting) addGreeting(frame.store.greeting);
        var lastQuestion = "";
        (frame.history || []).forEach(function (item) {
          var bubble = addBubble(item.role === "user" ? "user" : item.role === "agent" ? "agent" : "assistant", item.text || "", item);
          if (item.role === "user") lastQuestion = item.text || "";
          if (item.interrupted) addInterrupted(bubble, item.notice, lastQuestion);
        });
        // What the outbox still holds: shown after the history (once: a message the server kept already is in it)
        // and sent again, in order; the server acknowledges a message it has without storing it twice.
        outbox.forEach(function (entry) {
          setPending(bubbleFor(entry.id) || addBubble("user", entry.text, { client_id: entry.id }), "queued");
        });
        if (!lastQuestion && !outbox.length) addSuggestions(frame.suggestions);
        if (frame.status === "handoff" && frame.ask_email) addEmailOffer(frame.ask_email);
        if (ended) endConversation(frame.csat);
        showEndButton((frame.history || []).length > 0 || outbox.length > 0);
        readyHere = true;
        inflight = answering = null;
        flush();
        break;
      case "ack":
        if (frame.client_id !== inflight) break;
        inflight = null;
        var kept = loadSaved();
        if (kept.token && !kept.said) { kept.said = true; save(kept); }
        setPending(bubbleFor(frame.client_id), null);
        if (frame.message_id && !agentName) {
          answering = frame.client_id; // kept until `start`: a server lost before it sends it again
        } else {
          delivered(frame.client_id);
          if (pendingUser) { pendingUser = null; setGenerating(false); }
          flush();
        }
        break;
      case "start":
        if (answering) delivered(answering);
        pendingUser = null;
        generating = { id: frame.message_id, text: "", bubble: addBubble("assistant", "") };
        generating.bubble.setAttribute("aria-busy", "true");
        generating.bubble.setAttribute("data-message-id", frame.message_id);
        setGenerating(true);
        typingLabel.textContent = "Assistant is typing";
        typing.hidden = false;
        break;
      case "products":
        if (generating && generating.id === frame.message_id) {
          generating.bubble.appendChild(productCards(frame.items, frame.message_id));
          scrollToEnd();
        }
        break;
      case "sources":
        if (generating && generating.id === frame.message_id) {
          generating.bubble.appendChild(sourceQuotes(frame.items));
          scrollToEnd();
        }
        break;
      case "token":
        if (generating && generating.id === frame.message_id) {
          typing.hidden = true;
          generating.text += frame.text;
          queueRender();
        }
        break;
      case "end":
        if (generating && generating.id === frame.message_id) {
          // A budget that ran out needs no note: the kept answer ends on a whole sentence.
          var notes = { abort: "Stopped.", error: "Sorry, something went wrong. Please try again." };
          // The answer as kept: it replaces what was streamed (a sentence a guard took back is gone).
          if (typeof frame.text === "string") generating.text = frame.text;
          if (frame.finish_reason === "error" && !generating.text) generating.bubble.classList.add("sa-failed");
          if (frame.reply) {
            // A fixed reply of the store (no match, handoff, "are you a bot?"), not model text.
            generating.bubble.classList.add("sa-fixed");
            generating.bubble.setAttribute("data-reply", frame.reply);
            if (frame.reply === "handoff") setStatus("A person has been asked to join");
          }
          var handoffAway = frame.reply === "handoff" && frame.ask_email;
          finishGenerating(notes[frame.finish_reason] || "", frame.finish_reason !== "error");
          if (handoffAway) addEmailOffer(frame.ask_email);
          flush();
        }
        break;
      case "rated":
        showRated(frame.message_id, frame.value);
        break;
      case "email_saved":
        if (emailBox) emailBox.remove();
        emailBox = null;
        addNotice(frame.message || "Thanks! We'll email you.");
        break;
      case "csat_saved":
        addCsat({ rating: frame.rating });
        break;
      case "conversation_ended":
        hideConfirm();
        if (!ended) endConversation(frame.csat);
        break;
      case "agent_message":
        typing.hidden = true;
        addBubble("agent", frame.text || "", { agent: frame.agent });
        if (panel.hidden) countUnread();
        break;
      // A person from the store joins or leaves (docs/chat-protocol.md, "A person in the conversation").
      case "agent_joined":
        agentName = frame.agent || "An agent";
        if (emailBox) { emailBox.remove(); emailBox = null; } // someone is here now: no email needed
        setStatus("Chatting with " + agentName);
        addNotice(agentName + " joined the chat");
        break;
      case "agent_left":
        if (agentName) addNotice((frame.agent || agentName) + " left the chat; the assistant is back");
        agentName = null;
        // A resolve sends it too, and the shopper's own End chat is answered before it: the chat stays ended.
        if (!ended) setStatus("Online");
        break;
      case "agent_typing":
        if (!generating) {
          typingLabel.textContent = (frame.agent || "An agent") + " is typing";
          typing.hidden = false;
          clearTimeout(agentTypingTimer);
          agentTypingTimer = setTimeout(function () {
            typing.hidden = true;
            typingLabel.textContent = "Assistant is typing";
          }, 3000);
        }
        break;
      case "error":
        showError(frame.message || "Something went wrong.");
        if (frame.client_id && (frame.client_id === inflight || frame.client_id === answering)) {
          var refused = bubbleFor(frame.client_id);
          if (frame.client_id === inflight) inflight = null;
          if (frame.code === "rate_limited" || frame.code === "busy") { // not now: the outbox sends it again
            setPending(refused, "queued");
            pendingUser = null;
            setGenerating(false);
            retryTimer = setTimeout(flush, Math.max(1, Number(frame.retry_after) || 2) * 1000);
            break;
          }
          delivered(frame.client_id); // refused for good, or saved nowhere: the shopper sends it again if they want
          setPending(refused, null);
          if (refused) refused.classList.add("sa-failed");
        } else if (answering && !frame.client_id) {
          delivered(answering); // kept, but its answer could not be prepared (the message says why)
        }
        if (pendingUser) {
          pendingUser.classList.add("sa-failed");
          pendingUser = null;
          setGenerating(false);
        }
        flush();
        break;
      default:
        break; // newer server, older widget: ignore what we do not know
    }
  }

  // What the store's page knows, sent on every connect (docs/console/README.md): data-customer (the JSON its server
  // signed), data-customer-signature, data-page-url (else this page), data-cart (JSON). The server keeps the
  // customer only when the signature verifies.
  function pageContext() {
    var params = new URLSearchParams();
    var customer = script.getAttribute("data-customer");
    var signature = script.getAttribute("data-customer-signature");
    if (customer && signature) { params.set("customer", customer); params.set("customer_sig", signature); }
    params.set("page", script.getAttribute("data-page-url") || location.href);
    var cart = script.getAttribute("data-cart");
    if (cart) params.set("cart", cart);
    return "&" + params.toString();
  }

  function connect() {
    if (stopped || (ws && ws.readyState <= 1)) return;
    clearTimeout(reconnectTimer);
    var saved = loadSaved();
    var url = wsBase + "?store=" + encodeURIComponent(store) + (saved.token ? "&resume=" + encodeURIComponent(saved.token) : "") + pageContext();
    setStatus(attempts ? "Reconnecting\u2026" : "Connecting\u2026");
    var socket = new WebSocket(url);
    ws = socket;
    socket.onmessage = function (event) {
      var frame;
      try { frame = JSON.parse(event.data); } catch (e) { return; }
      handle(frame);
    };
    socket.onclose = function (event) {
      if (ws !== socket) return;
      ws = null;
      readyHere = false;
      inflight = answering = null;
      clearTimeout(retryTimer);
      if (generating) finishGenerating("(connection lost)");
      // Not failed: what the server has not acknowledged is still in the outbox and goes again after the reconnect.
      pendingUser = null;
      outbox.forEach(function (entry) { setPending(bubbleFor(entry.id), "queued"); });
      setGenerating(false);
      if (event.code === CLOSE_NO_STORE) {
        stopped = true;
        setStatus("Unavailable");
        showError("The chat is not available for this store.");
        return;
      }
      // Exponential backoff with jitter, so a restarted server is not hit by every widget at once.
      var delay = Math.min(MAX_BACKOFF_MS, 500 * Math.pow(2, attempts)) * (0.5 + Math.random() / 2);
      attempts += 1;
      setStatus("Offline \u2013 reconnecting in " + Math.ceil(delay / 1000) + " s");
      reconnectTimer = setTimeout(connect, delay);
    };
  }

  function sendFrame(frame) {
    if (!ws || ws.readyState !== 1) return false;
    ws.send(JSON.stringify(frame));
    return true;
  }

  function submit() {
    var text = input.value.trim();
    if (!text || generating || pendingUser || inflight) return;
    if (outbox.length >= MAX_OUTBOX) {
      showError("Not connected \u2013 your earlier messages are still waiting to be sent.");
      return;
    }
    // Into the outbox first (it survives a reload), then out when the socket is ready.
    var entry = { id: newClientId(), text: text };
    outbox.push(entry);
    saveOutbox();
    showError("");
    input.value = "";
    hideSuggestions();
    if (ended) { // writing again after the resolution: the assistant answers as before
      ended = false;
      setStatus("Online");
    }
    setPending(addBubble("user", text, { client_id: entry.id }), "queued");
    showEndButton(true);
    if (!readyHere) connect();
    flush();
  }

  // On a phone the open panel covers the screen: the page behind must not scroll under the shopper's finger.
  function lockPageScroll(on) {
    var html = document.documentElement;
    if (on && PHONE && PHONE.matches && savedOverflow === null) {
      savedOverflow = [html.style.overflow, document.body.style.overflow];
      html.style.overflow = "hidden";
      document.body.style.overflow = "hidden";
    } else if (!on && savedOverflow !== null) {
      html.style.overflow = savedOverflow[0];
      document.body.style.overflow = savedOverflow[1];
      savedOverflow = null;
    }
  }

  function focusables() {
    return Array.prototype.filter.call(
      panel.querySelectorAll('button, a[href], input, textarea, select, [tabindex]:not([tabindex="-1"])'),
      function (node) { return !node.disabled && !node.hidden && node.getClientRects().length > 0; }
    );
  }

  function countUnread() {
    unread += 1;
    unreadBadge.textContent = String(unread);
    unreadBadge.hidden = false;
    launcher.setAttribute("aria-label", "Chat with us, " + unread + (unread === 1 ? " unread message" : " unread messages"));
    if (pageTitle === null) pageTitle = document.title;
    document.title = "(" + unread + ") New message" + (unread === 1 ? "" : "s") + (pageTitle ? " \u2013 " + pageTitle : "");
  }

  function clearUnread() {
    unread = 0;
    unreadBadge.hidden = true;
    unreadBadge.textContent = "";
    launcher.removeAttribute("aria-label");
    if (pageTitle !== null) document.title = pageTitle;
    pageTitle = null;
  }

  function open() {
    clearUnread();
    panel.hidden = false;
    launcher.setAttribute("aria-expanded", "true");
    launcher.hidden = true;
    lockPageScroll(true);
    try { sessionStorage.setItem(openKey, "1"); } catch (e) { /* ignore */ }
    if (!log.firstChild) { // before the first `ready` (offline after a reload): what is still to be sent
      outbox.forEach(function (entry) { setPending(addBubble("user", entry.text, { client_id: entry.id }), "queued"); });
    }
    connect();
    input.focus();
  }

  function close() {
    panel.hidden = true;
    lockPageScroll(false);
    launcher.hidden = false;
    launcher.setAttribute("aria-expanded", "false");
    try { sessionStorage.removeItem(openKey); } catch (e) { /* ignore */ }
    launcher.focus();
  }

  launcher.addEventListener("click", open);
  closeButton.addEventListener("click", close);
  endButton.addEventListener("click", function () {
    confirmBar.hidden = false;
    confirmNo.focus();
  });
  confirmNo.addEventListener("click", hideConfirm);
  confirmYes.addEventListener("click", function () {
    if (!sendFrame({ type: "end" })) {
      showError("Not connected \u2013 try again in a moment.");
      return;
    }
    confirmBar.hidden = true;
    input.focus();
  });
  form.addEventListener("submit", function (event) { event.preventDefault(); submit(); });
  stopButton.addEventListener("click", function () { sendFrame({ type: "stop" }); input.focus(); });
  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit();
    }
  });
  input.addEventListener("input", function () {
    var now = Date.now();
    if (now - lastTypingNotice > TYPING_NOTICE_MS && sendFrame({ type: "typing" })) lastTypingNotice = now;
  });
  panel.addEventListener("keydown", function (event) {
    if (event.key === "Escape") {
      event.preventDefault();
      if (!confirmBar.hidden) hideConfirm();
      else close();
      return;
    }
    // A dialog keeps the focus: Tab from the last control goes to the first, Shift+Tab from the first to the last.
    if (event.key === "Tab") {
      var items = focusables();
      if (!items.length) return;
      var active = root.activeElement || document.activeElement;
      var index = items.indexOf(active);
      if (event.shiftKey && index <= 0) {
        event.preventDefault();
        items[items.length - 1].focus();
      } else if (!event.shiftKey && (index === -1 || index === items.length - 1)) {
        event.preventDefault();
        items[0].focus();
      }
    }
  });
  if (PHONE) {
    var onPhoneChange = function () { lockPageScroll(!panel.hidden); };
    if (PHONE.addEventListener) PHONE.addEventListener("change", onPhoneChange);
    else if (PHONE.addListener) PHONE.addListener(onPhoneChange);
  }

  function mount() {
    document.body.appendChild(host);
    var wasOpen = false;
    try { wasOpen = sessionStorage.getItem(openKey) === "1"; } catch (e) { /* ignore */ }
    if (wasOpen || script.getAttribute("data-open") === "true") open();
    // A conversation under way (or messages still to send): connected with the panel closed too, so a person's
    // reply reaches the launcher. Not for a chat opened and left empty: that would be a "new chat" on every page.
    else if ((loadSaved().token && loadSaved().said) || outbox.length) connect();
  }

  window.ShopAssistant = { open: open, close: close, renderMarkdown: renderMarkdown };
  if (document.body) mount();
  else document.addEventListener("DOMContentLoaded", mount);
})();
