"use strict";
(function () {
  // A link to something inside a folded part opens the folds around it.
  function reveal() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id ? document.getElementById(id) : null;
    for (var node = target; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") {
        node.open = true;
      }
    }
    if (target) {
      target.scrollIntoView();
    }
  }
  function foldAll(open) {
    var folds = document.querySelectorAll("details.fold");
    for (var i = 0; i < folds.length; i += 1) {
      folds[i].open = open;
    }
  }
  window.addEventListener("hashchange", reveal);
  document.addEventListener("DOMContentLoaded", function () {
    var unfold = document.getElementById("unfold-all");
    var fold = document.getElementById("fold-all");
    if (unfold) {
      unfold.addEventListener("click", function () { foldAll(true); });
    }
    if (fold) {
      fold.addEventListener("click", function () { foldAll(false); });
    }
    if (window.location.hash) {
      reveal();
    }
  });
})();
