// Editing a chat in the browser through the same sync API every client uses: JSON Patch with If-Match.
// When another tab or device changed the chat meanwhile (409), the pending change is kept and shown, and one
// click re-reads the chat's integrity and re-applies it. Each change carries `test` operations guarding what it
// was made against, so a re-apply never lands on a message that moved or changed.
(function () {
  "use strict";
  const list = document.getElementById("messages");
  if (!list) return;
  const api = list.dataset.api; // /api/v1/chats/<id>/
  const notice = document.getElementById("sync-notice");
  let pending = null; // {send: () => Promise, describe: string, text: string}

  function csrfToken() {
    const match = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  async function request(method, path, body, contentType) {
    const response = await fetch(api + path, {
      method,
      credentials: "same-origin",
      headers: {
        "Content-Type": contentType || "application/json",
        "If-Match": '"' + list.dataset.integrity + '"',
        "X-CSRFToken": csrfToken(),
        "Idempotency-Key": crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random(),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = await response.json().catch(() => ({}));
    if (response.ok && data.integrity) {
      list.dataset.integrity = data.integrity;
      if (data.total_messages !== undefined) list.dataset.total = data.total_messages;
      // The message count and the extraction panel follow (static/js/app.js).
      const detail = { total: data.total_messages };
      document.body.dispatchEvent(new CustomEvent("lorekeeper:written", { bubbles: true, detail }));
    }
    return { status: response.status, data };
  }

  async function readMessage(index) {
    const response = await fetch(api + "messages/" + index + "/", { credentials: "same-origin" });
    if (!response.ok) throw new Error("could not read message " + index);
    return response.json();
  }

  async function refreshMessage(index) {
    const url = list.dataset.fragment.replace(/\/0\/$/, "/" + index + "/");
    const response = await fetch(url, { credentials: "same-origin" });
    const article = document.getElementById("m" + index);
    if (response.ok && article) {
      article.outerHTML = await response.text();
      htmx.process(document.getElementById("m" + index));
      window.lorekeeperLocalize?.(document.getElementById("m" + index));
    }
  }

  function showNotice(text, pendingText) {
    notice.querySelector(".sync-notice-text").textContent = text;
    const pre = notice.querySelector(".sync-pending");
    pre.hidden = !pendingText;
    pre.textContent = pendingText ? "Your change: " + pendingText : "";
    notice.querySelector(".sync-reapply").hidden = !pending;
    notice.hidden = false;
  }

  // Send a change; on a conflict keep it pending and tell the person.
  async function apply(change) {
    const result = await change.send();
    if (result.status === 409 && result.data.error === "integrity") {
      pending = change;
      showNotice(
        "This chat was changed in another tab or on another device since you opened it. Nothing was saved yet.",
        change.text,
      );
      return false;
    }
    if (result.status === 409 && result.data.error === "patch_conflict") {
      pending = null;
      showNotice(
        "What you changed was itself changed or moved elsewhere meanwhile, so your change was not applied. " +
          "Reload the page to see the current chat; your text is kept below.",
        change.text,
      );
      return false;
    }
    if (result.status >= 400) {
      pending = null;
      showNotice("Not saved: " + (result.data.message || JSON.stringify(result.data)), change.text);
      return false;
    }
    pending = null;
    notice.hidden = true;
    await change.done(result.data);
    return true;
  }

  async function readChat() {
    const response = await fetch(api, { credentials: "same-origin" });
    if (!response.ok) throw new Error("could not read the chat (" + response.status + ")");
    return response.json();
  }

  notice.querySelector(".sync-reapply").addEventListener("click", async () => {
    if (!pending) return;
    let chat;
    try {
      chat = await readChat();
    } catch (error) {
      showNotice("Could not reach the server to re-read the chat: " + error.message, pending.text);
      return;
    }
    list.dataset.integrity = chat.integrity;
    list.dataset.total = chat.total_messages;
    const change = pending;
    change.done = () => window.location.reload(); // show the merged chat
    await apply(change);
  });
  notice.querySelector(".sync-dismiss").addEventListener("click", () => {
    notice.hidden = true;
  });

  function patch(operations) {
    return () => request("POST", "patch", { operations });
  }

  async function startEdit(article) {
    const index = Number(article.dataset.index);
    const message = await readMessage(index);
    const text = article.querySelector(".text");
    const form = document.createElement("form");
    form.className = "edit-form";
    const area = document.createElement("textarea");
    area.rows = Math.min(20, Math.max(4, message.mes.split("\n").length + 1));
    area.value = message.mes;
    form.append(area);
    form.insertAdjacentHTML(
      "beforeend",
      '<button type="submit">Save</button> <button type="button" class="link cancel-edit">Cancel</button>',
    );
    text.replaceWith(form);
    area.focus();
    form.querySelector(".cancel-edit").addEventListener("click", () => refreshMessage(index));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const operations = [
        { op: "test", path: "/" + index + "/mes", value: message.mes },
        { op: "replace", path: "/" + index + "/mes", value: area.value },
      ];
      const swipes = message.swipes;
      if (Array.isArray(swipes) && Number.isInteger(message.swipe_id) && message.swipe_id < swipes.length) {
        operations.push({ op: "replace", path: "/" + index + "/swipes/" + message.swipe_id, value: area.value });
      }
      await apply({ send: patch(operations), text: area.value, done: () => refreshMessage(index) });
    });
  }

  async function useSwipe(article, swipe) {
    const index = Number(article.dataset.index);
    const message = await readMessage(index);
    const operations = [
      { op: "test", path: "/" + index + "/swipe_id", value: message.swipe_id },
      { op: "replace", path: "/" + index + "/swipe_id", value: swipe },
      { op: "replace", path: "/" + index + "/mes", value: message.swipes[swipe] },
    ];
    await apply({
      send: patch(operations),
      text: "use swipe " + (swipe + 1) + " of message #" + index,
      done: () => refreshMessage(index),
    });
  }

  async function deleteFrom(article) {
    const index = Number(article.dataset.index);
    const shown = Number(list.dataset.total);
    const count = shown - index;
    if (!window.confirm("Delete message #" + index + (count > 1 ? " and the " + (count - 1) + " after it" : "") + "?")) {
      return;
    }
    const message = await readMessage(index);
    let removed = 0;
    await apply({
      // Built when sent (again on a re-apply), from the chat's length then: messages added elsewhere since
      // the page loaded go too, and the `test` makes sure #index is still the message the person chose.
      send: async () => {
        const total = (await readChat()).total_messages;
        const operations = [{ op: "test", path: "/" + index + "/mes", value: message.mes }];
        for (let i = total - 1; i >= index; i--) operations.push({ op: "remove", path: "/" + i });
        removed = total - index;
        return request("POST", "patch", { operations });
      },
      text: "delete from message #" + index,
      done: () => {
        for (let i = index; i < index + removed; i++) document.getElementById("m" + i)?.remove();
      },
    });
  }

  // Hidden (is_system, as SillyTavern's /hide marks it): kept, and searched as memory, but not sent to the model.
  async function setHidden(article, hidden) {
    const index = Number(article.dataset.index);
    const message = await readMessage(index);
    const operations = [
      { op: "test", path: "/" + index + "/mes", value: message.mes },
      { op: "add", path: "/" + index + "/is_system", value: hidden },
    ];
    await apply({
      send: patch(operations),
      text: (hidden ? "hide" : "show") + " message #" + index,
      done: () => refreshMessage(index),
    });
  }

  async function deleteOne(article) {
    const index = Number(article.dataset.index);
    if (!window.confirm("Delete message #" + index + "? The messages after it stay.")) return;
    const message = await readMessage(index);
    const operations = [
      { op: "test", path: "/" + index + "/mes", value: message.mes },
      { op: "remove", path: "/" + index },
    ];
    // The messages after it move up one place: the page is shown again, numbered as the chat now is.
    await apply({ send: patch(operations), text: "delete message #" + index, done: () => window.location.reload() });
  }

  list.addEventListener("click", (event) => {
    const article = event.target.closest("article.message");
    if (!article) return;
    if (event.target.matches(".edit-message")) startEdit(article);
    else if (event.target.matches(".delete-from")) deleteFrom(article);
    else if (event.target.matches(".delete-one")) deleteOne(article);
    else if (event.target.matches(".hide-message")) setHidden(article, true);
    else if (event.target.matches(".show-message")) setHidden(article, false);
    else if (event.target.matches(".use-swipe")) useSwipe(article, Number(event.target.dataset.swipe));
    else if (event.target.matches(".swipe-prev, .swipe-next:not(.swipe-new)")) {
      const step = event.target.matches(".swipe-next") ? 1 : -1;
      readMessage(Number(article.dataset.index)).then((message) => {
        const target = (message.swipe_id || 0) + step;
        if (Array.isArray(message.swipes) && target >= 0 && target < message.swipes.length) useSwipe(article, target);
      });
    }
  });

  const metadataForm = document.getElementById("metadata-form");
  // What the person's edit was made against: a re-apply after a conflict must not overwrite another device's
  // metadata changes, so the patch tests it first.
  let metadataSeen = metadataForm ? JSON.parse(metadataForm.elements.metadata.value) : null;
  metadataForm?.addEventListener("submit", async (event) => {
    event.preventDefault();
    const raw = metadataForm.elements.metadata.value;
    let value;
    try {
      value = JSON.parse(raw);
    } catch (error) {
      showNotice("The metadata is not valid JSON: " + error.message, null);
      return;
    }
    const operations = [
      { op: "test", path: "", value: metadataSeen },
      { op: "replace", path: "", value },
    ];
    await apply({
      send: () => request("PATCH", "metadata", operations, "application/json-patch+json"),
      text: raw,
      done: (data) => {
        metadataSeen = data.chat_metadata;
        metadataForm.elements.metadata.value = JSON.stringify(data.chat_metadata, null, 2);
      },
    });
  });
})();
