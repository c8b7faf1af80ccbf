// The story page (templates/extraction/story.html): a scene band of the timeline links to its scene's card, which
// is folded to a line; following the link opens the card. Without scripts the link still scrolls to it.
(function () {
  "use strict";

  function openScene(id) {
    const card = id && id.indexOf("scene-") === 0 ? document.getElementById(id) : null;
    const details = card && card.querySelector(":scope > details");
    if (details) details.open = true;
  }

  document.addEventListener("click", function (event) {
    const link = event.target.closest && event.target.closest("a.scene-link");
    if (!link) return;
    const href = link.getAttribute("href") || "";
    openScene(href.slice(href.indexOf("#") + 1));
  });

  // Arriving from a link made elsewhere (…/story/#scene-12).
  document.addEventListener("DOMContentLoaded", function () {
    openScene(decodeURIComponent(window.location.hash.slice(1)));
  });
})();
