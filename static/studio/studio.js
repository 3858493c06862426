/* The studio's small bits of behaviour: live token count, the streaming preview, copying the embed snippet.
 * Text from the server or the model only ever reaches the page as text nodes (textContent), never as HTML. */
(function () {
  "use strict";

  function csrfToken() {
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function post(url, fields) {
    var body = new URLSearchParams(fields);
    return fetch(url, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken() },
    });
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function safeHttpUrl(raw) {
    try {
      var url = new URL(raw, document.baseURI);
      if (url.protocol === "http:" || url.protocol === "https:") return url.href;
    } catch (e) { /* not a URL */ }
    return null;
  }

  // --- live token count ------------------------------------------------------------------------------
  var form = document.getElementById("draft-form");
  if (form) {
    var timer = null;
    var budget = form.querySelector("[data-budget]");
    var update = function () {
      // The prompt alone: policies are the knowledge documents, never part of it.
      post(form.dataset.tokensUrl, { system_prompt: form.elements.system_prompt.value }).then(function (r) { return r.json(); }).then(function (data) {
        if (!data.ready) return;
        budget.querySelector("[data-loading]").hidden = true;
        budget.querySelector("[data-counts]").hidden = false;
        budget.querySelector("[data-block-size]").textContent = data.block_size;
        budget.querySelector("[data-max-len]").textContent = data.max_model_len;
        budget.querySelector("[data-tokens]").textContent = data.tokens;
        budget.querySelector("[data-blocks]").textContent = data.blocks;
        budget.querySelector("[data-full-blocks]").textContent = data.full_blocks;
        budget.querySelector("[data-percent]").textContent = Math.round(100 * data.tokens / data.max_model_len);
        budget.querySelector("[data-room]").textContent = data.room;
        budget.querySelector("[data-warning]").hidden = !data.too_long;
        budget.classList.toggle("too-long", data.too_long);
      }).catch(function () { /* the count is a convenience; saving still works */ });
    };
    form.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(update, 400);
    });
    // Opened while the model was still loading: count as soon as it is there.
    if (!budget.querySelector("[data-loading]").hidden) update();
  }

  // --- preview -----------------------------------------------------------------------------------------
  function placeholderImage(img) {
    img.addEventListener("error", function () { img.removeAttribute("src"); img.classList.add("broken"); });
  }

  function renderCards(list, items) {
    list.textContent = "";
    (items || []).forEach(function (item) {
      var li = el("li", "card-item");
      var image = item.image ? safeHttpUrl(item.image) : null;
      var img = el("img", "card-image" + (image ? "" : " broken"));
      img.alt = "";
      img.width = 48;
      img.height = 48;
      placeholderImage(img);
      if (image) img.src = image;
      li.appendChild(img);
      var body = el("div", "card-body");
      var href = item.url ? safeHttpUrl(item.url) : null;
      var title = el(href ? "a" : "span", "card-title", item.title || item.sku || "");
      if (href) { title.href = href; title.target = "_blank"; title.rel = "noopener noreferrer"; }
      body.appendChild(title);
      body.appendChild(el("span", "card-price", (item.price || "") + " " + (item.currency || "")));
      body.appendChild(el("span", "stock " + (item.in_stock ? "in" : "out"), item.in_stock ? "In stock" : "Out of stock"));
      li.appendChild(body);
      list.appendChild(li);
    });
  }

  function renderQuotes(list, items) {
    if (!list) return;
    list.textContent = "";
    (items || []).forEach(function (item) {
      var li = el("li", "quote");
      if (item.title) li.appendChild(el("strong", "", item.title + ": "));
      li.appendChild(el("span", "", item.text));
      list.appendChild(li);
    });
  }

  function handle(cell, event) {
    if (event.type === "products") {
      renderCards(cell.querySelector(".cards"), event.items);
    } else if (event.type === "sources") {
      renderQuotes(cell.querySelector(".quotes"), event.items);
    } else if (event.type === "token") {
      cell.querySelector(".text").textContent += event.text;
    } else if (event.type === "end") {
      if (typeof event.text === "string") cell.querySelector(".text").textContent = event.text;
      var u = event.usage || {};
      var modelText = event.model_text ? " · model text " + event.model_text + ": " + event.model_sentences +
        " sentence" + (event.model_sentences === 1 ? "" : "s") + " kept" : "";
      cell.querySelector(".stats").textContent =
        u.prompt_tokens + " prompt tokens, " + u.cached_tokens + " cached · " + u.completion_tokens +
        " generated · first token " + (event.first_token_ms === null ? "—" : event.first_token_ms + " ms") +
        " · " + event.finish_reason + (event.reply ? " (" + event.reply + " reply)" : "") + modelText;
      // What the checker kept off the shopper's screen, and why: for the owner's eyes only.
      var dropped = cell.querySelector(".dropped");
      dropped.textContent = "";
      (event.dropped || []).forEach(function (item) {
        var li = el("li", "", "");
        li.appendChild(el("s", "", item.text));
        li.appendChild(el("span", "why", " (" + item.reason + ")"));
        dropped.appendChild(li);
      });
      cell.dataset.cachedTokens = u.cached_tokens;
      cell.removeAttribute("aria-busy");
      cell.classList.add("done");
    } else if (event.type === "error") {
      cell.querySelector(".text").textContent = "";
      cell.querySelector(".stats").textContent = event.message;
      cell.removeAttribute("aria-busy");
      cell.classList.add("done", "failed");
    }
  }

  async function runOne(url, cell, version, question) {
    cell.setAttribute("aria-busy", "true");
    cell.classList.remove("done", "failed");
    cell.querySelector(".text").textContent = "";
    cell.querySelector(".cards").textContent = "";
    cell.querySelector(".dropped").textContent = "";
    if (cell.querySelector(".quotes")) cell.querySelector(".quotes").textContent = "";
    cell.querySelector(".stats").textContent = "…";
    if (!version) {
      handle(cell, { type: "error", message: "nothing published" });
      return;
    }
    try {
      var response = await post(url, { version: version, question: question });
      if (!response.ok || !response.body) {
        handle(cell, { type: "error", message: "preview failed (" + response.status + ")" });
        return;
      }
      var reader = response.body.getReader();
      var decoder = new TextDecoder();
      var buffer = "";
      for (;;) {
        var chunk = await reader.read();
        if (chunk.done) break;
        buffer += decoder.decode(chunk.value, { stream: true });
        var parts = buffer.split("\n\n");
        buffer = parts.pop();
        parts.forEach(function (part) {
          if (part.indexOf("data: ") === 0) handle(cell, JSON.parse(part.slice(6)));
        });
      }
    } catch (e) {
      handle(cell, { type: "error", message: "preview failed: " + e });
    }
  }

  var preview = document.getElementById("preview");
  var runButton = document.getElementById("run-preview");
  if (preview && runButton) {
    runButton.addEventListener("click", function () {
      runButton.disabled = true;
      var runs = [];
      preview.querySelectorAll("tr[data-question]").forEach(function (row) {
        var question = row.dataset.question;
        runs.push(runOne(preview.dataset.url, row.querySelector('[data-side="draft"]'), preview.dataset.draft, question));
        runs.push(runOne(preview.dataset.url, row.querySelector('[data-side="published"]'), preview.dataset.published, question));
      });
      Promise.all(runs).then(function () { runButton.disabled = false; });
    });
  }

  // --- playground: any question, any two versions ---------------------------------------------------------
  var playground = document.getElementById("playground");
  var playgroundForm = document.getElementById("playground-form");
  if (playground && playgroundForm) {
    playgroundForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var question = playgroundForm.elements.question.value.trim();
      if (!question) return;
      var button = document.getElementById("run-playground");
      button.disabled = true;
      var runs = ["left", "right"].map(function (side) {
        var select = playgroundForm.elements[side];
        playground.querySelector('[data-head="' + side + '"]').textContent = select.options[select.selectedIndex].text;
        return runOne(playground.dataset.url, playground.querySelector('[data-side="' + side + '"]'), select.value, question);
      });
      Promise.all(runs).then(function () { button.disabled = false; });
    });
  }

  // --- a score in progress (the scoring thread scores): follow it, then show the result ----------------------
  var scoreBox = document.getElementById("score");
  if (scoreBox && scoreBox.dataset.state === "running") {
    var poll = function () {
      fetch(scoreBox.dataset.statusUrl, { credentials: "same-origin" }).then(function (r) { return r.json(); })
        .then(function (data) {
          if (data.state !== "running") { window.location.reload(); return; }
          scoreBox.querySelector("[data-score-done]").textContent = data.done;
          scoreBox.querySelector("[data-score-total]").textContent = data.total;
          setTimeout(poll, 1500);
        }).catch(function () { setTimeout(poll, 5000); });
    };
    setTimeout(poll, 1500);
  }

  // --- right after a publish the nodes are still pre-warming: follow them for a while ----------------------
  var nodesLine = document.querySelector("p.nodes[data-url]");
  if (nodesLine) {
    var nodePolls = 0;
    var followNodes = function () {
      if (Number(nodesLine.dataset.warm) >= Number(nodesLine.dataset.nodes) || nodePolls++ >= 30) return;
      setTimeout(function () {
        fetch(nodesLine.dataset.url, { credentials: "same-origin" }).then(function (r) { return r.json(); })
          .then(function (data) {
            if (data.text) {
              nodesLine.textContent = data.text;
              nodesLine.dataset.warm = data.warm;
              nodesLine.dataset.nodes = data.nodes;
            }
            followNodes();
          }).catch(followNodes);
      }, 1000);
    };
    followNodes();
  }

  // --- copy the embed snippet ----------------------------------------------------------------------------
  document.querySelectorAll("[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      var text = document.querySelector(button.dataset.copy).textContent;
      navigator.clipboard.writeText(text).then(function () { button.textContent = "Copied"; },
        function () { button.textContent = "Select and copy the text above"; });
    });
  });
})();
