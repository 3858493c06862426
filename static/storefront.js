/* A product picture that fails to load becomes the neutral placeholder box (no inline handlers: the CSP forbids
   them). Runs after parsing, so pictures that already failed are caught too. */
(function () {
  "use strict";
  function placeholder(img) {
    img.removeAttribute("src");
    img.classList.add("placeholder");
  }
  document.querySelectorAll("img.product-image").forEach(function (img) {
    if (img.complete && img.naturalWidth === 0 && img.getAttribute("src")) {
      placeholder(img);
    } else {
      img.addEventListener("error", function () { placeholder(img); }, { once: true });
    }
  });
})();
