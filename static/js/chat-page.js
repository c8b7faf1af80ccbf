// The chat page's own behaviours (templates/chats/chat_detail.html), kept out of inline scripts so that a
// Content-Security-Policy without 'unsafe-inline' lets them run. Loaded without `defer` at the end of the page: it
// places the page before htmx starts watching the "older" and "newer" sentinels.
(function () {
  "use strict";
  const list = document.getElementById("messages");
  if (!list) return;

  // Open on the newest messages, or on the message asked for (?at=N), in the middle of the screen. A link of the
  // older form, #m<N>, is opened as ?at=<N>: the message is rarely among the newest.
  const at = list.dataset.at;
  if (at === undefined) {
    if (/^#m\d+$/.test(location.hash)) location.replace("?at=" + location.hash.slice(2));
    else window.scrollTo(0, document.documentElement.scrollHeight);
  } else {
    document.getElementById("m" + at)?.scrollIntoView({ block: "center" });
  }

  // A page opened on its newest messages stays there while what loads after it (the composer, the notice of what
  // waits for the person, a recall card) makes it taller, until the person scrolls away from the end.
  let pinned = at === undefined;
  function atBottom() {
    return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 48;
  }
  // Only the person unpins it (the browser's own scroll anchoring moves the page too while it grows).
  function away() {
    pinned = false;
  }
  window.addEventListener("wheel", (event) => event.deltaY < 0 && away(), { passive: true });
  window.addEventListener("touchmove", away, { passive: true });
  window.addEventListener("keydown", (event) => {
    if (["PageUp", "ArrowUp", "Home"].includes(event.key) && !event.target.closest("textarea, input")) away();
  });
  document.addEventListener("click", (event) => {
    if (event.target.closest("a[href^='#'], .chat-place, .chat-search-results")) away();
  });
  window.addEventListener("scroll", () => {
    if (atBottom()) pinned = true;
  }, { passive: true });
  if (window.ResizeObserver) {
    new ResizeObserver(() => {
      if (pinned && !atBottom()) window.scrollTo(0, document.documentElement.scrollHeight);
    }).observe(document.querySelector(".chat-layout") || document.body);
  }

  // The panels beside (or above) the conversation remember whether they were open, across chats.
  const KEY = "lorekeeper.chat-panel.";
  function stored(name) {
    try {
      return localStorage.getItem(KEY + name);
    } catch (error) {
      return null; // storage refused (private mode): the panels open closed
    }
  }
  for (const panel of document.querySelectorAll("details.chat-panel[data-panel]")) {
    if (stored(panel.dataset.panel) === "open") panel.open = true;
    panel.addEventListener("toggle", () => {
      try {
        localStorage.setItem(KEY + panel.dataset.panel, panel.open ? "open" : "closed");
      } catch (error) {
        console.warn("The panel's state is not kept:", error.message);
      }
    });
  }

  // One menu per message: a tap elsewhere, Escape, or a tap on one of its items closes it.
  function closeMenus(except) {
    for (const menu of document.querySelectorAll("details.message-menu[open]")) if (menu !== except) menu.open = false;
  }
  document.addEventListener("click", (event) => {
    const menu = event.target.closest("details.message-menu");
    if (!menu) closeMenus(null);
    else if (event.target.closest(".menu-items button, .menu-items a")) menu.open = false;
    else closeMenus(menu);
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") closeMenus(null);
  });
})();
