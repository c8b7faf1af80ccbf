// Small behaviours the pages need; everything else is htmx.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  // Moments written by the server in its own time zone (apps/common/templatetags/local_time.py), shown in the
  // reader's zone and way of writing dates; again in whatever htmx loads later.
  function localize(root) {
    root.querySelectorAll("time[data-local]").forEach(function (node) {
      const moment = new Date(node.getAttribute("datetime"));
      if (isNaN(moment.getTime())) return;
      const style = node.dataset.local;
      // "title": a chat's default title (apps/chats/templatetags/chat_titles.py), to the minute, the date first.
      const options =
        style === "time"
          ? { timeStyle: "medium" }
          : style === "title"
            ? { day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit" }
            : { dateStyle: "medium", timeStyle: style === "seconds" ? "medium" : "short" };
      node.textContent = new Intl.DateTimeFormat(undefined, options).format(moment);
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    localize(document);
  });
  document.addEventListener("htmx:load", function (event) {
    localize(event.detail.elt);
  });
  // Messages the chat page fetches itself (a streamed reply, an edit) are shown as the server wrote them: localized
  // by that page's code, as htmx's are (they read "2026-11-29 14:23" beside "Nov 29, 2026, 2:23 PM").
  window.lorekeeperLocalize = localize;

  // A write on the chat page (an edit, a delete, a reply): the count of messages in its header follows. The
  // extraction panel listens for the same event itself (hx-trigger), to show the work the write started.
  document.addEventListener("lorekeeper:written", function (event) {
    const count = document.getElementById("message-count");
    const total = event.detail && event.detail.total;
    if (count && typeof total === "number") count.textContent = total + (total === 1 ? " message" : " messages");
    // "Go to message #" offers the messages there are now, not those there were when the page was opened.
    const jump = document.getElementById("jump-at");
    if (jump && typeof total === "number") {
      if (total > 0) {
        jump.max = String(total - 1);
        jump.placeholder = "0–" + (total - 1);
      } else {
        jump.removeAttribute("max");
        jump.removeAttribute("placeholder");
      }
    }
  });

  // A new API token's Copy button (shown where the browser lets a page write the clipboard: a secure context).
  function copyButtons(root) {
    if (!navigator.clipboard) return;
    root.querySelectorAll("button[data-copy]").forEach(function (button) {
      button.hidden = false;
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    copyButtons(document);
  });
  document.addEventListener("htmx:load", function (event) {
    copyButtons(event.detail.elt);
  });
  document.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest("button[data-copy]");
    if (!button) return;
    const said = button.parentElement.querySelector(".copied");
    navigator.clipboard.writeText(button.dataset.copy).then(
      function () {
        if (said) said.textContent = "Copied.";
      },
      function () {
        if (said) said.textContent = "Not copied: select the token and copy it.";
      }
    );
  });

  // On a phone the site's links fold into a menu (static/css/app.css): the button opens and closes it.
  document.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest(".menu-toggle");
    if (!button) return;
    const open = button.closest(".topbar").classList.toggle("open");
    button.setAttribute("aria-expanded", open ? "true" : "false");
  });

  // What stays pinned under the site's bar (the chat page's place bar, the sync notice) is placed from the bar's
  // height as drawn: its links wrap to a second line on a narrow window or with a long name.
  function topbarHeight() {
    const bar = document.querySelector(".topbar");
    if (bar) document.documentElement.style.setProperty("--topbar-height", bar.offsetHeight + "px");
  }
  document.addEventListener("DOMContentLoaded", function () {
    topbarHeight();
    const bar = document.querySelector(".topbar");
    if (bar && window.ResizeObserver) new ResizeObserver(topbarHeight).observe(bar);
  });

  // A "Close" in a dropdown of answers (the chat page's search) empties it.
  document.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest("[data-empties]");
    if (!button) return;
    const target = document.querySelector(button.dataset.empties);
    if (target) target.replaceChildren();
  });

  // Older messages are inserted above what the reader is looking at: keep it in place. This runs on afterSwap,
  // synchronously, so the new "older" sentinel is already off screen when its IntersectionObserver first looks.
  let heightBefore = null;
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.target && event.detail.target.hasAttribute("data-keep-scroll")) {
      heightBefore = document.body.scrollHeight;
    }
  });
  document.addEventListener("htmx:afterSwap", function () {
    if (heightBefore !== null) {
      window.scrollBy(0, document.body.scrollHeight - heightBefore);
      heightBefore = null;
    }
  });

  // Upload progress for forms that name a <progress> element in data-progress.
  document.addEventListener("htmx:xhr:progress", function (event) {
    const form = event.target.closest && event.target.closest("form[data-progress]");
    if (!form || !event.detail.lengthComputable) return;
    const bar = document.getElementById(form.dataset.progress);
    const label = form.querySelector(".progress-label");
    const percent = Math.round((event.detail.loaded / event.detail.total) * 100);
    bar.hidden = false;
    bar.value = percent;
    if (label) {
      label.hidden = false;
      label.textContent = percent < 100 ? "Uploading… " + percent + "%" : "Importing…";
    }
  });

  // A write made through htmx (a recall card) tells the chat's new integrity: the editor's next write sends it.
  document.body.addEventListener("lk-integrity", function (event) {
    const list = document.getElementById("messages");
    if (list && event.detail && event.detail.integrity) list.dataset.integrity = event.detail.integrity;
  });

  // What is drawn as a button without being one (a node of the recall graph, role="button") acts on Enter as a
  // button does: a click. (An hx-trigger filter such as keyup[key=='Enter'] is code htmx would evaluate.)
  document.addEventListener("keyup", function (event) {
    if (event.key !== "Enter" || !event.target.closest) return;
    const drawn = event.target.closest("[role=button]:not(button)");
    if (drawn) drawn.dispatchEvent(new MouseEvent("click", { bubbles: true }));
  });

  // Forms that ask before they act (data-confirm: removing a connection, forgetting a device, restoring an earlier
  // version of a chat), in place of inline onsubmit handlers, which the pages' Content-Security-Policy refuses.
  document.addEventListener("submit", function (event) {
    const question = event.target.dataset && event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  });

  // An htmx write from a form marked data-sends-integrity (a recall card) sends the chat's integrity as the page
  // holds it, so that a write made meanwhile elsewhere answers a conflict. htmx evaluates no js: values here.
  document.addEventListener("htmx:configRequest", function (event) {
    const form = event.detail.elt.closest && event.detail.elt.closest("[data-sends-integrity]");
    const list = document.getElementById("messages");
    if (form && list && list.dataset.integrity) event.detail.parameters.integrity = list.dataset.integrity;
  });

  // Budget sliders show their value; the simple/advanced switch shows the sliders of its mode.
  document.addEventListener("input", function (event) {
    const output = event.target.dataset && document.getElementById(event.target.dataset.output || "");
    if (output) output.textContent = event.target.value;
  });
  function budgetMode() {
    const checked = document.querySelector("input[name=budget_mode]:checked");
    if (!checked) return;
    document.querySelectorAll("[data-budget-mode]").forEach(function (element) {
      element.hidden = element.dataset.budgetMode !== checked.value;
    });
  }
  document.addEventListener("change", function (event) {
    if (event.target.name === "budget_mode") budgetMode();
  });
  document.addEventListener("DOMContentLoaded", budgetMode);
})();
