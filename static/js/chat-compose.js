// Writing with the model on the chat page: the composer sends through POST /api/v1/chats/{id}/generate, which
// answers Server-Sent Events (`context`, `delta`…, then `done`, `error` or `conflict`). The reply is shown as it
// streams; Stop closes the request, and the server keeps what arrived (marked stopped). The stored messages are then
// fetched as the page renders them. Nothing typed is lost: a message that could not be sent stays in the composer.
(function () {
  "use strict";
  const list = document.getElementById("messages");
  if (!list) return;
  const notice = document.getElementById("sync-notice");
  let busy = null; // {controller: AbortController, mode: string}
  const START_TIMEOUT_MS = 60000;

  // The page follows what is being written while the person stays at the bottom of the chat (where sending puts
  // them); scrolling up to read stops it, and coming back down to the end starts it again.
  let following = true;
  function atBottom() {
    return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 48;
  }
  function toBottom() {
    window.scrollTo(0, document.documentElement.scrollHeight);
  }
  function follow() {
    if (following) toBottom();
  }
  function lookedUp() {
    if (busy) following = false;
  }
  window.addEventListener("wheel", (event) => event.deltaY < 0 && lookedUp(), { passive: true });
  window.addEventListener("touchmove", lookedUp, { passive: true });
  document.addEventListener("keydown", (event) => {
    if (["PageUp", "ArrowUp", "Home"].includes(event.key) && !event.target.closest("textarea, input")) lookedUp();
  });
  window.addEventListener("scroll", () => {
    if (atBottom()) following = true;
  }, { passive: true });

  function csrfToken() {
    const match = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  function newKey() {
    return crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + String(Math.random()).slice(2);
  }

  function composer() {
    return document.getElementById("composer");
  }

  function say(text) {
    const status = composer()?.querySelector(".composer-status");
    if (status) status.textContent = text;
  }

  function warn(text, kept) {
    notice.querySelector(".sync-notice-text").textContent = text;
    const pre = notice.querySelector(".sync-pending");
    pre.hidden = !kept;
    pre.textContent = kept || "";
    notice.querySelector(".sync-reapply").hidden = true;
    notice.hidden = false;
  }

  async function fragment(index) {
    const url = list.dataset.fragment.replace(/\/0\/$/, "/" + index + "/");
    const response = await fetch(url, { credentials: "same-origin" });
    return response.ok ? response.text() : null;
  }

  // Show messages [from, to) as the server renders them: replaced where shown, appended where new.
  async function showMessages(from, to) {
    list.querySelector(":scope > p")?.remove(); // "No messages yet."
    for (let index = from; index < to; index++) {
      const html = await fragment(index);
      if (html === null) continue;
      const shown = document.getElementById("m" + index);
      if (shown) shown.outerHTML = html;
      else list.insertAdjacentHTML("beforeend", html);
      const article = document.getElementById("m" + index);
      if (article && window.htmx) htmx.process(article);
      if (article) window.lorekeeperLocalize?.(article);
    }
  }

  async function readChat() {
    const response = await fetch(list.dataset.api, { credentials: "same-origin" });
    return response.ok ? response.json() : null;
  }

  // The chat as stored now: every message from `from` on shown again, the integrity and count taken.
  async function catchUp(from) {
    const chat = await readChat();
    if (!chat) return;
    list.dataset.integrity = chat.integrity;
    const total = chat.total_messages;
    for (let index = total; index < Number(list.dataset.total); index++) document.getElementById("m" + index)?.remove();
    list.dataset.total = total;
    await showMessages(Math.min(from, total), total);
    written(total);
  }

  // Tells the page the chat changed: the message count and the extraction panel follow (static/js/app.js).
  function written(total) {
    document.body.dispatchEvent(new CustomEvent("lorekeeper:written", { bubbles: true, detail: { total } }));
  }

  // `name`: who the server said replies (the `context` event). A continuation streams into a block of its own after
  // the message's text, which keeps its formatting; the stored message replaces both once it ends.
  function streamingArticle(mode, name) {
    if (mode === "swipe" || mode === "continue") {
      const last = document.getElementById("m" + (Number(list.dataset.total) - 1));
      const text = last?.querySelector(".text");
      if (!text) return null;
      last.classList.add("streaming");
      let target = text;
      if (mode === "continue") {
        target = document.createElement("div");
        target.className = "continuation";
        text.append(target);
      } else {
        text.textContent = "";
      }
      return { article: last, text, writer: smoothWriter(target) };
    }
    const article = document.createElement("article");
    article.className = "message " + (mode === "impersonate" ? "user" : "char") + " streaming";
    article.innerHTML = '<header><span class="name"></span><span class="meta">writing…</span></header><div class="text"></div>';
    article.querySelector(".name").textContent = mode === "impersonate" ? "Draft" : name || "…";
    list.append(article);
    follow();
    const text = article.querySelector(".text");
    return { article, text, writer: smoothWriter(text) };
  }

  // The reply as it streams reads as it will once stored: Markdown (*actions*, **bold**, paragraphs) rendered by
  // markdown-it, the library whose Python port renders stored messages (apps/chats/templatetags/chat_text.py). Raw
  // HTML (<br>, <font>) is shown as text until the reply is stored: this renderer never inserts it, the server's
  // cleans it. The whole text is rendered again at most every RENDER_MS, and past RENDER_MOST characters (where
  // the page folds a stored message) it is shown as text: each rendering costs the length of all that arrived.
  const markdown = window.markdownit ? window.markdownit("commonmark", { html: false, breaks: true }) : null;
  const RENDER_MS = 100;
  const RENDER_MOST = 20000;
  function render(node, text) {
    if (markdown && text.length <= RENDER_MOST) node.innerHTML = markdown.render(text);
    else node.textContent = text;
  }

  // Shows a stream's text a few characters a frame, so that it reads as written rather than in the pieces the server
  // sends (one every 100 ms, up to 400 ms on a busy server): what arrived is shown within the gap between pieces.
  function smoothWriter(node) {
    let shown = "";
    let pending = "";
    let gap = 100; // ms between the last two pieces
    let lastPiece = 0;
    let lastFrame = 0;
    let rendered = 0;
    function frame(now) {
      const elapsed = lastFrame ? now - lastFrame : 16;
      lastFrame = now;
      const count = Math.max(1, Math.ceil(pending.length * Math.min(1, elapsed / gap)));
      shown += pending.slice(0, count);
      pending = pending.slice(count);
      if (!pending || now - rendered >= RENDER_MS) {
        render(node, shown);
        rendered = now;
      }
      follow();
      if (pending) requestAnimationFrame(frame);
      else lastFrame = 0;
    }
    return {
      push(text) {
        const now = performance.now();
        if (lastPiece) gap = Math.min(500, Math.max(50, now - lastPiece));
        lastPiece = now;
        if (!pending) requestAnimationFrame(frame);
        pending += text;
      },
      flush() {
        shown += pending;
        pending = "";
        render(node, shown);
      },
    };
  }

  // Server-Sent Events from a fetch body: calls onEvent(name, data) for each complete event.
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let name = "message";
        let data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) name = line.slice(7);
          else if (line.startsWith("data: ")) data += line.slice(6);
        }
        await onEvent(name, data ? JSON.parse(data) : {});
      }
    }
  }

  function setBusy(mode) {
    const box = composer();
    busy = mode ? { controller: new AbortController(), mode } : null;
    box?.querySelector(".send")?.toggleAttribute("hidden", Boolean(mode));
    box?.querySelector(".stop")?.toggleAttribute("hidden", !mode);
    for (const button of box?.querySelectorAll(".continue, .impersonate") || []) button.disabled = Boolean(mode);
    list.classList.toggle("generating", Boolean(mode));
    return busy;
  }

  async function generate(mode, message) {
    if (busy) return;
    const box = composer();
    const form = box?.querySelector("form");
    const body = { mode, stream: true };
    if (message) body.message = message;
    const character = form?.elements.character?.value;
    if (character) body.character = character;
    const connection = form?.elements.connection?.value;
    if (connection) body.connection = Number(connection);
    const before = Number(list.dataset.total);
    const run = setBusy(mode);
    following = true; // the person asked for this: the page goes to where it is written
    toBottom();
    say(mode === "impersonate" ? "Drafting your message…" : "Building the context…");
    let shown = null;
    let response;
    // Until the answer starts: the context is built in well under a second, so a minute means something is wrong.
    // Once it streams, the server ends a stalled model itself (the connection's time-out) with an `error` event.
    let timedOut = false;
    const started = setTimeout(() => {
      timedOut = true;
      run.controller.abort();
    }, START_TIMEOUT_MS);
    try {
      response = await fetch(box.dataset.generate, {
        method: "POST",
        credentials: "same-origin",
        signal: run.controller.signal,
        headers: {
          "Content-Type": "application/json",
          Accept: "text/event-stream, application/json",
          "If-Match": '"' + list.dataset.integrity + '"',
          "X-CSRFToken": csrfToken(),
          "Idempotency-Key": newKey(),
        },
        body: JSON.stringify(body),
      });
    } catch (error) {
      setBusy(null);
      if (run.controller.signal.aborted && !timedOut) {
        // Stopped before the answer began: the server may have written the message already.
        await catchUp(Math.max(before - 1, 0));
        say("Stopped.");
        return false;
      }
      say("");
      const why = timedOut ? "no answer within a minute" : error.message;
      warn("Could not reach Lorekeeper: " + why + ". Your message is still in the box.", null);
      return false;
    } finally {
      clearTimeout(started);
    }
    if (!response.ok) {
      const data = await response.json().catch(() => ({}));
      setBusy(null);
      say("");
      if (response.status === 409 && data.error === "integrity") {
        warn("This chat was changed in another tab or on another device. Reload to see it; your message is kept in the box.", null);
      } else {
        warn("Not sent: " + (data.message || response.statusText), null);
      }
      return false;
    }
    if (mode === "new" && message) form.elements.message.value = "";
    let finished = false;
    try {
      await readEvents(response, async (name, data) => {
        if (name === "context") {
          list.dataset.integrity = data.integrity;
          if (mode === "new" && message) {
            list.dataset.total = before + 1;
            await showMessages(before, before + 1); // the person's message, with its recall card
            follow();
          }
          say("Writing…");
          shown = streamingArticle(mode, data.name);
        } else if (name === "delta" && shown) {
          shown.writer.push(data.text);
        } else if (name === "done" || name === "error" || name === "conflict") {
          finished = true;
          shown?.writer.flush();
          await settle(mode, name, data, shown, before);
        }
      });
    } catch (error) {
      if (!finished) {
        // Stopped by the person (abort), or the connection dropped: the server keeps what arrived.
        await new Promise((resolve) => setTimeout(resolve, 400));
        shown?.article.classList.remove("streaming");
        // A new reply was shown in an article of its own: the stored message replaces it (catchUp brings it).
        if (mode === "impersonate" || mode === "new") shown?.article.remove();
        if (mode !== "impersonate") await catchUp(Math.max(before - 1, 0));
        say(run.controller.signal.aborted ? "Stopped: what arrived is kept." : "The connection dropped: what arrived is kept.");
      }
    } finally {
      setBusy(null);
    }
    return true;
  }

  // Who failed, as the person reads it: Lorekeeper itself (relaying the reply, or its process gone: the stop
  // reasons `server` and `lease`), else their model.
  function failedBy(data) {
    return ["server", "lease"].includes(data.reason) ? "Lorekeeper failed: " : "The model failed: ";
  }

  async function settle(mode, name, data, shown, before) {
    if (mode === "impersonate") {
      shown?.article.remove();
      const area = composer()?.querySelector("textarea");
      if (area && data.text) {
        area.value = data.text;
        area.focus();
      }
      say(name === "done" ? "Your draft is in the box." : "");
      if (name === "error") warn(failedBy(data) + data.detail, null);
      return;
    }
    shown?.article.classList.remove("streaming");
    if (mode === "new") shown?.article.remove();
    if (name === "conflict") {
      warn(data.detail, data.text);
      await catchUp(Math.max(before - 1, 0));
      say("");
      return;
    }
    list.dataset.integrity = data.integrity;
    if (data.index !== null && data.index !== undefined) {
      list.dataset.total = Math.max(Number(list.dataset.total), data.index + 1);
      await showMessages(data.index, data.index + 1);
      follow();
    }
    written(Number(list.dataset.total));
    if (name === "error") {
      warn(failedBy(data) + data.detail + (data.text ? " What arrived is kept, marked failed." : ""), null);
      say("");
    } else if (data.detail) {
      // A bound stopped the reply (its length, the time it took, the model gone silent): said, and what arrived kept.
      say(data.detail.charAt(0).toUpperCase() + data.detail.slice(1) + ". What arrived is kept.");
    } else {
      say("");
    }
  }

  // A group's reply order changed in its chat panel (its answer's event, apps/chats/views/start.py): the composer's
  // default choice says what it now means (a person picks under "manual", else natural order answers), without
  // reloading the composer and what is typed in it.
  document.body.addEventListener("lorekeeper:reply-order", (event) => {
    const option = composer()?.querySelector('select[name=character] option[value=""]');
    if (option) option.textContent = event.detail.order === "manual" ? "(choose)" : "Natural order";
  });

  document.addEventListener("submit", (event) => {
    if (!event.target.matches(".composer-form")) return;
    event.preventDefault();
    const text = event.target.elements.message.value.trim();
    generate("new", text);
  });

  document.addEventListener("keydown", (event) => {
    if (event.target.id !== "composer-text" || event.key !== "Enter" || event.shiftKey || event.isComposing) return;
    event.preventDefault();
    event.target.form.requestSubmit();
  });

  document.addEventListener("click", (event) => {
    if (event.target.closest("#composer .stop")) busy?.controller.abort();
    else if (event.target.closest("#composer .continue")) generate("continue");
    else if (event.target.closest("#composer .impersonate")) generate("impersonate");
    else if (event.target.closest("#messages .regenerate, #messages .swipe-new")) generate("swipe");
  });
})();
