// Flagpole's admin UI: small enhancements over pages that work without JavaScript.
// No inline handlers anywhere (the page policy forbids them): everything is wired here.
"use strict";

// Times: shown in UTC by the server, here in the browser's own zone.
function localTimes(root) {
  for (const el of root.querySelectorAll("time[datetime]")) {
    const at = new Date(el.getAttribute("datetime"));
    if (!isNaN(at)) {
      el.textContent = at.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
      el.title = el.getAttribute("datetime");
    }
  }
}

// Destructive actions ask first: a button with data-confirm (optionally only when the
// form's action select has the value in data-confirm-action).
document.addEventListener("submit", (event) => {
  const button = event.submitter;
  if (!button || !button.dataset.confirm) return;
  const only = button.dataset.confirmAction;
  if (only) {
    const action = event.target.querySelector("[name=action]");
    if (!action || action.value !== only) return;
  }
  if (!window.confirm(button.dataset.confirm)) {
    event.preventDefault();
    event.stopImmediatePropagation();
  }
}, true);

// "Select all on this page" for the bulk actions.
document.addEventListener("change", (event) => {
  if (event.target.id !== "select-all") return;
  for (const box of document.querySelectorAll("input[name=names]")) box.checked = event.target.checked;
});

// Copy buttons (a token's secret).
document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const field = document.querySelector(button.dataset.copy);
  if (!field) return;
  field.select();
  try {
    await navigator.clipboard.writeText(field.value);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Selected: press Ctrl+C";
  }
});

// The command palette: Ctrl+K / Cmd+K opens a list of places and commands, filtered as you type.
const COMMANDS = [
  ["Toggles", "/ui/toggles"], ["New toggle", "/ui/new-toggle"], ["Archive", "/ui/archive"],
  ["Events", "/ui/events"], ["Playground", "/ui/playground"], ["API tokens", "/ui/tokens"],
  ["Stale toggles", "/ui/toggles?stale=yes"], ["Toggles switched on", "/ui/toggles?enabled=on"],
];

function palette() {
  let dialog = document.getElementById("palette");
  if (dialog) return dialog;
  dialog = document.createElement("dialog");
  dialog.id = "palette";
  dialog.setAttribute("aria-labelledby", "palette-title");
  dialog.innerHTML = '<article><h2 id="palette-title">Go to</h2>' +
    '<label for="palette-q">Command or page</label><input id="palette-q" type="search" autocomplete="off">' +
    '<ul id="palette-list"></ul></article>';
  document.body.appendChild(dialog);
  const input = dialog.querySelector("input");
  const list = dialog.querySelector("ul");
  const show = () => {
    const q = input.value.toLowerCase();
    list.replaceChildren(...COMMANDS.filter(([label]) => label.toLowerCase().includes(q)).map(([label, href]) => {
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.href = href;
      a.textContent = label;
      li.appendChild(a);
      return li;
    }));
  };
  input.addEventListener("input", show);
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      const first = list.querySelector("a");
      if (first) { e.preventDefault(); window.location.href = first.href; }
    }
  });
  show();
  return dialog;
}

document.addEventListener("keydown", (event) => {
  const typing = event.target.closest("input, textarea, select, [contenteditable]");
  if (event.key === "/" && !typing && !event.ctrlKey && !event.metaKey) {
    const search = document.querySelector("input[type=search]");
    if (search) {
      event.preventDefault();
      search.focus();
      search.select();
    }
  } else if (event.key.toLowerCase() === "k" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    const dialog = palette();
    dialog.showModal();
    dialog.querySelector("input").focus();
  }
});

document.addEventListener("DOMContentLoaded", () => localTimes(document));
document.addEventListener("htmx:afterSettle", (event) => localTimes(event.target));
